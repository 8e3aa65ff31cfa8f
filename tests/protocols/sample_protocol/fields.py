"""Lid check item lines: an image, the object, a yes/no question; the label is the answer letter."""

from __future__ import annotations

from typing import Any

from protocols import fields

STATES = ("open", "closed")


def yes_no(value: Any) -> list[str]:
    if value != ["yes", "no"]:
        raise fields.Invalid('must be ["yes", "no"]')
    return value


def answer_letter(value: Any) -> str:
    if value not in ("A", "B"):
        raise fields.Invalid("must be A (yes) or B (no)")
    return value


ITEM_FIELDS = fields.ItemFields(
    required={"image": fields.media_path, "object": fields.any_text, "question": fields.any_text, "options": yes_no},
    optional={"state": fields.choice(STATES)},
    labels={"answer": answer_letter},
    labels_required=("answer",),
)
