"""How the items file of an import is read, whatever its name: JSONL lines, the items of a JSON
document ``{header fields..., "items": [...]}``, or the elements of a top-level JSON array; and which
of those a file is (`inspect_items`), or one message naming the shape it has instead
(annotation/importing/shapes.py).

A document or an array is parsed incrementally: one item at a time with
`json.JSONDecoder.raw_decode` over a buffered reader, so memory does not grow with the file. Each
item is numbered by the line it starts on (in a release export, item N is on line N + 1, as in the
JSONL export); a document's header is the fields before ``items``.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from django.conf import settings

from .common import InvalidJSON, LineTooLong
from .shapes import WrongShape, binary_shape, json_kind, text_shape

# A JSON document: characters read per refill, the longest one item may be, and how far into the
# file its "items" list must start (the header fields before it are small).
DOC_READ_CHARS = 1024 * 1024
DOC_MAX_ITEM_CHARS = 64 * 1024 * 1024
DOC_MAX_HEAD_CHARS = 4 * 1024 * 1024
_WS = re.compile(r"[ \t\n\r]*")
# The shapes `inspect_items` tells apart.
JSONL, DOCUMENT, ARRAY = "jsonl", "json", "array"


def max_line_bytes() -> int:
    return int(getattr(settings, "STATELAB_MAX_LINE_BYTES", 1024**2))


def iter_lines(stream: BinaryIO, skip: int = 0) -> Iterator[tuple[int, str | LineTooLong | None]]:
    """Yield (1-based line number, decoded text or None when not UTF-8); blank lines and line
    `skip` (the header line of a JSONL export) skipped.

    A line is read with a bounded readline: one longer than STATELAB_MAX_LINE_BYTES is never
    held whole; it is reported as a LineTooLong and the file ends there (reading on to find
    where a 1 GiB line stops is a waste, and the import is refused anyway)."""
    limit = max_line_bytes()
    number = 0
    while raw := stream.readline(limit + 1):
        number += 1
        if len(raw) > limit and not (len(raw) == limit + 1 and raw.endswith(b"\n")):
            yield (
                number,
                LineTooLong(
                    f"longer than {limit} bytes (STATELAB_MAX_LINE_BYTES); the file was not read past this line"
                ),
            )
            return
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if number == skip or not raw.strip():
            continue
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError:
            yield number, None


class _DocumentEnd(Exception):
    """The JSON document is malformed here (`line`: where; `reason`: why)."""

    def __init__(self, line: int, reason: str):
        self.line = line
        self.reason = reason


class _DocumentReader:
    """Walks a JSON document from a binary stream, holding one value (plus a read chunk) at a time."""

    def __init__(self, stream: BinaryIO, *, max_value_chars: int):
        self.text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline="")
        self.buf = ""
        self.pos = 0
        self.line = 1  # line number at self.pos
        self.col0 = 0  # column of buf[0] on its line (the buffer is trimmed mid-line)
        self.eof = False
        self.read_chars = 0
        self.max_value_chars = max_value_chars
        self._decode = json.JSONDecoder().raw_decode

    def _more(self) -> bool:
        if self.eof:
            return False
        chunk = self.text.read(DOC_READ_CHARS)  # UnicodeDecodeError: the caller reports it
        if not chunk:
            self.eof = True
            return False
        self.read_chars += len(chunk)
        if self.pos:
            newline = self.buf.rfind("\n", 0, self.pos)
            self.col0 = self.pos - newline - 1 if newline >= 0 else self.col0 + self.pos
            self.buf = self.buf[self.pos :]
            self.pos = 0
        self.buf += chunk
        return True

    def _advance(self, to: int) -> None:
        self.line += self.buf.count("\n", self.pos, to)
        self.pos = to

    def _where(self, index: int) -> str:
        line = self.line + self.buf.count("\n", self.pos, index)
        newline = self.buf.rfind("\n", 0, index)
        column = index - newline if newline >= 0 else self.col0 + index + 1
        return f"line {line} column {column}"

    def peek(self) -> str:
        """The next character that is not whitespace ('' at the end of the file)."""
        while True:
            self._advance(_WS.match(self.buf, self.pos).end())
            if self.pos < len(self.buf) or not self._more():
                return self.buf[self.pos : self.pos + 1]

    def expect(self, chars: str, what: str) -> str:
        found = self.peek()
        if not found or found not in chars:
            got = f"found {found!r}" if found else "the file ends"
            raise _DocumentEnd(self.line, f"expected {what} at {self._where(self.pos)}, {got}")
        self._advance(self.pos + 1)
        return found

    def value(self) -> tuple[Any, str]:
        """Decode the JSON value that starts here; (value, its text)."""
        self.peek()
        start_line = self.line
        while True:
            try:
                obj, end = self._decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                # Maybe only cut off by the end of the buffer: read on, up to the size limit.
                if len(self.buf) - self.pos < self.max_value_chars and self._more():
                    continue
                raise _DocumentEnd(start_line, f"{exc.msg} at {self._where(exc.pos)}") from None
            except RecursionError:
                raise _DocumentEnd(start_line, "nested too deeply") from None
            # A number or literal may go on in the next chunk; anything else ends where it ends.
            if end < len(self.buf) or not self._more():
                text = self.buf[self.pos : end]
                self._advance(end)
                return obj, text


def _document_head(reader: _DocumentReader) -> dict | None:
    """Read up to the items list's "[": the fields before it, or None when this is no document."""
    if reader.peek() != "{":
        return None
    reader.expect("{", "'{'")
    head: dict[str, Any] = {}
    while reader.peek() == '"':
        key, _ = reader.value()
        reader.expect(":", "':'")
        if key == "items" and reader.peek() == "[":
            reader.expect("[", "'['")
            return head
        head[key], _ = reader.value()
        if reader.read_chars > DOC_MAX_HEAD_CHARS:
            return None
        if reader.peek() != ",":
            return None
        reader.expect(",", "','")
    return None


