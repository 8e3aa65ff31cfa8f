"""Where an import reads from: a JSONL file with a media folder, or a zip holding both.

Both kinds give the same small interface to the importer:
- `lines()` streams ``(line number, text)`` from the JSONL, one line at a time, and can be
  called again for the second (write) pass — nothing is held in memory;
- `media_reason(path)` says why a relative media path is refused (escapes the media root,
  symlink out, missing, not a file, too large), or None;
- `local_path(path)` gives a local file to inspect (a zip member is extracted to a temporary
  file for the duration of the ``with``), `open_media(path)` a binary stream to store.

Zip layout: the items are ``items.jsonl`` at the top (or the only ``*.jsonl`` there); media
paths in the items are relative to the zip's root; an optional ``release.json`` (written by a
release export) carries the release header.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import BinaryIO, Iterator

from .formats import check_media_path

READ_CHUNK = 1024 * 1024


class SourceError(Exception):
    """The input file as a whole cannot be read (no JSONL in the zip, not a zip, …)."""


def _iter_lines(stream: BinaryIO) -> Iterator[tuple[int, str | None]]:
    """Yield (1-based line number, decoded text or None when not UTF-8); blank lines skipped."""
    for number, raw in enumerate(stream, start=1):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw.strip():
            continue
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError:
            yield number, None


class DirectorySource:
    def __init__(self, jsonl: Path, media_root: Path | None, *, max_bytes: int):
        self.jsonl = Path(jsonl)
        if not self.jsonl.is_file():
            raise SourceError(f"{self.jsonl.name}: no such file")
        self.media_root = Path(media_root) if media_root else self.jsonl.parent
        if not self.media_root.is_dir():
            raise SourceError(f"media root {self.media_root} is not a folder")
        self._root_real = self.media_root.resolve()
        self.max_bytes = max_bytes
        self.header: dict | None = None

    def lines(self) -> Iterator[tuple[int, str | None]]:
        with open(self.jsonl, "rb") as fh:
            yield from _iter_lines(fh)

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


class ZipSource:
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
        self.header = None
        if "release.json" in names:
            with contextlib.suppress(ValueError, UnicodeDecodeError):
                self.header = json.loads(self.zip.read("release.json").decode("utf-8"))

    def lines(self) -> Iterator[tuple[int, str | None]]:
        with self.zip.open(self.jsonl_name) as fh:
            yield from _iter_lines(io.BufferedReader(fh, READ_CHUNK))

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
    """A zip (by content, whatever its name) or a JSONL file with its media folder."""
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


__all__ = ["DirectorySource", "ZipSource", "SourceError", "open_source", "copy_upload"]
