"""M3-Verse: "spot the difference" questions on a pair of videos (QA form, one or several letters).

Spec: docs/protocols/m3verse.md. Prompts: prompts.py; scoring: scoring.py (this folder).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from protocols.base import Protocol

from .fields import CAPABILITIES, CONTEXTS, ITEM_FIELDS, none_option

# Whether several options may be correct when neither the item (its `multiple` field) nor the
# project (settings["multiple"]) says: several may be correct.
MULTIPLE_DEFAULT = True

METRICS = {
    "overall": (
        "Overall",
        "Mean partial credit over all questions: 0 when any picked option is wrong, else "
        "the share of the correct options that were picked.",
    ),
    "intra": (
        "Intra-state",
        "Mean credit on intra-state questions, answerable from one state (the before or the after video) alone.",
    ),
    "inter": (
        "Inter-state",
        "Mean credit on inter-state questions, which need the before and after videos compared to find what changed.",
    ),
    **{
        f"{ctx}_{cap}": (
            f"{ctx.capitalize()}-state · {cap}",
            f"Mean credit on {ctx}-state questions that test {cap} understanding.",
        )
        for ctx in CONTEXTS
        for cap in CAPABILITIES
    },
    "hallucination": (
        "Hallucination",
        "Mean credit on questions whose correct answer is the 'no correct option listed' option.",
    ),
    "factual": ("Factual", "Mean credit on questions whose answer is among the listed options."),
}


def takes_several(payload: Mapping[str, Any], project_settings: Mapping[str, Any] | None = None) -> bool:
    """Whether an item takes several letters: its own `multiple` field, else the project's setting,
    else MULTIPLE_DEFAULT. Never its answer: a gold item's form must look like a raw one's."""
    own = payload.get("multiple")
    if isinstance(own, bool):
        return own
    chosen = (project_settings or {}).get("multiple")
    return chosen if isinstance(chosen, bool) else MULTIPLE_DEFAULT


class M3Verse(Protocol):
    name = "m3verse"
    label = "M3-Verse (video-pair QA)"
    workflow = "qa"
    media_fields = {"video_before": "video", "video_after": "video"}
    item_fields = ITEM_FIELDS
    annotator_fields = ("question",)
    answer_kind = "letters"
    query_keys = ("qa",)
    settings_keys = ("suggestions", "multiple")
    strategies = ("multistage",)  # captions, summaries, then a text-only answer (multistage.py)
    metrics = METRICS
    # Overall: the first column of the paper's Table 2.
    ranking = ("overall", "intra", "inter")
    human_row = True
    cluster_key = ("video_before", "video_after")  # one scene's pair of recordings: its questions share it
    spec = "docs/protocols/m3verse.md"
    lmms_module = "lmms"  # its lmms-eval task: lmms.py, scoring in lmms_utils.py
    formats_module = "formats"  # the authors' files, read and written back: formats.py

    def answer_shape(
        self, payload: Mapping[str, Any], project_settings: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        # none_option: the option saying no other is correct, the one way an answer says so
        # (annotation/results.py, validate_qa); shown to annotators like any option, never the answer.
        return {
            "format": "choice",
            "n_options": len(payload.get("options") or []),
            "multiple": takes_several(payload, project_settings),
            "none_option": none_option(payload.get("options")),
        }

    def known_answer_form(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        # A known answer is always a list of letters, one correct option too.
        return {"fmt": "choice", "multiple": True}

    def resolve_queries(
        self, item_id: str, payload: Mapping[str, Any], *, seed: int, vocabulary: Any = None
    ) -> dict[str, dict[str, Any]]:
        return {"qa": {"options": list(payload["options"]), "answer": sorted(payload["answer"])}}


protocol = M3Verse()
