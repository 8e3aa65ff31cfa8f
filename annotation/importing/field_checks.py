"""Checks of single field values of an import line. Plain Python, no Django.

Each value check returns the value or raises `Invalid` with the reason; the line checks
(formats.py for items, annotation_lines.py for annotations) turn reasons into `FieldError`s.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from annotation.protocols import BOX_OUTCOMES, LETTERS
from annotation.results import rating_score_errors


@dataclass(frozen=True)
class FieldError:
    field: str
    reason: str


class Invalid(Exception):
    def __init__(self, reason: str):
        self.reason = reason


def text(value: Any, *, max_len: int = 2000) -> str:
    if not isinstance(value, str) or not value.strip():
        raise Invalid("must be a non-empty string")
    if len(value) > max_len:
        raise Invalid(f"longer than {max_len} characters")
    return value


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


def gold_scores(value: Any) -> dict[str, Any]:
    """An OSCBench gold item's known answer: criterion -> the expected score 1..5, or null where
    the expected answer is N/A (subject and scene only). Any non-empty subset of the criteria:
    an annotator's rating is scored on the criteria given (annotation.agreement.gold_correct).
    The rule is a rating's (annotation.results.rating_score_errors); the first reason is given."""
    problems = rating_score_errors(value, complete=False)
    if problems:
        criterion, reason = next(iter(problems.items()))
        raise Invalid(reason if criterion is None else f"{criterion}: {reason}")
    return value


any_text = text  # any non-empty string of the default maximum length


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
