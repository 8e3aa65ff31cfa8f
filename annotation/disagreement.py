"""Which annotations of one item disagree beyond the project's thresholds. Plain Python, no Django.

An item whose annotators disagree is marked when it becomes annotated (verification.py stores the
result in `Item.disagreement`) and comes first in the review queue, where the reviewer adjudicates.

Thresholds come from the project's settings["disagreement"], each with a default. thresholds_clean
is the one check of their values, on every path that writes them (the project settings page and
API, the admin's project form: project_setup.disagreement_setting_clean); a stored value it
refuses (written before those checks, or straight into the database) is read as its default, with
a warning in the log, never used as it is (thresholds_from):
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

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from . import agreement
from .protocols import custom_workflow, rating_criteria

logger = logging.getLogger(__name__)

DEFAULT_RATING_SPREAD = 2
DEFAULT_BOX_IOU = agreement.BOX_CONSISTENT_IOU

# What the annotation forms call each field (static/js/quintuplet.js, box.js, qa.js), so a reviewer
# reads a disputed field as the annotators saw it. Rating criteria ("scores.<criterion>") take the
# rating form's labels, which come from the server (selectors.OSC_CRITERION_LABELS): callers pass them.
FIELD_LABELS: dict[str, dict[str, str]] = {
    "quintuplet": {
        "state_a": "State A",
        "state_b": "State B",
        "change": "Change",
        "change_distractors": "Wrong changes",
        "category": "Category",
        "difference": "Difference",
    },
    "box": {"bbox": "Box", "state": "State label", "outcome": "Box, nothing to label or cannot determine"},
    "qa": {"answer": "Answer", "flags": "Flags"},
}


def field_label(workflow: str, field: str, criterion_labels: dict[str, str] | None = None) -> str:
    """The form's label of a result field (a disagreement's "field"); the key itself when unknown."""
    if field.startswith("scores."):
        return (criterion_labels or {}).get(field[len("scores.") :], field[len("scores.") :])
    return FIELD_LABELS.get(workflow, {}).get(field, field)


@dataclass(frozen=True)
class Thresholds:
    rating_spread: float = DEFAULT_RATING_SPREAD
    box_iou: float = DEFAULT_BOX_IOU
    quintuplet_fields: tuple[str, ...] = agreement.QUINTUPLET_FIELDS

    def as_dict(self) -> dict[str, Any]:
        return {
            "rating_spread": self.rating_spread,
            "box_iou": self.box_iou,
            "quintuplet_fields": list(self.quintuplet_fields),
        }


THRESHOLD_NAMES = ("rating_spread", "box_iou", "quintuplet_fields")


def thresholds_from(settings: dict | None, *, project: str = "") -> Thresholds:
    """The project's thresholds (`project`, its slug, names it in a warning): a missing value takes
    its default; so does a stored one that thresholds_clean refuses, with a logged warning."""
    raw = (settings or {}).get("disagreement")
    if raw is None:
        return Thresholds()
    where = f" of project {project}" if project else ""
    if not isinstance(raw, dict):
        logger.warning(
            "settings['disagreement']%s is not a JSON object (%.80r): the default thresholds apply", where, raw
        )
        return Thresholds()
    clean, errors = thresholds_clean({name: raw[name] for name in THRESHOLD_NAMES if name in raw})
    for name, reason in errors.items():
        logger.warning(
            "disagreement threshold %s%s is invalid (%.80r; %s): its default %r applies",
            name,
            where,
            raw[name],
            reason,
            getattr(Thresholds(), name),
        )
    unknown = sorted(str(k) for k in raw if k not in THRESHOLD_NAMES)
    if unknown:
        logger.warning("settings['disagreement']%s has no threshold named %s: ignored", where, ", ".join(unknown))
    if "quintuplet_fields" in clean:
        clean["quintuplet_fields"] = tuple(clean["quintuplet_fields"])
    return Thresholds(**clean)


class _Thresholds(dict):
    """Workflow -> its thresholds; a protocol's own form has none."""

    def __missing__(self, workflow: str) -> tuple[str, ...]:
        if custom_workflow(workflow) is None:
            raise KeyError(workflow)
        return ()


# Which thresholds apply to which workflow (QA items are marked whenever their answers differ).
THRESHOLDS_OF_WORKFLOW: dict[str, tuple[str, ...]] = _Thresholds(
    {
        "rating": ("rating_spread",),
        "box": ("box_iou",),
        "quintuplet": ("quintuplet_fields",),
        "qa": (),
    }
)


def thresholds_clean(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Thresholds a person set (the project settings page, the API), checked: (clean, errors by
    name). Only the names given are checked and returned: rating_spread a whole number from 1 to 4,
    box_iou a number above 0 and at most 1, quintuplet_fields one or more of the six fields. Form
    text ("3", "0.4") is read as numbers."""
    clean: dict[str, Any] = {}
    errors: dict[str, str] = {}
    if "rating_spread" in values:
        raw = values["rating_spread"]
        if isinstance(raw, str) and raw.strip().isdigit():
            raw = int(raw.strip())
        if isinstance(raw, float) and raw.is_integer():
            raw = int(raw)
        if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= 4:
            errors["rating_spread"] = "A whole number of points from 1 to 4."
        else:
            clean["rating_spread"] = raw
    if "box_iou" in values:
        raw = values["box_iou"]
        try:
            iou = float(raw.strip() if isinstance(raw, str) else raw) if not isinstance(raw, bool) else None
        except (TypeError, ValueError):
            iou = None
        if iou is None or not 0 < iou <= 1:  # also refuses NaN
            errors["box_iou"] = "An overlap (IoU) above 0 and at most 1, e.g. 0.5."
        else:
            clean["box_iou"] = iou
    if "quintuplet_fields" in values:
        raw = values["quintuplet_fields"]
        if (
            not isinstance(raw, (list, tuple))
            or not raw
            or not all(isinstance(f, str) and f in agreement.QUINTUPLET_FIELDS for f in raw)
        ):
            errors["quintuplet_fields"] = f"One or more of: {', '.join(agreement.QUINTUPLET_FIELDS)}."
        else:
            clean["quintuplet_fields"] = [f for f in agreement.QUINTUPLET_FIELDS if f in raw]
    return clean, errors


def _entry(field: str, kind: str, annotations: Sequence[tuple[int, dict]], get, **extra) -> dict[str, Any]:
    return {
        "field": field,
        "kind": kind,
        **extra,
        "values": [{"annotation": pk, "value": get(result)} for pk, result in annotations],
    }


def _rating(annotations, thresholds: Thresholds) -> list[dict]:
    out = []
    present = {c for _, r in annotations for c in (r.get("scores") or {})}
    form = rating_criteria()
    criteria = [c for c in form if c in present] + sorted(present - set(form))  # the form's order
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


def find_disagreement(
    workflow: str, annotations: Sequence[tuple[int, dict]], thresholds: Thresholds = Thresholds()
) -> dict[str, Any] | None:
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
    elif (custom := custom_workflow(workflow)) is not None:
        # A protocol's own form marks what its module says (annotation/protocols.py); without a
        # ``disagreement`` of its own, differing answers are data, not a case for a reviewer.
        found = getattr(custom, "disagreement", None)
        fields = found(annotations) if found is not None else []
    else:
        raise ValueError(f"unknown workflow {workflow!r}")
    return {"fields": fields} if fields else None
