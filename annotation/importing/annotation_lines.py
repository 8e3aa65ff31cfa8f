"""Checks of one line of human annotations made elsewhere (import_annotations): a Likert rating
of an item of a rating protocol or a blind answer to a QA protocol's question. Plain Python, no
Django. A valid line comes back as a `CheckedAnnotation` whose result is in annotation.canonical's
form, exactly what a submit of the same answer stores.

A blind answer is judged by the submit's own check (annotation.results.validate_qa, with the
shape the annotator's form has for that item), so an import accepts the answers a submit accepts
and stores them the same way: an empty answer ("", [], a set naming no object) is no answer,
given only together with a flag and stored as null.

An aggregated rating (``"aggregate": {"raters": N}``) is what a study that published only the
means of its raters gives: each score is the mean of N raters (a number from 1 to 5, fractions
allowed), null where none of them gave a number (on any criterion: a mean's absence, not a
rater's N/A). It is kept apart from one rater's rating (annotation.models.Annotation
``aggregate_raters``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from annotation import canonical
from annotation.protocols import QA_FLAGS, qa_shape
from annotation.results import QAContext, RatingContext, ResultInvalid, validate_qa
from protocols.fields import FieldError, rating_score_errors

# The most raters an aggregated rating may stand for (the field is a small integer).
MAX_AGGREGATE_RATERS = 10_000


@dataclass
class CheckedAnnotation:
    item: str
    rater: str
    result: dict[str, Any]
    # The number of raters whose means the scores are (an aggregated rating); None: one rater's.
    aggregate_raters: int | None = None


def _aggregate_raters(value: Any) -> int | FieldError:
    raters = value.get("raters") if isinstance(value, dict) and set(value) == {"raters"} else None
    if isinstance(raters, bool) or not isinstance(raters, int) or not 2 <= raters <= MAX_AGGREGATE_RATERS:
        return FieldError(
            "aggregate",
            f'must be {{"raters": N}}, N the number of raters whose means the scores are (2 to {MAX_AGGREGATE_RATERS})',
        )
    return raters


def _mean_errors(scores: Any, criteria: tuple[str, ...]) -> dict[str | None, str]:
    """The rule of an aggregated rating's scores: every criterion a mean from 1 to 5 or null."""
    if not isinstance(scores, dict):
        return {
            None: f"must be an object criterion -> a mean from 1 to 5 or null, naming each of {', '.join(criteria)}"
        }
    errors: dict[str | None, str] = {}
    for name in sorted(set(scores) - set(criteria), key=str):
        errors[name] = f"unknown criterion; allowed: {', '.join(criteria)}"
    for name in criteria:
        value = scores.get(name)
        if name not in scores:
            errors[name] = "missing: give the raters' mean from 1 to 5, or null where none gave a number"
        elif value is not None and (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or not 1 <= value <= 5
        ):
            errors[name] = "must be the raters' mean, a number from 1 to 5, or null"
    return errors


def check_rating(obj: dict[str, Any], ctx: RatingContext) -> CheckedAnnotation | list[FieldError]:
    """`{"item", "rater", "scores": {criterion: 1..5 or null}}` with every criterion of the project's
    protocol (the rule is protocols.fields.rating_score_errors, a submit's own); with
    `"aggregate": {"raters": N}`, the scores are means (see the module)."""
    errors: list[FieldError] = []
    for key in obj:
        if key not in ("item", "rater", "scores", "aggregate"):
            errors.append(FieldError(key, "unknown field for a rating"))
    item, rater = obj.get("item"), obj.get("rater")
    if not isinstance(item, str) or not item:
        errors.append(FieldError("item", "required, the item id (a string)"))
    if not isinstance(rater, str) or not rater.strip() or len(rater) > 200:
        errors.append(FieldError("rater", "required, a rater id string of at most 200 characters"))
    scores = obj.get("scores")
    raters: int | None = None
    if "aggregate" in obj:
        found = _aggregate_raters(obj["aggregate"])
        if isinstance(found, FieldError):
            errors.append(found)
        else:
            raters = found
        problems = _mean_errors(scores, ctx.criteria)
    else:
        problems = rating_score_errors(scores, criteria=ctx.criteria, nullable=ctx.nullable)
    errors.extend(
        FieldError("scores" if name is None else f"scores.{name}", reason) for name, reason in problems.items()
    )
    if errors:
        return errors
    return CheckedAnnotation(
        item=item,
        rater=rater,
        result={"scores": canonical.rating_scores(scores, ctx.criteria)},
        aggregate_raters=raters,
    )


def check_qa_answer(
    obj: dict[str, Any],
    protocol: str,
    item_payload: dict[str, Any] | None,
    *,
    project_settings: dict[str, Any] | None = None,
) -> CheckedAnnotation | list[FieldError]:
    """`{"item", "annotator", "answer", "flags": [...]}`; the answer is checked against the item
    as a submit of it is (see the module docstring) and stored as that submit stores it
    (annotation.canonical: "b" -> "B", "A,C" -> ["A", "C"]).

    No answer (null, or an empty one) is allowed only together with at least one flag (e.g.
    insufficient_evidence). Without the item (`item_payload` None) the answer is not checked:
    the importer refuses the line for its unknown item.
    """
    errors: list[FieldError] = []
    for key in obj:
        if key not in ("item", "annotator", "answer", "flags"):
            errors.append(FieldError(key, "unknown field for a QA answer"))
    item, annotator = obj.get("item"), obj.get("annotator")
    if not isinstance(item, str) or not item:
        errors.append(FieldError("item", "required, the item id (a string)"))
    if not isinstance(annotator, str) or not annotator.strip() or len(annotator) > 200:
        errors.append(FieldError("annotator", "required, an annotator id string of at most 200 characters"))
    flags = obj.get("flags", [])
    if not isinstance(flags, list) or any(f not in QA_FLAGS for f in flags) or len(set(flags)) != len(flags):
        errors.append(FieldError("flags", f"must be a list drawn from {', '.join(QA_FLAGS)}, each once"))
        flags = []
    answer = obj.get("answer")
    if answer is None and not flags:
        errors.append(FieldError("answer", "required (null only together with a flag)"))
    elif item_payload is not None:
        # Checked as a submit of it is, a null answer too: its flags may contradict the item
        # (docs/architecture.md, "Contradictory answers").
        shape = qa_shape(protocol=protocol, payload=item_payload, project_settings=project_settings)
        context = QAContext.of(shape)
        try:
            answer = validate_qa({"answer": answer, "flags": flags}, context).result["answer"]
        except ResultInvalid as exc:
            errors.extend(FieldError(name, reason) for name, reason in exc.errors.items())
    if errors:
        return errors
    return CheckedAnnotation(item=item, rater=annotator, result={"answer": answer, "flags": canonical.qa_flags(flags)})
