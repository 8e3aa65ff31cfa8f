"""ChangeIt-Frames item lines (docs/protocols/changeit.md): an image, its object and state label
define the task; the box is the label."""

from __future__ import annotations

from protocols import fields

ITEM_FIELDS = fields.ItemFields(
    required={"image": fields.media_path, "object": fields.any_text, "state": fields.any_text},
    optional={"distractors": fields.text_list()},
    labels={"bbox": fields.bbox},
    labels_required=("bbox",),
)
