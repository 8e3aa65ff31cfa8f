"""Checks of one line of human annotations made elsewhere (import_annotations): a Likert rating
of an OSCBench video or a blind answer to a VisualTrans / M3-Verse question. Plain Python, no
Django. A valid line comes back as a `CheckedAnnotation` whose result is in annotation.canonical's
form, exactly what a submit of the same answer stores.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from annotation import canonical
from annotation.protocols import LETTERS, OSC_CRITERIA, OSC_NULLABLE, QA_FLAGS

from .field_checks import FieldError


@dataclass
class CheckedAnnotation:
    item: str
    rater: str
    result: dict[str, Any]


def check_rating(obj: dict[str, Any]) -> CheckedAnnotation | list[FieldError]:
    """`{"item", "rater", "scores": {criterion: 1..5 or null}}` with every OSCBench criterion."""
    errors: list[FieldError] = []
    for key in obj:
        if key not in ("item", "rater", "scores"):
            errors.append(FieldError(key, "unknown field for a rating"))
    item, rater = obj.get("item"), obj.get("rater")
    if not isinstance(item, str) or not item:
        errors.append(FieldError("item", "required, the item id (a string)"))
    if not isinstance(rater, str) or not rater.strip() or len(rater) > 200:
        errors.append(FieldError("rater", "required, a rater id string of at most 200 characters"))
    scores = obj.get("scores")
    if not isinstance(scores, dict):
        errors.append(FieldError("scores", "required, an object criterion -> 1..5 or null"))
    else:
        for key in scores:
            if key not in OSC_CRITERIA:
                errors.append(FieldError(f"scores.{key}", f"unknown criterion; allowed: {', '.join(OSC_CRITERIA)}"))
        for criterion in OSC_CRITERIA:
            if criterion not in scores:
                errors.append(FieldError(f"scores.{criterion}", "missing (give null for N/A where allowed)"))
                continue
            value = scores[criterion]
            if value is None:
                if criterion not in OSC_NULLABLE:
                    errors.append(FieldError(f"scores.{criterion}", "may not be null (only subject and scene may be N/A)"))
            elif not canonical.is_score(value):
                errors.append(FieldError(f"scores.{criterion}", "must be an integer 1..5"))
    if errors:
        return errors
    return CheckedAnnotation(item=item, rater=rater, result={"scores": canonical.rating_scores(scores, OSC_CRITERIA)})


def check_qa_answer(obj: dict[str, Any], protocol: str, item_payload: dict[str, Any] | None, *,
                    project_settings: dict[str, Any] | None = None) -> CheckedAnnotation | list[FieldError]:
    """`{"item", "annotator", "answer", "flags": [...]}`; the answer is checked against the item
    and stored as a submit of it would be (annotation.canonical: "b" -> "B", "A,C" -> ["A", "C"]).

    A null answer is allowed only together with at least one flag (e.g. insufficient_evidence).
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
    answer = obj.get("answer")
    if answer is None:
        if not flags:
            errors.append(FieldError("answer", "required (null only together with a flag)"))
    elif item_payload is not None:
        reason = _qa_answer_reason(protocol, answer, item_payload)
        if reason:
            errors.append(FieldError("answer", reason))
    if errors:
        return errors
    if item_payload is not None:
        answer = canonical.qa_result_answer(answer, protocol=protocol, payload=item_payload,
                                            project_settings=project_settings)
    return CheckedAnnotation(item=item, rater=annotator, result={"answer": answer, "flags": canonical.qa_flags(flags)})


def _qa_answer_reason(protocol: str, answer: Any, payload: dict[str, Any]) -> str | None:
    options = payload.get("options") or []
    allowed = LETTERS[: len(options)]
    if protocol == "m3verse":
        letters = [a.strip() for a in answer.split(",")] if isinstance(answer, str) else answer
        if not isinstance(letters, list) or not letters or not all(isinstance(a, str) and a in allowed for a in letters):
            return f"must be a list of option letters in A–{allowed[-1] if allowed else 'A'}"
        return None
    fmt = payload.get("format")
    if fmt == "choice":
        if not isinstance(answer, str) or answer.strip().upper() not in allowed:
            return f"must be one option letter in A–{allowed[-1] if allowed else 'A'}"
    elif fmt == "count":
        if not isinstance(answer, int) or isinstance(answer, bool) or answer < 0:
            return "must be a non-negative integer"
    elif fmt == "set":
        if not isinstance(answer, list) or not all(isinstance(a, str) for a in answer):
            return "must be a list of strings"
    return None
