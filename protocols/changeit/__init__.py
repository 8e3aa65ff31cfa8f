"""ChangeIt-Frames: object state recognition, one box per image and its state label.

Spec: docs/protocols/changeit.md. Prompts: prompts.py; scoring: scoring.py; the authors' files:
formats.py; box units of an imported line: boxes.py (this folder).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from protocols.base import Protocol, seeded_rng, shuffle

from .boxes import payload_box_in_pixels
from .fields import ITEM_FIELDS

STRATEGIES = ("standard", "distractor")
CONDITIONS = ("full", "crop")
QUERIES = tuple(f"state:{s}:{c}" for s in STRATEGIES for c in CONDITIONS)
N_CANDIDATES = 10

_SOURCE = {
    "standard": "the object’s other states, then labels of other objects",
    "distractor": "the item’s close-in-meaning distractors, then random labels",
}
METRICS = {
    **{
        f"state_acc_{s}_{c}": (
            f"State acc. · {s} · {c}",
            f"State accuracy: share of images whose exact state label was picked among 10 candidates "
            f"({_SOURCE[s]}), shown the {'whole image' if c == 'full' else 'annotated box cropped out'}. Chance 10 %.",
        )
        for s in STRATEGIES
        for c in CONDITIONS
    },
    **{
        f"object_acc_{s}_{c}": (
            f"Object acc. · {s} · {c}",
            f"Object accuracy: share of images where the picked label names the right object (its state may be "
            f"wrong); {s} candidates, {'whole image' if c == 'full' else 'cropped box'}.",
        )
        for s in STRATEGIES
        for c in CONDITIONS
    },
}


def vocabulary(payloads: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """object -> sorted list of state labels seen in a set of ChangeIt items."""
    vocab: dict[str, set[str]] = {}
    for p in payloads:
        vocab.setdefault(p["object"], set()).add(p["state"])
    return {obj: sorted(states) for obj, states in sorted(vocab.items())}


def candidates(payload: Mapping[str, Any], strategy: str, vocab: dict[str, list[str]], rng: random.Random) -> list[str]:
    """The item's true state and up to nine other labels, in a seeded order: first the labels the
    strategy names (the object's other states, or the item's distractors), then the labels of the
    other objects (in code point order, shuffled), the whole list shuffled at the end."""
    truth = payload["state"]
    obj = payload["object"]
    picked: list[str] = [truth]
    first = vocab.get(obj, []) if strategy == "standard" else payload.get("distractors", [])
    for label in first:
        if len(picked) >= N_CANDIDATES:
            break
        if label != truth and label not in picked:
            picked.append(label)
    others = [s for s in _other_labels(vocab, obj) if s not in picked]
    shuffle(others, rng)
    picked.extend(others[: N_CANDIDATES - len(picked)])
    shuffle(picked, rng)
    return picked


# The labels of the objects other than one, sorted and without repeats, for the vocabulary last
# asked about: a release resolves every item with one vocabulary, so they are found once per
# object, not once per item. Vocabularies are not changed once made (the job and the release keep
# them as they are).
_OTHERS: tuple[Any, dict[str, tuple[str, ...]]] = (None, {})


def _other_labels(vocab: dict[str, list[str]], obj: str) -> tuple[str, ...]:
    global _OTHERS
    known, pools = _OTHERS
    if known is not vocab:
        pools = {}
        _OTHERS = (vocab, pools)
    pool = pools.get(obj)
    if pool is None:
        pool = pools[obj] = tuple(sorted({s for o, states in vocab.items() if o != obj for s in states}))
    return pool


class ChangeIt(Protocol):
    name = "changeit"
    label = "ChangeIt-Frames (boxes + state)"
    workflow = "box"
    media_fields = {"image": "image"}
    item_fields = ITEM_FIELDS
    annotator_fields = ("object",)
    answer_kind = "candidate"
    query_keys = QUERIES
    settings_keys = ("state_labels",)
    vocabulary_param = "changeit_vocabulary"  # the key jobs have always stored it under
    metrics = METRICS
    # State accuracy, standard candidates, whole image: the first column of the paper's Table 4.
    ranking = (
        "state_acc_standard_full",
        "state_acc_standard_crop",
        "state_acc_distractor_full",
        "state_acc_distractor_crop",
    )
    cluster_key = "extra.video"  # the frames of one video
    spec = "docs/protocols/changeit.md"
    lmms_module = "lmms"  # its lmms-eval task: lmms.py, scoring in lmms_utils.py
    formats_module = "formats"  # the authors' release: formats.py

    def box_pixels(self, payload: dict[str, Any], width: int | None, height: int | None) -> str | None:
        """An imported item's box in image pixels (in place, by the line's ``box_units``, which is then
        dropped); the reason it is refused, or None (boxes.py)."""
        return payload_box_in_pixels(payload, width, height)

    def vocabulary(self, payloads: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
        return vocabulary(payloads)

    def resolve_queries(
        self, item_id: str, payload: Mapping[str, Any], *, seed: int, vocabulary: Any = None
    ) -> dict[str, dict[str, Any]]:
        vocab = vocabulary if vocabulary is not None else self.vocabulary([payload])
        out: dict[str, dict[str, Any]] = {}
        for strategy in STRATEGIES:
            # Full and crop share one candidate list so the two conditions differ only in the image.
            cands = candidates(payload, strategy, vocab, seeded_rng(seed, item_id, f"changeit:{strategy}"))
            for condition in CONDITIONS:
                out[f"state:{strategy}:{condition}"] = {"options": cands, "answer": cands.index(payload["state"]) + 1}
        return out

    def chance(self, metric: str) -> Decimal | None:
        # One of 10 candidates; object accuracy has no fixed chance (it depends on how many
        # candidates name the object): the Random row shows it.
        return Decimal("10.00") if metric.startswith("state_acc_") else None


protocol = ChangeIt()
