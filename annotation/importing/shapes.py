"""What a file handed to the item importer is, when it is not items: one message naming the shape
found ("a CSV table", "a JSON object with the keys ... and no "items" list", "a PDF document"),
so that a file in the wrong shape is refused once instead of line by line. Plain Python.

The importer says what it expects after it (annotation/importing/items.py, `expected_shapes`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

# Leading bytes of file types someone may hand over by mistake.
_SIGNATURES = (
    (b"%PDF", "a PDF document"),
    (b"PAR1", "an Apache Parquet file"),
    (b"\x1f\x8b", "a gzip-compressed file (decompress it first)"),
    (b"BZh", "a bzip2-compressed file (decompress it first)"),
    (b"\xfd7zXZ\x00", "an xz-compressed file (decompress it first)"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive (use a .zip)"),
    (b"Rar!", "a RAR archive (use a .zip)"),
    (b"\x89PNG", "an image (PNG)"),
    (b"\xff\xd8\xff", "an image (JPEG)"),
    (b"GIF8", "an image (GIF)"),
    (b"\x1aE\xdf\xa3", "a video (WebM / Matroska)"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"\xd0\xcf\x11\xe0", "an old Office file (.xls / .doc)"),
    (b"\xff\xfe", "UTF-16 text (save it as UTF-8)"),
    (b"\xfe\xff", "UTF-16 text (save it as UTF-8)"),
)
_YAML_KEY = re.compile(r"""^[\w"' .-]{1,60}:(\s|$)""")


class WrongShape(Exception):
    """The file is not items; the message names what it is instead ("a CSV table (...)")."""


def json_kind(value: Any) -> str:
    """A JSON value's kind in words: object, array, string, number, true/false value, null."""
    if isinstance(value, bool):
        return "true/false value"
    if value is None:
        return "null"
    return {str: "string", int: "number", float: "number", list: "array", dict: "object"}.get(type(value), "value")


def binary_shape(head: bytes) -> str | None:
    """The file type its first bytes give away, for a file that is not text; None for text."""
    for signature, found in _SIGNATURES:
        if head.startswith(signature):
            return found
    if head[4:8] == b"ftyp":
        return "a video (MP4 / MOV)"
    if head[:4] == b"RIFF" and head[8:12] in (b"WEBP", b"AVI "):
        return "an image or video (RIFF)"
    if b"\x00" in head:
        return "a binary file, not text"
    return None


def _excerpt(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= 60 else text[:57] + "...")


def text_shape(lines: Sequence[Any], *, whole: Callable[[], Any]) -> str | None:
    """The shape of a text file whose first (up to three) non-blank lines are `lines` (str, None
    where not UTF-8, or a too-long-line marker), or None when it may be JSONL: its first line is a
    JSON object, it has a single line (its own error says what is wrong), or a later line is an
    object (a broken first line among good ones). `whole()` gives the file's first JSON value
    when it can be read whole (a JSON object spread over lines), else None."""
    if len(lines) < 2 or any(not isinstance(t, str | None) for t in lines):
        return None
    decoded = []
    for text in lines:
        try:
            decoded.append(json.loads(text) if text is not None else None)
        except (ValueError, RecursionError):
            decoded.append(_NOT_JSON)
    if any(isinstance(value, dict) for value in decoded):
        return None
    if all(text is None for text in lines):
        return "text that is not UTF-8"
    first = next(t for t in lines if t is not None).strip()
    if first.startswith("{"):
        value = whole()
        if isinstance(value, dict):
            if "items" in value:
                return f'a JSON object whose "items" is {_a(json_kind(value["items"]))}, not a list of items'
            keys = ", ".join(f'"{k}"' for k in list(value)[:6]) + (", ..." if len(value) > 6 else "")
            return f'a JSON object with the keys {keys} and no "items" list' if value else "an empty JSON object"
        return "a JSON object spread over several lines (not one item per line) that could not be read whole"
    if all(value is not _NOT_JSON for value in decoded):
        kinds = sorted({json_kind(value) for value in decoded})
        return f"JSON lines of {' and '.join(k + 's' for k in kinds)}, not item objects"
    if first.startswith("<"):
        return f"XML or HTML markup (first line: {_excerpt(first)})"
    second = lines[1] or ""
    if "\t" in first and "\t" in second:
        return f"a tab-separated table (first line: {_excerpt(first)})"
    if "," in first and "," in second:
        return f"a CSV table (first line: {_excerpt(first)})"
    if first.startswith("---") or _YAML_KEY.match(first):
        return f"YAML or other 'key: value' text (first line: {_excerpt(first)})"
    return f"text that is not JSON (first line: {_excerpt(first)})"


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


_NOT_JSON = object()
