"""The form of a labelling pass (annotation/fill_pass.py starts one): an item whose ``fill_fields``
lists label fields is asked for those only. Plain Python over the protocol registry; the models,
the queue and the review pages reach it through these functions:

- ``fill_context(item)``: what a submit, an amendment or a reviewer's edit of such an item is checked
  against (results.validate_result dispatches on it), None for any other item;
- ``fill_validate(result, ctx)``: the stored answer and the errors by field;
- ``fill_annotator_view(item)``: what the annotator's form gets besides the media: the fields asked
  (with their choices) and, as context, the item's other label texts (an allow-list: the protocol's
  result fields that no pass fills, so no value a pass asks for is ever shown);
- ``fill_review_form(proto, item)``: the choice-review description the review page renders
  (static/js/review_choices.js);
- ``fill_merge(payload, result, fields)``: the payload once a reviewer settled the answer.

The shared layer names no protocol: which fields a pass may fill, and the values each allows, are
the protocol's ``fill_fields`` and ``result_choices`` (protocols/base.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from protocols import registry


@dataclass(frozen=True)
class FillContext:
    """The fields a labelling pass asks of one item (in the protocol's order) and the values each allows."""

    fields: tuple[str, ...]
    choices: dict[str, tuple[str, ...]]


def field_label(field: str) -> str:
    """A field's or value's name as the forms print it ("state_a" -> "State A")."""
    words = field.split("_")
    return " ".join([words[0].capitalize(), *(w.upper() if len(w) == 1 else w for w in words[1:])])


def fillable(proto) -> dict[str, tuple[str, ...]]:
    """field -> allowed values, for the protocol's fill fields (only closed fields can be filled)."""
    return {f: tuple(proto.result_choices[f]) for f in proto.fill_fields if f in proto.result_choices}


def fill_context(item) -> FillContext | None:
    """The pass's form of an item that is in one (``item.fill_fields``), None otherwise."""
    asked = list(getattr(item, "fill_fields", None) or [])
    if not asked:
        return None
    allowed = fillable(registry.get(item.project.protocol))
    fields = tuple(f for f in allowed if f in asked)
    return FillContext(fields=fields, choices={f: allowed[f] for f in fields})


def fill_validate(result: Any, ctx: FillContext) -> tuple[dict[str, Any], dict[str, str]]:
    """(the answer as stored, errors by field): exactly the fields asked, each one of its values."""
    if not isinstance(result, dict):
        return {}, {"result": f"The result must be a JSON object with {', '.join(ctx.fields)}."}
    errors: dict[str, str] = {}
    for key in sorted(set(result) - set(ctx.fields)):
        errors[key] = f"Not asked in this labelling pass: give only {', '.join(ctx.fields)}."
    clean: dict[str, Any] = {}
    for name in ctx.fields:
        value = result.get(name)
        if value not in ctx.choices[name]:
            found = "nothing" if value is None else repr(value)
            errors[name] = f"Choose one of: {', '.join(ctx.choices[name])} (got {found})."
        clean[name] = value
    return clean, errors


def fill_annotator_view(item) -> dict[str, Any]:
    """The annotator's part of a pass item: {"fields": [{field, label, choices: [{value, label}]}],
    "context": [{field, label, value}]}. The context is the item's label texts that no pass fills
    (e.g. the two states and the change), never a value of a fill field nor any other payload key."""
    ctx = fill_context(item)
    proto = registry.get(item.project.protocol)
    payload = item.payload or {}
    never = set(proto.fill_fields)
    return {
        "fields": [
            {
                "field": f,
                "label": field_label(f),
                "choices": [{"value": v, "label": field_label(v)} for v in ctx.choices[f]],
            }
            for f in ctx.fields
        ],
        "context": [
            {"field": f, "label": field_label(f), "value": payload[f]}
            for f in proto.result_fields
            if f not in never and payload.get(f) not in (None, "", [])
        ],
    }


def fill_review_form(item, media: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """The review page's description of a pass item (the shape static/js/review_choices.js reads):
    its media, its label texts printed, one select per field asked."""
    proto = registry.get(item.project.protocol)
    ctx = fill_context(item)
    never = set(proto.fill_fields)
    return {
        "media": [dict(m) for m in media],
        "text": [{"field": f, "label": field_label(f)} for f in proto.result_fields if f not in never],
        "fields": [
            {
                "key": f,
                "label": field_label(f),
                "path": [f],
                "required": True,
                "choices": [{"value": v, "label": field_label(v)} for v in ctx.choices[f]],
            }
            for f in ctx.fields
        ],
        "notes": [],
        "fill_fields": list(ctx.fields),
    }


def fill_merge(payload: Mapping[str, Any], result: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    """The payload with the settled values of the fields asked; every other field as it was."""
    out = dict(payload or {})
    for name in fields:
        if name in result:
            out[name] = result[name]
    return out
