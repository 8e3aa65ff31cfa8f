"""Validation of a submitted annotation result, one function per workflow (a protocol's own form
validates with its module: annotation/protocols.py, "A workflow of its own"). Plain Python, no Django.

Each validator returns the cleaned result (the exact JSON stored, in annotation.canonical's
form, the same as an import stores) or raises `ResultInvalid`
whose `errors` maps a field name (``"bbox"``, ``"scores.subject"``, ``"change_distractors.2"``)
to a message a person can act on. Light format checks that should not block a submit (a state
description that names no state, a change that does not start with a verb) come back as
warnings from `quintuplet_warnings`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from protocols.fields import rating_score_errors
from protocols.normalize import answer_text

from . import canonical
from .fill_form import FillContext, fill_validate
from .protocols import BOX_OUTCOMES, LETTERS, QA_FLAGS, custom_workflow, quintuplet_choices, quintuplet_fields

MAX_TEXT = 500


class ResultInvalid(ValueError):
    def __init__(self, errors: dict[str, str]):
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


@dataclass(frozen=True)
class QuintupletContext:
    """The quintuplet form of an item's protocol: its result's fields (in the form's order) and the
    values each closed field allows (protocols/base.py: result_fields, result_choices)."""

    fields: tuple[str, ...]
    choices: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class BoxContext:
    width: int | None
    height: int | None
    labels: tuple[str, ...]


@dataclass(frozen=True)
class QAContext:
    """The answer a QA item takes (its protocol's ``answer_shape``, protocols/base.py): the format,
    how many options, whether several letters may be chosen, and the letter of the option saying
    that none of the others is correct where the item lists one (``none_option``)."""

    format: str
    n_options: int = 0
    multiple: bool = False
    none_option: str | None = None

    @classmethod
    def of(cls, shape: Mapping[str, Any]) -> QAContext:
        """The context of an item from its answer shape (annotation.protocols.qa_shape)."""
        return cls(
            format=shape["format"],
            n_options=shape.get("n_options", 0),
            multiple=bool(shape.get("multiple")),
            none_option=shape.get("none_option"),
        )


@dataclass(frozen=True)
class RatingContext:
    """The rating form of an item's protocol: its criteria (in the form's order) and those that may be N/A."""

    criteria: tuple[str, ...]
    nullable: tuple[str, ...]


@dataclass(frozen=True)
class Validated:
    result: dict[str, Any]
    warnings: dict[str, str] = field(default_factory=dict)


def _require_mapping(result: Any) -> dict[str, Any]:
    if not isinstance(result, dict):
        raise ResultInvalid({"result": "The result must be a JSON object."})
    return result


def _text(value: Any, name: str, errors: dict[str, str]) -> str | None:
    if not isinstance(value, str) or not value.strip():
        errors[name] = "Write a non-empty text."
        return None
    text = " ".join(value.split())
    if len(text) > MAX_TEXT:
        errors[name] = f"At most {MAX_TEXT} characters."
        return None
    return text


def _unknown_keys(result: dict[str, Any], allowed: set[str], errors: dict[str, str]) -> None:
    for key in sorted(set(result) - allowed):
        errors[key] = "Unknown field."


# --- quintuplet ---------------------------------------------------------------------------


# Words that begin a noun phrase, never a verb: a change description starting with one of these
# ("the door opens", "a door being opened") is probably not an imperative verb phrase.
_NOT_VERB_START = {
    "a",
    "an",
    "the",
    "this",
    "that",
    "these",
    "those",
    "some",
    "its",
    "his",
    "her",
    "their",
    "my",
    "our",
    "your",
    "it",
    "he",
    "she",
    "they",
    "someone",
    "somebody",
    "object",
    "state",
}
# Words that describe a state rather than an object; a state description made of these alone
# ("open", "slightly opened") names no object.
_STATE_ONLY = {
    "open",
    "opened",
    "closed",
    "close",
    "on",
    "off",
    "full",
    "empty",
    "whole",
    "cut",
    "half",
    "slightly",
    "fully",
    "partly",
    "partially",
    "very",
    "not",
}


def quintuplet_warnings(result: dict[str, Any]) -> dict[str, str]:
    warnings: dict[str, str] = {}
    if "change" not in result:  # a labelling pass's answer: no text to check (fill_form.py)
        return warnings
    for name in ("state_a", "state_b"):
        words = re.findall(r"[a-z]+", str(result.get(name, "")).lower())
        content = [w for w in words if w not in _NOT_VERB_START]
        if len(content) < 2 or all(w in _STATE_ONLY for w in content):
            warnings[name] = "A state description should name the object and its state, e.g. 'a slightly opened door'."
    changes = [("change", result.get("change", ""))] + [
        (f"change_distractors.{i}", text) for i, text in enumerate(result.get("change_distractors") or [])
    ]
    for name, text in changes:
        words = re.findall(r"[a-z]+", str(text).lower())
        if not words or words[0] in _NOT_VERB_START or words[0].endswith("ly") or len(words) < 2:
            warnings[name] = "A change description should start with a verb, e.g. 'open the door'."
    return warnings


def validate_quintuplet(result: Any, ctx: QuintupletContext | None = None) -> Validated:
    """A quintuplet by the item's protocol (ctx; left out: the registered quintuplet protocols')."""
    if ctx is None:
        ctx = QuintupletContext(fields=quintuplet_fields(), choices=quintuplet_choices())
    result = _require_mapping(result)
    errors: dict[str, str] = {}
    _unknown_keys(result, set(ctx.fields), errors)
    clean: dict[str, Any] = {}
    for name in ("state_a", "state_b", "change"):
        clean[name] = _text(result.get(name), name, errors)
    distractors = result.get("change_distractors")
    if not isinstance(distractors, list) or len(distractors) != 3:
        errors["change_distractors"] = "Give exactly 3 wrong change descriptions."
    else:
        texts = [_text(d, f"change_distractors.{i}", errors) for i, d in enumerate(distractors)]
        clean["change_distractors"] = texts
        folded = [t.lower() for t in texts if t]
        if len(set(folded)) != len(folded):
            errors.setdefault("change_distractors", "The 3 wrong change descriptions must differ from each other.")
        if clean.get("change") and clean["change"].lower() in folded:
            errors.setdefault("change_distractors", "A wrong change description repeats the correct change.")
    if clean.get("state_a") and clean.get("state_b") and clean["state_a"].lower() == clean["state_b"].lower():
        errors["state_b"] = "The two states must differ."
    for name, allowed in ctx.choices.items():
        value = result.get(name)
        if value not in allowed:
            errors[name] = f"Choose one of: {', '.join(allowed)}."
        clean[name] = value
    if errors:
        raise ResultInvalid(errors)
    return Validated(clean, quintuplet_warnings(clean))


# --- box ----------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return float(value)


def clip_box(bbox: list[float], width: int | None, height: int | None) -> list[float] | None:
    """[x, y, w, h] clipped to the image; None when nothing of the box is inside it."""
    x, y, w, h = bbox
    x0, y0, x1, y1 = max(0.0, x), max(0.0, y), x + w, y + h
    if width:
        x1 = min(float(width), x1)
    if height:
        y1 = min(float(height), y1)
    if x1 - x0 <= 0 or y1 - y0 <= 0:
        return None
    return [round(x0, 2), round(y0, 2), round(x1 - x0, 2), round(y1 - y0, 2)]


def validate_box(result: Any, ctx: BoxContext) -> Validated:
    result = _require_mapping(result)
    errors: dict[str, str] = {}
    if "outcome" in result:
        _unknown_keys(result, {"outcome"}, errors)
        if result["outcome"] not in BOX_OUTCOMES:
            errors["outcome"] = f"Choose one of: {', '.join(BOX_OUTCOMES)}."
        if errors:
            raise ResultInvalid(errors)
        return Validated({"outcome": result["outcome"]})
    _unknown_keys(result, {"bbox", "state"}, errors)
    bbox = result.get("bbox")
    clean: dict[str, Any] = {}
    numbers = [_number(v) for v in bbox] if isinstance(bbox, list) else []
    if len(numbers) != 4 or any(v is None for v in numbers):
        errors["bbox"] = (
            "Draw one box: [x, y, width, height] in image pixels (or answer nothing_to_label / cannot_determine)."
        )
    elif numbers[2] <= 0 or numbers[3] <= 0:
        errors["bbox"] = "The box needs a positive width and height."
    else:
        clipped = clip_box(numbers, ctx.width, ctx.height)
        if clipped is None:
            errors["bbox"] = "The box lies outside the image."
        clean["bbox"] = clipped
    state = result.get("state")
    if not isinstance(state, str) or state not in ctx.labels:
        errors["state"] = "Pick the state label from the listed candidates."
    clean["state"] = state
    if errors:
        raise ResultInvalid(errors)
    return Validated(clean)


# --- blind QA -----------------------------------------------------------------------------

# The flag saying that no listed option is correct (protocols/fields.py: QA_FLAGS). An answer has
# one way to say so (docs/architecture.md, "Contradictory answers"): this flag with no option picked,
# or, on an item that lists a "none of the others" option, that option alone (and not the flag).
NO_CORRECT_OPTION = "missing_correct_option"


def _letters_text(letters: list[str]) -> str:
    return letters[0] if len(letters) == 1 else ", ".join(letters[:-1]) + " and " + letters[-1]


def _choice_contradiction(letters: list[str], flags: list[str], ctx: QAContext) -> str | None:
    """Why a choice answer contradicts itself or its flags (None when it does not)."""
    none = ctx.none_option if ctx.none_option in tuple(LETTERS[: ctx.n_options]) else None
    if none is not None:
        if NO_CORRECT_OPTION in flags:
            return (
                f"Option {none} says that no listed option is correct: pick {none} (alone) instead of the flag "
                "'no listed option is correct'."
            )
        others = [v for v in letters if v != none]
        if none in letters and others:
            return f"Option {none} says that no listed option is correct, so it cannot go with {_letters_text(others)}."
        return None
    if NO_CORRECT_OPTION in flags and letters:
        return (
            f"The flag 'no listed option is correct' contradicts the answer {_letters_text(letters)}: "
            "clear the flag, or leave the options unpicked."
        )
    return None


def _repeated_object(names: list[str]) -> str | None:
    """The first object a set answer names twice under the answer rule (protocols/normalize.py)."""
    seen: set[str] = set()
    for name in names:
        key = answer_text(name)
        if key in seen:
            return name
        seen.add(key)
    return None


def validate_qa(result: Any, ctx: QAContext) -> Validated:
    result = _require_mapping(result)
    errors: dict[str, str] = {}
    _unknown_keys(result, {"answer", "flags"}, errors)
    flags = result.get("flags", [])
    if not isinstance(flags, list) or any(f not in QA_FLAGS for f in flags):
        errors["flags"] = f"Flags are a list drawn from: {', '.join(QA_FLAGS)}."
        flags = []
    flags = canonical.qa_flags(flags)
    answer = result.get("answer")
    clean_answer: Any = None
    if answer is None or answer == "" or answer == []:
        if not flags:
            errors["answer"] = "Answer the question, or set a flag saying why you cannot."
        elif ctx.format == "choice" and (reason := _choice_contradiction([], flags, ctx)):
            errors["answer"] = reason
    elif ctx.format == "choice":
        allowed = set(LETTERS[: ctx.n_options])
        letters = canonical.option_letters(answer)
        if letters is None or not letters or any(v not in allowed for v in letters):
            errors["answer"] = f"Answer with option letters from {', '.join(sorted(allowed))}."
        elif len(set(letters)) != len(letters):
            errors["answer"] = "Each option letter at most once."
        elif not ctx.multiple and len(letters) != 1:
            errors["answer"] = "Exactly one option is correct for this question: give one letter."
        elif reason := _choice_contradiction(sorted(letters), flags, ctx):
            errors["answer"] = reason
        else:
            clean_answer = canonical.qa_answer(letters, fmt="choice", multiple=ctx.multiple)
    elif ctx.format == "count":
        answer = canonical.qa_answer(answer, fmt="count")
        if isinstance(answer, bool) or not isinstance(answer, int) or answer < 0:
            errors["answer"] = "Answer with a whole number (0 or more)."
        else:
            clean_answer = answer
    elif ctx.format == "set":
        clean_answer = canonical.qa_answer(answer, fmt="set")
        if clean_answer is None:  # names no object: no answer (annotation.canonical), stored as such
            if not flags:
                errors["answer"] = "Name at least one object, or set a flag."
        elif not isinstance(clean_answer, list):
            errors["answer"] = "Answer with a list of objects."
            clean_answer = None
        elif (twice := _repeated_object(clean_answer)) is not None:
            errors["answer"] = f"'{twice}' is named twice: name each object once."
            clean_answer = None
    else:
        errors["answer"] = f"This item has an unknown answer format {ctx.format!r}."
    if errors:
        raise ResultInvalid(errors)
    return Validated({"answer": clean_answer, "flags": flags})


# --- video rating -------------------------------------------------------------------------


def validate_rating(result: Any, ctx: RatingContext) -> Validated:
    """Scores by the rating rule (protocols.fields.rating_score_errors) for the item's criteria."""
    result = _require_mapping(result)
    errors: dict[str, str] = {}
    _unknown_keys(result, {"scores"}, errors)
    scores = result.get("scores")
    for name, reason in rating_score_errors(scores, criteria=ctx.criteria, nullable=ctx.nullable).items():
        errors["scores" if name is None else f"scores.{name}"] = reason
    if errors:
        raise ResultInvalid(errors)
    return Validated({"scores": canonical.rating_scores(scores, ctx.criteria)})


def validate_result(workflow: str, result: Any, context: Any = None) -> Validated:
    if isinstance(context, FillContext):  # an item of a labelling pass: only the fields it asks (fill_form.py)
        clean, errors = fill_validate(result, context)
        if errors:
            raise ResultInvalid(errors)
        return Validated(clean)
    if workflow == "quintuplet":
        return validate_quintuplet(result, context)
    if workflow == "box":
        return validate_box(result, context)
    if workflow == "qa":
        return validate_qa(result, context)
    if workflow == "rating":
        return validate_rating(result, context)
    custom = custom_workflow(workflow)
    if custom is not None:  # a protocol's own form (annotation/protocols.py, "A workflow of its own")
        clean, errors = custom.validate(result, context)
        if errors:
            raise ResultInvalid(errors)
        return Validated(clean)
    raise ValueError(f"unknown workflow {workflow!r}")
