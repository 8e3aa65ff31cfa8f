"""ChangeIt-Frames item lines (docs/protocols/changeit.md): an image, its object and state label
define the task; the box is the label. ``box_units`` says what the line's box is measured in
(pixels by default; boxes.py turns a normalised box into pixels once the image's size is known)."""

from __future__ import annotations

from protocols import fields

from .boxes import box_units

ITEM_FIELDS = fields.ItemFields(
    required={"image": fields.media_path, "object": fields.any_text, "state": fields.any_text},
    optional={"distractors": fields.text_list(), "box_units": box_units},
    labels={"bbox": fields.bbox},
    labels_required=("bbox",),
)
