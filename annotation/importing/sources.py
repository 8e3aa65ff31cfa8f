"""Where an import reads from: a JSONL file or a JSON release export with a media folder, or a
zip holding both.

Every kind gives the same small interface to the importer:
- `lines()` streams ``(line number, text)`` of the items, one at a time, and can be called again
  for the second (write) pass — nothing is held in memory. The text is None for a line that is
  not UTF-8, and an `InvalidJSON` where an item could not be cut out of a JSON document;
- `header`: the release header of a release export (its ``option_seed`` above all), or None;
- `media_reason(path)` says why a relative media path is refused (escapes the media root,
  symlink out, missing, not a file, too large), or None;
- `local_path(path)` gives a local file to inspect (a zip member is extracted to a temporary
  file for the duration of the ``with``), `open_media(path)` a binary stream to store;
- `follow(meter, passes)`: count what `lines()` reads from now on (an import run's progress).

The items file is recognised by its content, whatever its name:
- JSONL, one item per line; a first line ``{"release": {...}}`` (a JSONL release export) is the
  header, not an item;
- a JSON document ``{header fields..., "items": [item, ...]}`` (the default release export, or
  any such document however it is formatted). It is parsed incrementally — one item at a time
  with `json.JSONDecoder.raw_decode` over a buffered reader — so memory does not grow with the
  file. Each item is numbered by the line it starts on (in an export, item N is on line N + 1,
  as in the JSONL export); the header is the fields before ``items``.

Zip layout: the items are ``items.jsonl`` at the top (or the only ``*.jsonl`` there); media
paths in the items are relative to the zip's root; an optional ``release.json`` (written by a
release export) carries the release header.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import stat
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings

from protocols.fields import check_media_path

from .common import InvalidJSON, LineTooLong

READ_CHUNK = 1024 * 1024
# A JSON document: characters read per refill, the longest one item may be, and how far into the
# file its "items" list must start (the header fields before it are small).
DOC_READ_CHARS = 1024 * 1024
DOC_MAX_ITEM_CHARS = 64 * 1024 * 1024
DOC_MAX_HEAD_CHARS = 4 * 1024 * 1024
_WS = re.compile(r"[ \t\n\r]*")


class SourceError(Exception):
    """The input file as a whole cannot be read (no JSONL in the zip, not a zip, …)."""


def max_line_bytes() -> int:
    return int(getattr(settings, "STATELAB_MAX_LINE_BYTES", 1024**2))


def _iter_lines(stream: BinaryIO, skip: int = 0) -> Iterator[tuple[int, str | LineTooLong | None]]:
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


def _document_items(open_stream: Callable[[], BinaryIO]) -> Iterator[tuple[int, str | InvalidJSON | None]]:
    """The items of a JSON document, each with the line it starts on; a syntax error ends them."""
    with open_stream() as fh:
        reader = _DocumentReader(fh, max_value_chars=DOC_MAX_ITEM_CHARS)
        try:
            try:
                if _document_head(reader) is None:
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
                # Fields after the items list are read and ignored; then the document must end.
                while reader.expect(",}", "',' or '}'") == ",":
                    reader.value()
                    reader.expect(":", "':'")
                    reader.value()
                if reader.peek():
                    raise _DocumentEnd(reader.line, f"extra data after the document at {reader._where(reader.pos)}")
            except UnicodeDecodeError:
                yield reader.line, None
        except _DocumentEnd as exc:
            yield exc.line, InvalidJSON(exc.reason)


def _inspect(open_stream: Callable[[], BinaryIO]) -> tuple[str, dict | None]:
    """("json", header) for a JSON document, else ("jsonl", release header or None)."""
    with open_stream() as fh:
        reader = _DocumentReader(fh, max_value_chars=DOC_MAX_HEAD_CHARS)
        try:
            head = _document_head(reader)
            if head is not None:
                return "json", head
        except (_DocumentEnd, UnicodeDecodeError):
            pass
    # JSONL: the first non-blank line may be a release export's header.
    with open_stream() as fh:
        for number, text in _iter_lines(fh):
            if not isinstance(text, str) or len(text) > DOC_MAX_HEAD_CHARS:
                break
            try:
                obj = json.loads(text)
            except (ValueError, RecursionError):
                break
            if isinstance(obj, dict) and set(obj) == {"release"} and isinstance(obj["release"], dict):
                return "jsonl", {**obj["release"], "_line": number}
            break
    return "jsonl", None


class ReadMeter:
    """How far an import has read its items file, for its run's progress (importing/runs.py).

    `done`: bytes the importer's passes have taken from the items file (uncompressed, in a zip);
    `total`: what they take in all, the file's size times the passes. Counted where the file is
    read, one buffer refill of BUFFER bytes at a time, never per line: a big import pays one
    addition per refill. Written by the reading thread only; another thread reads it.
    """

    BUFFER = 64 * 1024

    def __init__(self) -> None:
        self.done = 0
        self.total = 0

    def counted(self, stream: BinaryIO) -> BinaryIO:
        return io.BufferedReader(_CountedReads(stream, self), self.BUFFER)


class _CountedReads(io.RawIOBase):
    """A binary stream whose reads add to a ReadMeter."""

    def __init__(self, stream: BinaryIO, meter: ReadMeter):
        self.stream = stream
        self.meter = meter

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self.stream.readinto(buffer)
        self.meter.done += n
        return n

    def close(self) -> None:
        self.stream.close()
        super().close()


class _ItemsFile:
    """The items of one file, JSONL or JSON document, as `lines()`; `header` from its content."""

    meter: ReadMeter | None = None

    def _init_items(self) -> None:
        self.format, header = _inspect(self._open_items)
        self._skip = header.pop("_line") if header and "_line" in header else 0
        self.header: dict | None = header

    def follow(self, meter: ReadMeter, *, passes: int) -> None:
        """Count the reads of every later `lines()` on `meter`, which expects `passes` of them
        (the reads that recognised the file, before, are not counted)."""
        meter.total = self._items_bytes() * passes
        self.meter = meter

    def _open_pass(self) -> BinaryIO:
        stream = self._open_items()
        return stream if self.meter is None else self.meter.counted(stream)

    def lines(self) -> Iterator[tuple[int, str | InvalidJSON | None]]:
        if self.format == "json":
            yield from _document_items(self._open_pass)
            return
        with self._open_pass() as fh:
            yield from _iter_lines(fh, self._skip)


class DirectorySource(_ItemsFile):
    def __init__(self, jsonl: Path, media_root: Path | None, *, max_bytes: int):
        self.jsonl = Path(jsonl)
        if not self.jsonl.is_file():
            raise SourceError(f"{self.jsonl.name}: no such file")
        self.media_root = Path(media_root) if media_root else self.jsonl.parent
        if not self.media_root.is_dir():
            raise SourceError(f"media root {self.media_root} is not a folder")
        self._root_real = self.media_root.resolve()
        self.max_bytes = max_bytes
        self._init_items()

    def _open_items(self) -> BinaryIO:
        return open(self.jsonl, "rb")

    def _items_bytes(self) -> int:
        return self.jsonl.stat().st_size

    def media_reason(self, relpath: str) -> str | None:
        reason = check_media_path(relpath)
        if reason:
            return reason
        full = self.media_root / relpath
        real = full.resolve()  # follows symlinks: a link pointing outside is caught here
        if not real.is_relative_to(self._root_real):
            return "path leaves the media root (symlink pointing outside)"
        if not real.exists():
            return "file not found under the media root"
        if not real.is_file():
            return "not a regular file"
        if real.stat().st_size > self.max_bytes:
            return f"file is larger than {self.max_bytes} bytes"
        return None

    @contextlib.contextmanager
    def local_path(self, relpath: str) -> Iterator[Path]:
        yield (self.media_root / relpath).resolve()

    def open_media(self, relpath: str) -> BinaryIO:
        return open((self.media_root / relpath).resolve(), "rb")

    def close(self) -> None:
        pass


class ZipSource(_ItemsFile):
    def __init__(self, path: Path, *, max_bytes: int):
        try:
            self.zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError) as exc:
            raise SourceError(f"{Path(path).name}: not a readable zip ({exc})") from exc
        names = [n for n in self.zip.namelist() if "/" not in n.rstrip("/")]
        jsonl = [n for n in names if n.lower().endswith(".jsonl")]
        if "items.jsonl" in jsonl:
            self.jsonl_name = "items.jsonl"
        elif len(jsonl) == 1:
            self.jsonl_name = jsonl[0]
        else:
            self.zip.close()
            raise SourceError("the zip must hold items.jsonl (or exactly one .jsonl) at its top level")
        self.max_bytes = max_bytes
        # The whole zip, as its central directory declares it, before anything is extracted.
        declared = sum(info.file_size for info in self.zip.infolist())
        cap = int(getattr(settings, "STATELAB_MAX_ZIP_BYTES", 16 * 1024**3))
        if declared > cap:
            self.zip.close()
            raise SourceError(
                f"the zip holds {declared} bytes uncompressed, more than the limit of {cap} bytes "
                "(STATELAB_MAX_ZIP_BYTES); nothing was extracted"
            )
        self._init_items()
        if "release.json" in names:
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                release = json.loads(self.zip.read("release.json").decode("utf-8"))
                if isinstance(release, dict):
                    self.header = release

    def _open_items(self) -> BinaryIO:
        return io.BufferedReader(self.zip.open(self.jsonl_name), READ_CHUNK)

    def _items_bytes(self) -> int:
        return self.zip.getinfo(self.jsonl_name).file_size

    def _member(self, relpath: str) -> zipfile.ZipInfo | str:
        reason = check_media_path(relpath)
        if reason:
            return reason
        try:
            info = self.zip.getinfo(relpath.replace("\\", "/"))
        except KeyError:
            return "file not found in the zip"
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            return "symlinks inside the zip are refused"
        if info.is_dir():
            return "not a regular file"
        if info.file_size > self.max_bytes:
            return f"file is larger than {self.max_bytes} bytes"
        return info

    def media_reason(self, relpath: str) -> str | None:
        found = self._member(relpath)
        return found if isinstance(found, str) else None

    @contextlib.contextmanager
    def local_path(self, relpath: str) -> Iterator[Path]:
        info = self._member(relpath)
        assert not isinstance(info, str), info
        suffix = Path(relpath).suffix[:10]
        fd, tmp = tempfile.mkstemp(suffix=suffix, prefix="statelab-import-")
        try:
            with os.fdopen(fd, "wb") as out, self.zip.open(info) as src:
                # Copy at most the declared size + 1 byte: a member lying about its size is cut off
                # and then fails validation instead of filling the disk.
                remaining = info.file_size + 1
                while remaining > 0 and (chunk := src.read(min(READ_CHUNK, remaining))):
                    out.write(chunk)
                    remaining -= len(chunk)
            yield Path(tmp)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def open_media(self, relpath: str) -> BinaryIO:
        return self.zip.open(relpath.replace("\\", "/"))

    def close(self) -> None:
        self.zip.close()


def open_source(path: Path, *, media_root: Path | None = None, max_bytes: int) -> DirectorySource | ZipSource:
    """A zip (by content, whatever its name) or a JSONL / JSON file with its media folder."""
    path = Path(path)
    if not path.is_file():
        raise SourceError(f"{path.name}: no such file")
    if zipfile.is_zipfile(path):
        return ZipSource(path, max_bytes=max_bytes)
    return DirectorySource(path, media_root, max_bytes=max_bytes)


def copy_upload(uploaded, dest_dir: Path, *, suffix: str) -> Path:
    """Write an uploaded file (Django UploadedFile) to a temporary file in chunks."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=suffix, prefix="upload-", dir=dest_dir)
    with os.fdopen(fd, "wb") as out:
        for chunk in uploaded.chunks():
            out.write(chunk)
    return Path(tmp)


__all__ = ["DirectorySource", "ReadMeter", "ZipSource", "SourceError", "open_source", "copy_upload"]
