"""VisualTrans item lines (docs/protocols/visualtrans.md). A QA item's question (with its format
and options) defines the task, so even a raw item carries it; the label is the answer (plus the
metadata scoring needs)."""

from __future__ import annotations

from typing import Any

from protocols import fields
from protocols.base import LETTERS

SUBTASKS = ("fine_grained", "global", "intermediate", "causal", "planning", "quantitative")


def cross(p: dict[str, Any]) -> list[fields.FieldError]:
    """The answer against the format (and options); checked when present."""
    fmt, answer = p.get("format"), p.get("answer")
    if fmt == "choice":
        options = p.get("options")
        if options is None:
            return [fields.FieldError("options", "required when format is choice")]
        if answer is None:
            return []
        if (
            not isinstance(answer, str)
            or len(answer.strip()) != 1
            or answer.strip().upper() not in LETTERS[: len(options)]
        ):
            return [fields.FieldError("answer", f"must be one option letter A–{LETTERS[len(options) - 1]}")]
    elif answer is None:
        return []
    elif fmt == "count":
        if not isinstance(answer, int) or isinstance(answer, bool) or answer < 0:
            return [fields.FieldError("answer", "must be a non-negative integer when format is count")]
    elif fmt == "set":
        if not isinstance(answer, list) or not answer or not all(isinstance(a, str) and a.strip() for a in answer):
            return [fields.FieldError("answer", "must be a non-empty list of strings when format is set")]
    return []


ITEM_FIELDS = fields.ItemFields(
    required={"images": fields.image_list, "question": fields.any_text, "format": fields.choice(fields.QA_FORMATS)},
    optional={"scene": fields.any_text, "options": fields.options, "subtask": fields.choice(SUBTASKS)},
    labels={"answer": lambda v: v},  # checked against format in cross
    labels_required=("answer", "subtask"),
    cross=cross,
)