def document_items(
    open_stream: Callable[[], BinaryIO], *, array: bool = False
) -> Iterator[tuple[int, str | InvalidJSON | None]]:
    """The items of a JSON document (or, with `array`, the elements of a top-level JSON array),
    each with the line it starts on; a syntax error ends them."""
    with open_stream() as fh:
        reader = _DocumentReader(fh, max_value_chars=DOC_MAX_ITEM_CHARS)
        try:
            try:
                if array:
                    reader.expect("[", "'['")
                elif _document_head(reader) is None:
                    raise _DocumentEnd(reader.line, "not a JSON document with an items list")
                if reader.peek() == "]":
                    reader.expect("]", "']'")
                else:
                    while True:
                        reader.peek()
                        line = reader.line
                        _obj, text = reader.value()
                        yield line, text
                        if reader.expect(",]", "',' or ']' after an item") == "]":
                            break
                # A document's fields after the items list are read and ignored; then it must end.
                while not array and reader.expect(",}", "',' or '}'") == ",":
                    reader.value()
                    reader.expect(":", "':'")
                    reader.value()
                if reader.peek():
                    raise _DocumentEnd(reader.line, f"extra data after the document at {reader._where(reader.pos)}")
            except UnicodeDecodeError:
                yield reader.line, None
        except _DocumentEnd as exc:
            yield exc.line, InvalidJSON(exc.reason)


def inspect_items(open_stream: Callable[[], BinaryIO]) -> tuple[str, dict | None]:
    """What the items file is: (DOCUMENT, its header), (ARRAY, None) or (JSONL, a release export's
    header line or None). A file in none of these shapes raises WrongShape, one message naming
    what it is instead (a CSV table, an object without "items", an array of strings, ...)."""
    with open_stream() as fh:
        head = fh.read(4096)
    if (found := binary_shape(head)) is not None:
        raise WrongShape(found)
    with open_stream() as fh:
        reader = _DocumentReader(fh, max_value_chars=DOC_MAX_HEAD_CHARS)
        try:
            if reader.peek() == "[":
                _array_of_objects(reader)
                return ARRAY, None
            header = _document_head(reader)
            if header is not None:
                return DOCUMENT, header
        except (_DocumentEnd, UnicodeDecodeError):
            pass
    with open_stream() as fh:
        first = [(n, t) for n, t in itertools.islice(iter_lines(fh), 3)]
    if first and isinstance(first[0][1], str) and len(first[0][1]) <= DOC_MAX_HEAD_CHARS:
        try:
            obj = json.loads(first[0][1])
        except (ValueError, RecursionError):
            obj = None
        # A release export's header line: the item importer skips it.
        if isinstance(obj, dict) and set(obj) == {"release"} and isinstance(obj["release"], dict):
            return JSONL, {**obj["release"], "_line": first[0][0]}
    if (found := text_shape([t for _n, t in first], whole=lambda: _whole_value(open_stream))) is not None:
        raise WrongShape(found)
    return JSONL, None


def _array_of_objects(reader: _DocumentReader) -> None:
    """An array's first element must be an object (an item); WrongShape names what it is. A
    syntax error is left to `document_items`, which names its line."""
    reader.expect("[", "'['")
    if reader.peek() in ("{", "]", ""):
        return
    try:
        value, _text = reader.value()
    except _DocumentEnd:
        return
    raise WrongShape(f"a JSON array of {json_kind(value)}s, not of item objects")


def _whole_value(open_stream: Callable[[], BinaryIO]) -> Any:
    """The file's first JSON value when it is small (DOC_MAX_HEAD_CHARS) and well formed, else None."""
    with open_stream() as fh:
        reader = _DocumentReader(fh, max_value_chars=DOC_MAX_HEAD_CHARS)
        try:
            value, _text = reader.value()
        except (_DocumentEnd, UnicodeDecodeError):
            return None
        return value
