"""Which annotations of one item disagree beyond the project's thresholds. Plain Python, no Django.

An item whose annotators disagree is marked when it becomes annotated (verification.py stores the
result in `Item.disagreement`) and comes first in the review queue, where the reviewer adjudicates.

Thresholds come from the project's settings["disagreement"], each with a default:
- ``rating_spread`` (2): a criterion whose numeric scores spread by at least this much; a
  criterion some raters scored and others marked N/A is a disagreement too;
- ``box_iou`` (0.5): two boxes overlapping with IoU below this; also a box against "nothing to
  label" / "cannot determine", two different outcomes, or two different state labels;
- ``quintuplet_fields`` (all six): the quintuplet fields compared (after normalisation);
- QA: two different answers (agreement.qa_answers_agree, the one rule of the agreement page).

`find_disagreement` returns None when the annotations agree, else {"fields": [{"field", "kind",
"values": [{"annotation", "value"}], ...}]} with the spread or the lowest IoU where it applies.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Any, Sequence

from . import agreement
from .protocols import OSC_CRITERIA

DEFAULT_RATING_SPREAD = 2
DEFAULT_BOX_IOU = agreement.BOX_CONSISTENT_IOU


@dataclass(frozen=True)
class Thresholds:
    rating_spread: float = DEFAULT_RATING_SPREAD
    box_iou: float = DEFAULT_BOX_IOU
    quintuplet_fields: tuple[str, ...] = agreement.QUINTUPLET_FIELDS

    def as_dict(self) -> dict[str, Any]:
        return {"rating_spread": self.rating_spread, "box_iou": self.box_iou,
                "quintuplet_fields": list(self.quintuplet_fields)}


def thresholds_from(settings: dict | None) -> Thresholds:
    """The project's thresholds; a missing or malformed value takes its default."""
    raw = (settings or {}).get("disagreement")
    raw = raw if isinstance(raw, dict) else {}

    def number(name: str, default: float, low: float, high: float) -> float:
        value = raw.get(name)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high
        return value if ok else default

    fields = raw.get("quintuplet_fields")
    if isinstance(fields, list) and fields and all(f in agreement.QUINTUPLET_FIELDS for f in fields):
        chosen = tuple(f for f in agreement.QUINTUPLET_FIELDS if f in fields)
    else:
        chosen = agreement.QUINTUPLET_FIELDS
    return Thresholds(rating_spread=number("rating_spread", DEFAULT_RATING_SPREAD, 1, 4),
                      box_iou=number("box_iou", DEFAULT_BOX_IOU, 0, 1), quintuplet_fields=chosen)


def _entry(field: str, kind: str, annotations: Sequence[tuple[int, dict]], get, **extra) -> dict[str, Any]:
    return {"field": field, "kind": kind, **extra,
            "values": [{"annotation": pk, "value": get(result)} for pk, result in annotations]}


def _rating(annotations, thresholds: Thresholds) -> list[dict]:
    out = []
    present = {c for _, r in annotations for c in (r.get("scores") or {})}
    criteria = [c for c in OSC_CRITERIA if c in present] + sorted(present - set(OSC_CRITERIA))  # the form's order
    for c in criteria:
        get = lambda r, c=c: (r.get("scores") or {}).get(c)  # noqa: E731
        values = [get(r) for _, r in annotations]
        nums = [v for v in values if v is not None]
        if nums and len(nums) < len(values):
            out.append(_entry(f"scores.{c}", "na", annotations, get))
        elif nums and max(nums) - min(nums) >= thresholds.rating_spread:
            out.append(_entry(f"scores.{c}", "spread", annotations, get, spread=max(nums) - min(nums)))
    return out


def _box(annotations, thresholds: Thresholds) -> list[dict]:
    out = []
    results = [r for _, r in annotations]
    with_box = [r for r in results if "bbox" in r]
    if with_box and len(with_box) < len(results):
        out.append(_entry("outcome", "outcome", annotations, lambda r: "box" if "bbox" in r else r.get("outcome")))
    elif not with_box and len({r.get("outcome") for r in results}) > 1:
        out.append(_entry("outcome", "outcome", annotations, lambda r: r.get("outcome")))
    if len(with_box) >= 2:
        ious = [agreement.box_iou(a["bbox"], b["bbox"]) for a, b in combinations(with_box, 2)]
        if min(ious) < thresholds.box_iou:
            out.append(_entry("bbox", "iou", annotations, lambda r: r.get("bbox"), min_iou=round(min(ious), 4)))
        if len({r.get("state") for r in with_box}) > 1:
            out.append(_entry("state", "state", annotations, lambda r: r.get("state")))
    return out


def _qa(annotations) -> list[dict]:
    answers = [r.get("answer") for _, r in annotations]
    if all(agreement.qa_answers_agree(a, b) for a, b in combinations(answers, 2)):
        return []
    return [_entry("answer", "answer", annotations, lambda r: r.get("answer"))]


def _quintuplet(annotations, thresholds: Thresholds) -> list[dict]:
    out = []
    for name in thresholds.quintuplet_fields:
        if len({agreement.quintuplet_field_value(r, name) for _, r in annotations}) > 1:
            out.append(_entry(name, "field", annotations, lambda r, name=name: r.get(name)))
    return out


def find_disagreement(workflow: str, annotations: Sequence[tuple[int, dict]],
                      thresholds: Thresholds = Thresholds()) -> dict[str, Any] | None:
    """annotations: (annotation id, result) of one item. None when fewer than two or they agree."""
    if len(annotations) < 2:
        return None
    if workflow == "rating":
        fields = _rating(annotations, thresholds)
    elif workflow == "box":
        fields = _box(annotations, thresholds)
    elif workflow == "qa":
        fields = _qa(annotations)
    elif workflow == "quintuplet":
        fields = _quintuplet(annotations, thresholds)
    else:
        raise ValueError(f"unknown workflow {workflow!r}")
    return {"fields": fields} if fields else None
