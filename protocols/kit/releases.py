"""The authors' own file formats: how a protocol reads its paper's release as published, and writes a
release back in that shape. Plain Python (no Django).

A protocol lists its formats in the module named by ``Protocol.formats_module`` (``FORMATS``, a
tuple of ``ReleaseFormat`` instances). Each format converts between the authors' files and the
project's own lines (docs/architecture.md, "Interchange formats"), so everything after the reader
is the importer every other file goes through: the same checks, the same all-or-nothing write,
the same report.

- ``kind`` says which lines a format gives: ``"items"`` (item lines, imported by
  annotation.importing.items_import), ``"annotations"`` (annotation lines, import_annotations) or
  ``"predictions"`` (prediction lines ``{"item", "query", "answer"}``, import_predictions).
- ``detect(path)`` is a cheap look (a name, a folder's layout, the first bytes) that says whether a
  file or folder is in this format; the importer asks every registered format of the project's
  protocol and kind, and ``--format NAME`` skips the look.
- ``read(path, media_root=...)`` gives a ``Conversion``: the lines in order, the folder their media
  paths are relative to, and what the reader mapped, one sentence each, for the import report.
  Whatever the authors' rows carry that the protocol has no field for is kept under the line's
  ``"extra"`` object (provenance: video ids, frame numbers, the source dataset), which is stored
  with the item and written back on export. A file in this format that cannot be read raises
  ``FormatRefused`` with one message naming what was found and what was expected.
- ``write(lines, out_dir, open_media=...)`` (item formats with ``writes = True``) writes a
  release's item lines (as a release export holds them, ``extra`` included) as the authors' files
  in ``out_dir``, copying media through ``open_media(relative path)``; it returns the paths written.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, ClassVar


class FormatRefused(ValueError):
    """The file is not what the format reads, or cannot be read as it: one message, naming the shape
    (or the row and field) found and the shape expected."""


@dataclass
class Conversion:
    """What a reader made of the authors' files."""

    lines: Iterable[dict[str, Any]]
    # The folder the lines' media paths are relative to (None: the lines carry no media, or the
    # importer's own --media-root / the file's folder applies).
    media_root: Path | None = None
    # One sentence per mapping or finding: "options split out of the question text in 497 rows",
    # "1 exact duplicate row (row 311 repeats row 12) imported once".
    notes: list[str] = field(default_factory=list)


class ReleaseFormat:
    """One file format of a paper's authors. Subclasses set the class attributes and implement
    ``detect`` and ``read`` (and ``write`` where ``writes``)."""

    name: ClassVar[str] = ""  # the --format value, e.g. "<paper>-bench"
    label: ClassVar[str] = ""  # human name: the file's name and the authors' repository
    kind: ClassVar[str] = "items"  # items | annotations | predictions
    writes: ClassVar[bool] = False  # a release exports back in this format

    def __repr__(self) -> str:
        return f"<ReleaseFormat {self.name}>"

    def detect(self, path: Path) -> bool:
        raise NotImplementedError

    def read(self, path: Path, *, media_root: Path | None = None) -> Conversion:
        raise NotImplementedError

    def write(
        self,
        lines: Iterable[Mapping[str, Any]],
        out_dir: Path,
        *,
        open_media: Callable[[str], BinaryIO] | None = None,
    ) -> list[Path]:
        raise NotImplementedError(f"{self.name} is read only")


def first_bytes(path: Path, n: int = 4096) -> bytes:
    """The first ``n`` bytes of a file (b"" for a folder or an unreadable path), for ``detect``."""
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except OSError:
        return b""


def read_json(path: Path, expected: str) -> Any:
    """A JSON file as its authors publish it (UTF-8, a byte-order mark allowed); FormatRefused
    naming the file, what was wrong with it and ``expected`` when it cannot be read or parsed."""
    name = Path(path).name
    try:
        return json.loads(Path(path).read_bytes().decode("utf-8-sig"))
    except OSError as exc:
        raise FormatRefused(f"{name}: cannot be read ({exc.strerror or exc}); expected {expected}") from exc
    except UnicodeDecodeError as exc:
        raise FormatRefused(f"{name}: not UTF-8 text (byte {exc.start}); expected {expected}") from exc
    except json.JSONDecodeError as exc:
        raise FormatRefused(
            f"{name}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); expected {expected}"
        ) from exc


def starts_with_array(path: Path) -> bool:
    """The file's first non-blank character opens a JSON array."""
    head = first_bytes(path).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head[:1] == b"["


def media_parts(rel: str) -> tuple[str, ...]:
    """The parts of a media path a release names; FormatRefused for one that would leave the
    folder it is written into (absolute, or with "..")."""
    parts = PurePosixPath(rel).parts
    if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
        raise FormatRefused(f"media path {rel!r} is not a relative path inside the release")
    return parts


def copy_media(open_media: Callable[[str], BinaryIO], rel: str, dest: Path) -> Path:
    """Copy one media file of a release (``rel``, as its lines name it) to ``dest``, for ``write``."""
    media_parts(rel)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open_media(rel) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out)
    return dest
