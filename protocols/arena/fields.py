"""Arena item lines (docs/protocols/arena.md): a prompt and two outputs of it, each from a model.

An item shows either two videos (``video_a``, ``video_b``) or two images (``image_a``,
``image_b``), never a mix; ``model_a`` and ``model_b`` name the models that made them and never
reach an annotator (workflow.py). Items carry no labels: the votes are annotations.
"""

from __future__ import annotations

from typing import Any

from protocols import fields

# The vote's words, in protocols/kit/pairwise/counts.py OUTCOMES order (a test keeps them equal):
# the output shown as "a" won, "b" won, a tie, or both are bad (a tie for the rating fit, reported apart).
WINNERS = ("a", "b", "tie", "both_bad")
SIDES = ("a", "b")
# What a vote may be about: the output as a whole, and the state change the prompt asks for.
VOTE_CRITERIA = ("overall", "state_change")
HEADLINE_CRITERION = "overall"
CRITERION_LABELS = {"overall": "Overall", "state_change": "State change"}
MEDIA_KINDS = ("video", "image")

ITEM_FIELDS_OPTIONAL = {f"{kind}_{side}": fields.media_path for kind in MEDIA_KINDS for side in SIDES}


def media_kind(payload: dict[str, Any]) -> str | None:
    """ "video" or "image": which pair an item shows (None when it has neither whole pair)."""
    for kind in MEDIA_KINDS:
        if all(f"{kind}_{side}" in payload for side in SIDES):
            return kind
    return None


def _pair_checks(payload: dict[str, Any]) -> list[fields.FieldError]:
    errors: list[fields.FieldError] = []
    present = [name for name in ITEM_FIELDS_OPTIONAL if name in payload]
    kind = media_kind(payload)
    if kind is None or len(present) != 2:
        found = ", ".join(present) or "none"
        errors.append(
            fields.FieldError(
                "video_a",
                f"an item shows two videos (video_a and video_b) or two images (image_a and image_b); found {found}",
            )
        )
    if payload.get("model_a") == payload.get("model_b"):
        errors.append(fields.FieldError("model_b", f"must differ from model_a (both are {payload.get('model_a')!r})"))
    return errors


ITEM_FIELDS = fields.ItemFields(
    required={"prompt": fields.any_text, "model_a": fields.any_text, "model_b": fields.any_text},
    optional={**ITEM_FIELDS_OPTIONAL, "category": fields.any_text},
    labels={},
    labels_required=(),
    cross=_pair_checks,
    # A gold pair's known better side (only on a gold item, and required there): the rater screen
    # (integrity.py) and the crowd studies' gold checks (workflow.gold_correct) read it.
    gold_answer={"gold_winner": fields.choice(SIDES)},
)
