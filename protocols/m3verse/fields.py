"""M3-Verse item lines (docs/protocols/m3verse.md): two videos, a question and its options define
the task; the label is the answer, a list of letters (plus the metadata scoring needs)."""

from __future__ import annotations

from typing import Any

from protocols import fields
from protocols.base import LETTERS
from protocols.normalize import answer_text

CAPABILITIES = ("spatial", "temporal", "attribute", "reasoning")
CONTEXTS = ("intra", "inter")
# The texts of the option saying that none of the others is correct (docs/protocols/m3verse.md,
# "Item"): the authors' pipeline's own wording first, then wordings other releases use. Compared
# by the answer rule (protocols/normalize.py: answer_text).
NONE_OPTION_TEXTS = (
    "No correct option is listed.",
    "None of the above.",
    "None of the listed.",
    "None of the listed options.",
    "None of the others.",
    "None of the other options.",
    "Nothing listed is correct.",
)
_NONE_KEYS = frozenset(answer_text(t) for t in NONE_OPTION_TEXTS)


def none_option(options: Any) -> str | None:
    """The letter of the option saying that none of the others is correct, or None (none, or an
    option list that is not a list of texts)."""
    if not isinstance(options, list):
        return None
    for index, text in enumerate(options[: len(LETTERS)]):
        if isinstance(text, str) and answer_text(text) in _NONE_KEYS:
            return LETTERS[index]
    return None


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
