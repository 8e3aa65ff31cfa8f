"""Item fields: the checks of single field values of an import line, the rating rule, and
``ItemFields``, the declaration of one protocol's item fields. Plain Python, no Django.

Each value check returns the value or raises `Invalid` with the reason; the line checks
(annotation/importing/formats.py for items, annotation/importing/annotation_lines.py for
annotations) turn reasons into `FieldError`s. A protocol declares its fields in its own
``fields.py`` (``ITEM_FIELDS``, read as ``Protocol.item_fields``) from these checks.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from protocols.base import LETTERS

# How a QA item is answered: an option letter (or letters), a whole number, a list of objects.
QA_FORMATS = ("choice", "count", "set")
# What a blind QA annotator may flag about an item.
QA_FLAGS = ("missing_correct_option", "wrong_ground_truth", "ambiguous", "insufficient_evidence")
# A box annotation's answer when there is no box to draw (the box form's).
BOX_OUTCOMES = ("nothing_to_label", "cannot_determine")


@dataclass(frozen=True)
class FieldError:
    field: str
    reason: str


class Invalid(Exception):
    def __init__(self, reason: str):
        self.reason = reason


@dataclass(frozen=True)
class ItemFields:
    """One protocol's item fields, in three groups:

    - `required`: needed even by a raw item (the media and whatever defines the task);
    - `optional`: metadata that may be absent;
    - `labels`: what annotators produce. An item carrying none of them is *raw* (status pending),
      one carrying them is *complete*; a complete item must carry every field of `labels_required`.
    """

    required: dict[str, Callable[[Any], Any]]
    optional: dict[str, Callable[[Any], Any]]
    labels: dict[str, Callable[[Any], Any]]
    labels_required: tuple[str, ...]
    # Checks across fields, run on every valid item, raw or complete: returns errors.
    cross: Callable[[dict[str, Any]], list[FieldError]] | None = None
    # Fields holding a gold item's known answer where the labels are none (a rating protocol's
    # expected scores): allowed, and then required, only on a gold item; they do not make an item
    # complete. The importer stores them in the rating's form (criteria order).
    gold_answer: dict[str, Callable[[Any], Any]] = field(default_factory=dict)

    @property
    def all_fields(self) -> set[str]:
        return set(self.required) | set(self.optional) | set(self.labels) | set(self.gold_answer)


def text(value: Any, *, max_len: int = 2000) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("must be a non-empty string")
    if len(value) > max_len:
        raise Invalid(f"longer than {max_len} characters")
    return value


any_text = text  # any non-empty string of the default maximum length


def choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in options:
            raise Invalid(f"must be one of {', '.join(options)}")
        return value

    return check


def media_path(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("must be a relative media path (a non-empty string)")
    if len(value) > 500:
        raise Invalid("path longer than 500 characters")
    if "\x00" in value:  # refused here, by field, not only when the import resolves the path
        raise Invalid(NUL_REASON)
    return value


def image_list(value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) < 2:
        raise Invalid("must be a list of at least 2 image paths (initial, final, …)")
    return [media_path(v) for v in value]


def text_list(*, exactly: int | None = None, min_len: int = 0) -> Callable[[Any], list[str]]:
    def check(value: Any) -> list[str]:
        if not isinstance(value, list):
            raise Invalid("must be a list of strings")
        if exactly is not None and len(value) != exactly:
            raise Invalid(f"must hold exactly {exactly} strings, got {len(value)}")
        if len(value) < min_len:
            raise Invalid(f"must hold at least {min_len} strings")
        for v in value:
            text(v)
        return value

    return check


def bbox(value: Any) -> Any:
    if isinstance(value, str):
        if value not in BOX_OUTCOMES:
            raise Invalid(f"must be [x, y, width, height] or one of {', '.join(BOX_OUTCOMES)}")
        return value
    if not isinstance(value, list) or len(value) != 4:
        raise Invalid("must be [x, y, width, height] in image pixels")
    for v in value:
        if type(v) not in (int, float) or not math.isfinite(v):  # type(): bool is not a coordinate
            raise Invalid("must be [x, y, width, height] in image pixels")
    x, y, w, h = value
    if x < 0 or y < 0 or w <= 0 or h <= 0:
        raise Invalid("needs x, y >= 0 and width, height > 0")
    return value


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Invalid("must be true or false")
    return value


def subset(options: tuple[str, ...]) -> Callable[[Any], list[str]]:
    def check(value: Any) -> list[str]:
        if not isinstance(value, list) or not value:
            raise Invalid(f"must be a non-empty list drawn from {', '.join(options)}")
        bad = [v for v in value if v not in options]
        if bad:
            raise Invalid(f"unknown value {bad[0]!r}; allowed: {', '.join(options)}")
        if len(set(value)) != len(value):
            raise Invalid("lists a value twice")
        return value

    return check


def options(value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) < 2:
        raise Invalid("must be a list of at least 2 option strings (A = first)")
    if len(value) > len(LETTERS):
        raise Invalid(f"at most {len(LETTERS)} options")
    for v in value:
        text(v)
    return value


# --- ratings: one rule for a submit, an imported rating and a gold item's expected scores -------

_SCORE = "a whole number from 1 to 5"


def is_score(value: Any) -> bool:
    """A rating score: a whole number from 1 to 5 (N/A is None, never a score)."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 5


