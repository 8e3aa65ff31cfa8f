"""STATUS item lines (docs/protocols/status.md): two images; the quintuplet is the label.

``category`` and ``difference`` are labels the paper breaks its tables down by, but the authors'
release does not carry them: an item is complete with the five texts alone, and the board shows
the breakdowns only where items carry those two (protocols/status/scoring.py item_matrix).
"""

from __future__ import annotations

from protocols import fields

CATEGORIES = ("positional", "functional", "other")
DIFFERENCES = ("slight", "significant")

ITEM_FIELDS = fields.ItemFields(
    required={"image_a": fields.media_path, "image_b": fields.media_path},
    optional={},
    labels={
        "state_a": fields.any_text,
        "state_b": fields.any_text,
        "change": fields.any_text,
        "change_distractors": fields.text_list(exactly=3),
        "category": fields.choice(CATEGORIES),
        "difference": fields.choice(DIFFERENCES),
    },
    labels_required=("state_a", "state_b", "change", "change_distractors"),
)
