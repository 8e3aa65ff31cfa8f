"""Where an import reads from: an items file (JSONL, a JSON document ``{"items": [...]}`` or a JSON
array of items) with a media folder, or a zip holding both.

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

The items file is recognised by its content, whatever its name (annotation/importing/documents.py):
JSONL, one item per line, whose first line may be a release export's header ``{"release": {...}}``;
a JSON document ``{header fields..., "items": [item, ...]}`` (the default release export, however
formatted); or a top-level JSON array of items. A file in another shape (a CSV table, an object
without "items", a PDF) is refused with one message naming it (SourceError with ``shape``).

Zip layout: the items are ``items.jsonl`` at the top (or the only ``*.jsonl`` there, or else the
only ``*.json`` there besides ``release.json``); media paths in the items are relative to the
zip's root; an optional ``release.json`` (written by a release export) carries the release header.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from protocols.fields import check_media_path

from .common import InvalidJSON
from .documents import ARRAY, DOCUMENT, document_items, inspect_items, iter_lines
from .shapes import WrongShape

READ_CHUNK = 1024 * 1024


class SourceError(Exception):
    """The input file as a whole cannot be read (no JSONL in the zip, not a zip, …); `shape`: the
    message names the shape found (the caller adds the shapes expected)."""

    def __init__(self, message: str, *, shape: bool = False):
        super().__init__(message)
        self.shape = shape


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
    # Whether `local_path` gives the media file where it stays (a folder), not a temporary copy.
    stable_media = False

    def items_bytes(self) -> int:
        """The size of the items file (uncompressed, in a zip)."""
        return self._items_bytes()

    def _init_items(self) -> None:
        try:
            self.format, header = inspect_items(self._open_items)
        except WrongShape as exc:
            self.close()
            raise SourceError(f"found {exc}", shape=True) from exc
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
        if self.format in (DOCUMENT, ARRAY):
            yield from document_items(self._open_pass, array=self.format == ARRAY)
            return
        with self._open_pass() as fh:
            yield from iter_lines(fh, self._skip)


class DirectorySource(_ItemsFile):
    def __init__(self, jsonl: Path, media_root: Path | None, *, max_bytes: int):
        self.jsonl = Path(jsonl)
        if not self.jsonl.is_file():
            raise SourceError(f"{self.jsonl.name}: no such file")
        self.media_root = Path(media_root) if media_root else self.jsonl.parent
        if not self.media_root.is_dir():
            raise SourceError(f"media root {self.media_root} is not a folder")
        self._root_real = self.media_root.resolve()
        # Media of a folder stay where they are, unless the folder is scratch space (an extracted
        # upload under CACHE_ROOT, removed after its import).
        self.stable_media = not self._root_real.is_relative_to(Path(settings.CACHE_ROOT).resolve())
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
        documents = [n for n in names if n.lower().endswith(".json") and n != "release.json"]
        if "items.jsonl" in jsonl:
            self.jsonl_name = "items.jsonl"
        elif len(jsonl) == 1:
            self.jsonl_name = jsonl[0]
        elif not jsonl and len(documents) == 1:
            self.jsonl_name = documents[0]
        else:
            self.zip.close()
            raise SourceError(zip_without_items(self.zip.namelist()), shape=not jsonl)
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
        return zip_file_reason(info, self.max_bytes) or info

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
                # A member lying about its size is cut off and then fails validation.
                copy_declared(src, out, info.file_size)
            yield Path(tmp)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def open_media(self, relpath: str) -> BinaryIO:
        return self.zip.open(relpath.replace("\\", "/"))

    def close(self) -> None:
        self.zip.close()


def zip_file_reason(info: zipfile.ZipInfo, max_bytes: int) -> str | None:
    """Why a zip member is refused as a file (a symlink, a folder, over `max_bytes`), or None."""
    if stat.S_ISLNK(info.external_attr >> 16):
        return "symlinks inside the zip are refused"
    if info.is_dir():
        return "not a regular file"
    if info.file_size > max_bytes:
        return f"file is larger than {max_bytes} bytes"
    return None


def copy_declared(src: BinaryIO, out: BinaryIO, size: int) -> bool:
    """Copy at most a zip member's declared `size` + 1 bytes, never filling the disk with a member
    that lies about its size; True when it held more than it declared."""
    remaining = size + 1
    while remaining > 0 and (chunk := src.read(min(READ_CHUNK, remaining))):
        out.write(chunk)
        remaining -= len(chunk)
    return remaining <= 0


def zip_without_items(names: list[str]) -> str:
    """Why a zip holds no items file: an Excel workbook is named as such, a zip of other files by
    what its top level holds."""
    if "[Content_Types].xml" in names and any(n.startswith("xl/") for n in names):
        return "found an Excel workbook (.xlsx)"
    top = sorted({n.split("/", 1)[0] + ("/" if "/" in n else "") for n in names})
    shown = ", ".join(top[:8]) + (", ..." if len(top) > 8 else "")
    return (
        "the zip must hold items.jsonl (or exactly one .jsonl, or one .json of items) at its top level; "
        f"found {shown or 'nothing'}"
    )


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
