"""What annotation, inference and evaluation read of the registered protocols, by protocol name.
Plain Python, no Django.

Every protocol's particulars live in its package (protocols/<name>/, interface in
protocols/base.py); this module only looks them up in the registry (protocols/registry.py), so
callers that hold a project's protocol name need not know which protocols exist. The option orders
shown to a model are derived by each protocol from (seed, item id, query key)
(protocols.base.seeded_rng), so the same release always yields the same prompts and a stored run
can be re-scored and audited.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from protocols import registry
from protocols.base import LETTERS, letter, seeded_rng

__all__ = [
    "BOX_OUTCOMES",
    "LETTERS",
    "MEDIA_FIELDS",
    "PROTOCOLS",
    "QA_FLAGS",
    "QA_FORMATS",
    "QUERY_KEYS",
    "letter",
    "qa_shape",
    "quintuplet_choices",
    "quintuplet_fields",
    "compared_values",
    "custom_workflow",
    "rating_criteria",
    "rating_gold_tolerance",
    "resolve_queries",
    "seeded_rng",
    "vocabulary",
]

# The workflows' own constants (QA formats and flags, box outcomes) live with the item fields.
from protocols.fields import BOX_OUTCOMES, QA_FLAGS, QA_FORMATS  # noqa: E402

# Media fields per protocol: name -> "image" | "video" | "images" (list of images).
MEDIA_FIELDS: Mapping[str, dict[str, str]] = registry.Attribute("media_fields")
QUERY_KEYS: Mapping[str, tuple[str, ...]] = registry.Attribute("query_keys")
# Every registered protocol name (a view of the registry: `name in PROTOCOLS`, iteration).
PROTOCOLS: Mapping[str, Any] = registry.Attribute("name")


def rating_criteria(protocol: str | None = None) -> tuple[str, ...]:
    """The criteria of the rating form, in the form's order: the protocol's own, or, for a caller
    that holds only a workflow, those of every registered rating protocol (in the registry's order)."""
    if protocol is not None:
        return tuple(registry.get(protocol).criteria)
    out: list[str] = []
    for name in registry.with_workflow("rating"):
        out += [c for c in registry.get(name).criteria if c not in out]
    return tuple(out)


def quintuplet_fields(protocol: str | None = None) -> tuple[str, ...]:
    """The fields of a quintuplet result, in the form's order: the protocol's ``result_fields``, or,
    for a caller that holds only a workflow, those of every registered quintuplet protocol (in the
    registry's order)."""
    if protocol is not None:
        return tuple(registry.get(protocol).result_fields)
    out: list[str] = []
    for name in registry.with_workflow("quintuplet"):
        out += [f for f in registry.get(name).result_fields if f not in out]
    return tuple(out)


def quintuplet_choices(protocol: str | None = None) -> dict[str, tuple[str, ...]]:
    """The closed fields of a quintuplet result and the values each allows: the protocol's
    ``result_choices``, or, for a caller that holds only a workflow, those of every registered
    quintuplet protocol (a field's values in the registry's order)."""
    names = (protocol,) if protocol is not None else registry.with_workflow("quintuplet")
    out: dict[str, tuple[str, ...]] = {}
    for name in names:
        for field, allowed in registry.get(name).result_choices.items():
            out[field] = out.get(field, ()) + tuple(v for v in allowed if v not in out.get(field, ()))
    return out


def rating_gold_tolerance(protocol: str | None = None) -> int:
    """How far a rating may lie from a gold item's expected score and count as right: the protocol's
    ``gold_tolerance``, or, for a caller that holds only a workflow, the largest of the registered
    rating protocols'."""
    if protocol is not None:
        return registry.get(protocol).gold_tolerance
    return max((registry.get(name).gold_tolerance for name in registry.with_workflow("rating")), default=0)


def qa_shape(
    *, protocol: str, payload: Mapping[str, Any], project_settings: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The answer a QA item takes: {"format", "n_options", "multiple"} (the facts a model's prompt
    states too), as the item's protocol says (protocols.base.Protocol.answer_shape)."""
    return registry.get(protocol).answer_shape(payload, project_settings)


def vocabulary(protocol: str, payloads: Iterable[Mapping[str, Any]]) -> Any:
    """Release-wide data the protocol's queries need (None for most protocols)."""
    return registry.get(protocol).vocabulary(payloads)


def resolve_queries(
    protocol: str,
    item_id: str,
    payload: dict[str, Any],
    *,
    seed: int,
    vocabulary: Any = None,
) -> dict[str, dict[str, Any]]:
    """The queries of one item with their option orders and correct answers:
    {query_key: {"options": [...], "answer": ...}} (protocols.base.Protocol.resolve_queries)."""
    return registry.get(protocol).resolve_queries(item_id, payload, seed=seed, vocabulary=vocabulary)


# --- a workflow of its own ----------------------------------------------------------------
#
# A protocol whose items need another form than the four (quintuplet, box, qa, rating) sets
# ``workflow`` to its form's name and ``workflow_module`` to a module of its package that
# implements the form (protocols/base.py). The shared layer asks ``custom_workflow(workflow)``
# and calls the module; it never names the protocol. The module provides, all plain Python:
#   LABEL, TEMPLATE, SCRIPT         the annotate page: its title, template (extending
#                                   annotation/work/_workbench.html) and ES module (static path)
#   IMPORT_RATER_FIELD              the field naming who answered, in an imported annotation line
#   form(protocol) -> dict          project-wide facts added to the annotate page's form description
#                                   (what an annotator needs only: never a model field's name)
#   review_form(protocol) -> dict   optional: what the review page adds to it (e.g. "review": how
#                                   static/js/review_choices.js shows and edits an answer)
#   context(protocol, payload, *, assignment)   what validate and check_line need of one item
#                                   (assignment: seed, item_id, annotator of an annotator's own answer)
#   annotator_view(payload, media, *, seed, item_id, annotator) -> dict   what the annotator's
#                                   item holds instead of the media fields (media: field -> asset)
#   validate(result, context) -> (stored result, errors by field)   a submit's and an edit's check
#   check_line(obj, context) -> (item, rater, result) | [FieldError] an imported annotation line
#   compared(result, context) -> {name: nominal value | None}        what annotators agree on
#   summary(result) -> str          one line of an answer for lists
#   gold_correct(payload, result) -> bool | None   optional: an answer against a gold item's known one
#   viewing_check(result, context, *, payload, media, settings, seconds) -> {field: reason}
#                                   optional: an annotator's submit refused for too little viewing
#                                   (seconds: the server's time on the task; media: field -> asset;
#                                   settings: the protocol's own project settings as read)


def custom_workflow(workflow: str) -> Any:
    """The module implementing a protocol's own form named ``workflow`` (see above); None for the
    four built-in forms and for a name no registered protocol brings."""
    for name in registry.with_workflow(workflow):
        proto = registry.get(name)
        if proto.workflow_module:
            return proto._submodule(proto.workflow_module)
    return None


def workflow_context(protocol: str, payload: Mapping[str, Any], *, assignment: dict[str, Any] | None = None) -> Any:
    """What a protocol's own form checks one item's answers against (``context`` of its module).
    ``assignment`` ({"seed", "item_id", "annotator"}, as ``annotator_view`` got them) when an
    annotator's own answer is checked: the form may check it against what that annotator was shown."""
    proto = registry.get(protocol)
    return custom_workflow(proto.workflow).context(proto, payload, assignment=assignment)


def compared_values(workflow: str, result: Mapping[str, Any], protocol: str | None = None) -> dict[str, Any]:
    """What annotators of a protocol's own form agree on in one answer ({name: nominal value or
    None}, its module's ``compared``): under ``protocol``'s context, or, for a caller that holds
    only the workflow, under the first registered protocol's with that form."""
    name = protocol or registry.with_workflow(workflow)[0]
    return custom_workflow(workflow).compared(result or {}, workflow_context(name, {}))
