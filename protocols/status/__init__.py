"""STATUS Bench: object states and the change between two images, labelled as quintuplets.

Spec: docs/protocols/status.md. Prompts: prompts.py; scoring: scoring.py; the authors' release
file, read and written: formats.py (this folder).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from protocols.base import Protocol, letter, seeded_rng, shuffled

from .fields import CATEGORIES as CATEGORIES  # re-exported: protocols/status/scoring.py
from .fields import DIFFERENCES as DIFFERENCES  # re-exported: protocols/status/scoring.py
from .fields import ITEM_FIELDS

QUERIES = ("osi_a", "osi_b", "ir_a", "ir_b", "sci2", "sci4")
# What one quintuplet annotation holds, in the form's order.
RESULT_FIELDS = ("state_a", "state_b", "change", "change_distractors", "category", "difference")
# Chance per metric (percent), shown on every table.
CHANCE = {
    "acc_osi": Decimal("50.00"),
    "acc_ir": Decimal("50.00"),
    "acc_sci": Decimal("50.00"),
    "oa": Decimal("50.00"),
    "racc_osi": Decimal("25.00"),
    "racc_ir": Decimal("25.00"),
    "racc_sci": Decimal("25.00"),
    "roa": Decimal("1.56"),
}

METRICS = {
    "acc_osi": (
        "Acc OSI",
        "Object state identification, per query: share of the 2N queries (image A → its state, "
        "image B → its state) answered correctly.",
    ),
    "acc_ir": (
        "Acc IR",
        "Image retrieval, per query: share of the 2N queries (state text → the image showing it) answered correctly.",
    ),
    "acc_sci": (
        "Acc SCI",
        "State change identification with two options: share of items whose true change "
        "description was picked over one distractor.",
    ),
    "oa": ("OA", "Overall accuracy: mean of Acc OSI, Acc IR and Acc SCI."),
    "racc_osi": (
        "RAcc OSI",
        "Rigorous OSI accuracy: share of items with both OSI queries (image A and image B) correct.",
    ),
    "racc_ir": ("RAcc IR", "Rigorous IR accuracy: share of items with both IR queries (state A and state B) correct."),
    "racc_sci": (
        "RAcc SCI",
        "Rigorous SCI accuracy: share of items whose true change was picked among four "
        "options (the change and three distractors).",
    ),
    "roa": (
        "ROA",
        "Rigorous overall accuracy: share of items with all of OSI A, OSI B, IR A, IR B and the "
        "four-option SCI correct (chance 1.56 %).",
    ),
}


def sci2_distractor(item_id: str, *, seed: int, count: int = 3) -> int:
    """Which of an item's distractors (0-based, in the item's order) the two-option SCI query shows
    beside the change. The paper asks SCI with one distractor and the authors' release does not
    record which, so the pick is a seeded draw (option seed, item id), the same in every release
    with that seed, and stored with the release's resolved queries (docs/protocols/status.md)."""
    return seeded_rng(seed, item_id, "sci2_distractor").randrange(count)


class Status(Protocol):
    name = "status"
    label = "STATUS Bench (quintuplets)"
    workflow = "quintuplet"
    media_fields = {"image_a": "image", "image_b": "image"}
    item_fields = ITEM_FIELDS
    answer_kind = "choice"
    query_keys = QUERIES
    settings_keys = ("suggestions",)
    result_fields = RESULT_FIELDS
    result_choices = {"category": CATEGORIES, "difference": DIFFERENCES}
    # The authors' release carries neither: a labelling pass fills them on the imported items, which
    # brings back the paper's breakdown tables (docs/protocols/status.md).
    fill_fields = ("category", "difference")
    metrics = METRICS
    # ROA: the paper measures VLMs "in terms of the proposed ROA metric"; its breakdown tables print
    # only rigorous accuracies, and its "highest among open-weight VLMs" (Qwen2.5-VL, 5.45) holds for
    # ROA, not for OA (LLaVA-OneVision has the higher OA).
    ranking = ("roa", "oa")
    cluster_key = "extra.video_id"  # the source video of both frames, where the authors' release names it
    spec = "docs/protocols/status.md"
    lmms_module = "lmms"  # its lmms-eval task: lmms.py, scoring in lmms_utils.py
    formats_module = "formats"  # the authors' STATUS_Bench.json, read and written: formats.py

    def resolve_queries(
        self, item_id: str, payload: Mapping[str, Any], *, seed: int, vocabulary: Any = None
    ) -> dict[str, dict[str, Any]]:
        states = [payload["state_a"], payload["state_b"]]
        images = [payload["image_a"], payload["image_b"]]
        change, distractors = payload["change"], list(payload["change_distractors"][:3])
        pick = sci2_distractor(item_id, seed=seed, count=len(distractors))
        sci2 = shuffled([change, distractors[pick]], seeded_rng(seed, item_id, "sci2"))
        sci4 = shuffled([change, *distractors], seeded_rng(seed, item_id, "sci4"))
        return {
            "osi_a": {"options": states, "answer": "A"},
            "osi_b": {"options": states, "answer": "B"},
            "ir_a": {"options": images, "answer": "A"},
            "ir_b": {"options": images, "answer": "B"},
            # "unshown": the item's distractors this query leaves out; a reply naming one of them is
            # wrong, not read as the shown change it may contain (protocols/kit/answers.py).
            "sci2": {
                "options": sci2,
                "answer": letter(sci2.index(change)),
                "unshown": distractors[:pick] + distractors[pick + 1 :],
            },
            "sci4": {"options": sci4, "answer": letter(sci4.index(change))},
        }

    def chance(self, metric: str) -> Decimal | None:
        return CHANCE.get(metric)


protocol = Status()
