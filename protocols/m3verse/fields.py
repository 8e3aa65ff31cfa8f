"""M3-Verse item lines (docs/protocols/m3verse.md): two videos, a question and its options define
the task; the label is the answer, a list of letters (plus the metadata scoring needs)."""

from __future__ import annotations

from typing import Any

from protocols import fields
from protocols.base import LETTERS

CAPABILITIES = ("spatial", "temporal", "attribute", "reasoning")
CONTEXTS = ("intra", "inter")


def cross(p: dict[str, Any]) -> list[fields.FieldError]:
    """The answer against the options and the item's `multiple`; checked when present."""
    options, answer = p.get("options") or [], p.get("answer")
    allowed = LETTERS[: len(options)]
    if answer is None:
        return []
    if not isinstance(answer, list) or not answer:
        return [fields.FieldError("answer", "must be a non-empty list of option letters")]
    if not all(isinstance(a, str) and a in allowed for a in answer):
        return [fields.FieldError("answer", f"letters must lie in A–{allowed[-1] if allowed else 'A'}")]
    if len(set(answer)) != len(answer):
        return [fields.FieldError("answer", "lists a letter twice")]
    if p.get("multiple") is False and len(answer) != 1:
        return [
            fields.FieldError(
                "answer", f"lists {len(answer)} letters but the item says multiple: false (one correct option)"
            )
        ]
    return []


ITEM_FIELDS = fields.ItemFields(
    required={
        "video_before": fields.media_path,
        "video_after": fields.media_path,
        "question": fields.any_text,
        "options": fields.options,
    },
    optional={
        "context": fields.choice(CONTEXTS),
        "capabilities": fields.subset(CAPABILITIES),
        "hallucination": fields.boolean,
        # One or several correct options: the item's own fact, given on raw items too (the
        # annotator's form follows it; never derived from the answer). Absent: project setting.
        "multiple": fields.boolean,
    },
    labels={"answer": lambda v: v},  # checked against options in cross
    # Capabilities come from a tagging step after the authors' QA generation, so a release may lack
    # them (docs/protocols/m3verse.md): the item is complete without, outside the capability columns.
    labels_required=("answer", "context"),
    cross=cross,
)