def rating_score_errors(
    scores: Any, *, criteria: tuple[str, ...], nullable: tuple[str, ...], complete: bool = True
) -> dict[str | None, str]:
    """The rating rule, checked here only: each criterion a score, a whole number from 1 to 5; N/A
    (null) only for the `nullable` criteria. With `complete`, every criterion is scored (a rating,
    submitted or imported); otherwise any non-empty subset (a gold item's expected scores).

    Returns the reason for each criterion refused, unknown ones first, then in criteria order; the
    key None when `scores` itself is refused (not an object, or an empty subset); {} when the rule
    holds. The callers name the fields their own way: a submit's and an annotation line's
    "scores.object", a gold item line's field "gold_scores" with "object: " before the reason.
    """
    na = " or null for N/A"
    if not isinstance(scores, dict) or (not complete and not scores):
        naming = "each" if complete else "at least one"
        na_where = f" (null for N/A: {' and '.join(nullable)} only)" if nullable else ""
        return {None: f"must be an object criterion -> {_SCORE}{na_where}, naming {naming} of {', '.join(criteria)}"}
    errors: dict[str | None, str] = {}
    for name in sorted(set(scores) - set(criteria), key=str):
        errors[name] = f"unknown criterion; allowed: {', '.join(criteria)}"
    for name in criteria:
        or_na = na if name in nullable else ""
        if name not in scores:
            if complete:
                errors[name] = f"missing: give {_SCORE}{or_na}"
        elif scores[name] is None:
            if name not in nullable:
                errors[name] = f"may not be null (only {' and '.join(nullable) or 'no criterion'} may be N/A)"
        elif not is_score(scores[name]):
            errors[name] = f"must be {_SCORE}{or_na}"
    return errors


def expected_scores(criteria: tuple[str, ...], nullable: tuple[str, ...]) -> Callable[[Any], dict[str, Any]]:
    """The check of a gold rating item's known answer: criterion -> the expected score 1..5, or null
    where the expected answer is N/A (nullable criteria only). Any non-empty subset of the
    criteria: an annotator's rating is scored on the criteria given (annotation/agreement.py
    gold_correct). The rule is a rating's (rating_score_errors); the first reason is given."""

    def check(value: Any) -> dict[str, Any]:
        problems = rating_score_errors(value, criteria=criteria, nullable=nullable, complete=False)
        if problems:
            criterion, reason = next(iter(problems.items()))
            raise Invalid(reason if criterion is None else f"{criterion}: {reason}")
        return value

    return check


def ordered_scores(scores: Mapping[str, Any], criteria: tuple[str, ...]) -> dict[str, Any]:
    """Scores of the criteria given (a subset), in criteria order."""
    return {c: scores[c] for c in criteria if c in scores}


# --- NUL bytes: never valid input (PostgreSQL stores none in text or jsonb) ----------------------


def nul_field(value: Any, path: str = "") -> str | None:
    """The field (JSON path) of the first string, key or value, holding a NUL byte, or None."""
    stack = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return where or "-"
        elif isinstance(node, dict):
            for key, child in node.items():
                name = f"{where}.{key}" if where else str(key)
                if "\x00" in str(key):
                    return name
                stack.append((child, name))
        elif isinstance(node, list):
            stack.extend((child, f"{where}[{i}]") for i, child in reversed(list(enumerate(node))))
    return None


NUL_REASON = "contains a NUL byte (\\u0000), which is never valid input"


# --- values jsonb cannot hold: Python's JSON reader takes them, PostgreSQL refuses them ------------

# What a JSON line holding such a value must contain: an escaped surrogate, a NaN or Infinity
# literal, an exponent of three digits or more, or a run of 300 digits. A line without one is never
# walked; a line with one (an "image123" matches) is walked by unstorable_value, which decides.
NOT_FINITE = "a number out of range (NaN, Infinity or beyond ±1.8e308); a finite number is expected"
UNSTORABLE_HINT = re.compile(r"\\u[dD][89a-fA-F]|NaN|Infinity|[eE]\+?\d{3}|\d{300}")


def unstorable_value(value: Any, path: str = "") -> tuple[str, str] | None:
    """(field, what is wrong) for the first value PostgreSQL's jsonb cannot hold although Python's
    JSON reader accepts it: a number too large for a float (``1e400`` reads as infinity) or a
    string, key or value, with half of a surrogate pair (``"\\ud800"``); None when every value
    can be stored."""
    stack = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return where or "-", "a lone surrogate (\\ud800-\\udfff), which is not a character"
        elif isinstance(node, float):
            if not math.isfinite(node):
                return where or "-", NOT_FINITE
        elif isinstance(node, dict):
            for key, child in node.items():
                name = f"{where}.{key}" if where else str(key)
                try:
                    str(key).encode("utf-8")
                except UnicodeEncodeError:
                    return name.encode("utf-8", "replace").decode(), "a key with a lone surrogate"
                stack.append((child, name))
        elif isinstance(node, list):
            stack.extend((child, f"{where}[{i}]") for i, child in reversed(list(enumerate(node))))
    return None


# --- media paths and boxes, checked before and after the media is opened ------------------------


def check_media_path(relpath: str) -> str | None:
    """Reason a relative media path is refused before touching the disk, or None when fine."""
    if "\x00" in relpath:
        return "path contains a NUL byte"
    if relpath.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", relpath):
        return "absolute paths are refused; give a path relative to the media root"
    parts = re.split(r"[/\\]", relpath)
    if any(part == ".." for part in parts):
        return "path leaves the media root ('..')"
    return None


def check_box_inside(bbox: Any, width: int | None, height: int | None) -> str | None:
    """A box must lie inside its image (boxes are stored clipped to the image)."""
    if not isinstance(bbox, list) or width is None or height is None:
        return None
    x, y, w, h = bbox
    eps = 1e-6
    if x + w > width + eps or y + h > height + eps:
        return f"box [{x}, {y}, {w}, {h}] leaves the {width}×{height} image"
    return None
