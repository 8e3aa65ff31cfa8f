"""Which format an item file is in, and the authors' formats turned into the project's own item lines.

An import names a format or lets the file say: the project's protocol's formats of kind
``"items"`` (protocols/kit/releases.py, ``Protocol.formats``) are asked first (``detect``), and a
file none of them claims is the project's own (JSONL, a JSON document or array, a zip:
annotation/importing/sources.py), named ``statelab``. A file in an authors' format is read
(``read`` -> Conversion), its lines are written to a JSONL in the import's working folder, and
that JSONL goes through the one item importer (annotation/importing/items.py) with the
conversion's media folder: the same checks, the same all-or-nothing write.

Folders: a path may be a folder (an authors' release laid out as folders, such as frames per
video); the folder and its top-level entries are offered to ``detect``. An upload is one file, so
such a release arrives as a zip: a zip that is not the project's own layout is extracted, with
the checks the zip source makes (no path leaving the folder, no symlinks, the size limits),
into the working folder, and its folder and entries are offered to ``detect`` the same way.
"""

from __future__ import annotations

import contextlib
import json
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from protocols import registry
from protocols.fields import check_media_path
from protocols.kit.releases import FormatRefused, ReleaseFormat

from .common import ImportRefused
from .sources import copy_declared, zip_file_reason

OWN_FORMAT = "statelab"
OWN_LABEL = "StateLab item lines (JSONL, a JSON document or array, or a zip with items.jsonl)"
# An extracted zip holds at most this many entries (each is a file written to disk).
MAX_EXTRACTED_MEMBERS = 200_000
# Entries a zip made on a Mac carries that are no part of the release.
_ZIP_NOISE = ("__MACOSX/", ".DS_Store")
# What a reader may raise on a file it cannot make sense of, besides FormatRefused: the file is
# refused with the reason (a server fault, OSError included, is not caught).
_READER_FAULTS = (ValueError, KeyError, TypeError, IndexError, AttributeError, UnicodeDecodeError, RecursionError)


@dataclass
class ItemsFile:
    """What the item importer reads: the project's own file, or the JSONL an authors' format was
    converted to, with the folder its media paths are relative to."""

    path: Path
    media_root: Path | None
    format: str = OWN_FORMAT
    label: str = OWN_LABEL
    notes: list[str] = field(default_factory=list)
    converted: bool = False


def item_formats(protocol: str) -> tuple[ReleaseFormat, ...]:
    """The protocol's authors' formats that give item lines."""
    return tuple(f for f in registry.get(protocol).formats if f.kind == "items")


def format_choices(protocol: str) -> list[tuple[str, str]]:
    """(name, label) of every format an item import of this protocol reads, the project's own first."""
    return [(OWN_FORMAT, OWN_LABEL)] + [(f.name, f.label or f.name) for f in item_formats(protocol)]


def format_refusal(protocol: str, name: str) -> str | None:
    """Why `name` is no item format of the protocol (listing those there are), or None."""
    known = [n for n, _ in format_choices(protocol)]
    if name in known:
        return None
    return f"unknown format {name!r} for protocol {protocol}; the formats there are: {', '.join(known)}"


def expected_shapes(protocol: str) -> str:
    """What an item file of this protocol may be, for a message that names a wrong shape."""
    own = 'JSONL of item objects, a JSON array of items, {"items": [...]}, or a zip with items.jsonl'
    authors = [f"{f.name} ({f.label})" if f.label else f.name for f in item_formats(protocol)]
    return own + (f", or one of the authors' formats: {'; '.join(authors)}" if authors else "")


@contextlib.contextmanager
def import_workdir() -> Iterator[Path]:
    """A scratch folder for one import (extracted zips, converted lines), removed afterwards.
    Under CACHE_ROOT: the disk that holds uploads holds their conversions too."""
    root = Path(settings.CACHE_ROOT) / "imports"
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="import-", dir=root) as work:
        yield Path(work)


@contextlib.contextmanager
def items_file(
    *, protocol: str, path: Path, media_root: Path | None, format_name: str | None, confined: bool
) -> Iterator[ItemsFile]:
    """The file the item importer reads for `path`: the project's own, or an authors' format
    converted (`format_name` forces one; None detects). ``confined`` (an upload): media come only
    from `media_root`, or, for a zip, from inside it, whatever folder a reader names."""
    path = Path(path)
    if not path.exists():
        raise ImportRefused([f"file: field -: {path.name}: no such file"])
    if format_name is not None and (reason := format_refusal(protocol, format_name)):
        raise ImportRefused([f"file: field format: {reason}"])
    if format_name == OWN_FORMAT:
        yield ItemsFile(path=path, media_root=media_root)
        return
    formats = item_formats(protocol)
    forced = registry.get(protocol).format_named(format_name, "items") if format_name else None
    if forced is None and (not formats or _plain_own_file(formats, path)):
        # The project's own lines in a plain file: no working folder to make and remove.
        yield ItemsFile(path=path, media_root=media_root)
        return
    with import_workdir() as work:
        found = _find(formats, forced, path, work)
        if found is None:
            if path.is_dir():
                raise ImportRefused(
                    [
                        f"file: field -: {path.name} is a folder in none of the formats of protocol {protocol}; "
                        f"expected {expected_shapes(protocol)}"
                    ]
                )
            yield ItemsFile(path=path, media_root=media_root)
            return
        fmt, target, unzipped = found
        if unzipped is not None and confined:
            # An uploaded zip carries its own media: read as its folder would be, media kept inside it.
            yield _convert(fmt, target, given_root=None, work=work, confine_to=unzipped)
        else:
            yield _convert(fmt, target, given_root=media_root, work=work, confine_to=media_root if confined else None)


def _plain_own_file(formats: tuple[ReleaseFormat, ...], path: Path) -> bool:
    """A file, not a zip, that none of the formats recognises: what `_find` reads as the
    project's own without needing its working folder."""
    return path.is_file() and not zipfile.is_zipfile(path) and _detect(formats, [path]) is None


def _find(
    formats: tuple[ReleaseFormat, ...], forced: ReleaseFormat | None, path: Path, work: Path
) -> tuple[ReleaseFormat, Path, Path | None] | None:
    """(format, what to read, the extracted folder of a zip or None), or None: the project's own."""
    if forced is None and not formats:
        return None
    if forced is None and (fmt := _detect(formats, [path])) is not None:
        return fmt, path, None
    unzipped = None
    if path.is_file() and zipfile.is_zipfile(path):
        if forced is not None and forced.detect(path):
            return forced, path, None
        if forced is None and _own_zip(path):
            return None
        unzipped = extract_zip(path, work / "unzipped")
        root = _single_folder(unzipped)
    elif path.is_dir():
        root = path
    elif forced is not None:
        return forced, path, None
    else:
        return None
    candidates = [root, *sorted(root.iterdir())]
    if forced is not None:
        target = next((c for c in candidates if _detects(forced, c)), root)
        return forced, target, unzipped
    for candidate in candidates:
        if (fmt := _detect(formats, [candidate])) is not None:
            return fmt, candidate, unzipped
    return None


def _detects(fmt: ReleaseFormat, candidate: Path) -> bool:
    # A detector only looks; one that trips over an odd file has not recognised it.
    try:
        return bool(fmt.detect(candidate))
    except (OSError, *_READER_FAULTS):
        return False


def _detect(formats: tuple[ReleaseFormat, ...], candidates: list[Path]) -> ReleaseFormat | None:
    for candidate in candidates:
        matches = [f for f in formats if _detects(f, candidate)]
        if len(matches) > 1:
            names = ", ".join(f.name for f in matches)
            raise ImportRefused(
                [f"file: field format: {candidate.name} looks like several formats ({names}); name one with --format"]
            )
        if matches:
            return matches[0]
    return None


def _own_zip(path: Path) -> bool:
    """The zip holds the project's own items at its top level (annotation/importing/sources.py)."""
    with zipfile.ZipFile(path) as zf:
        top = [n for n in zf.namelist() if "/" not in n.rstrip("/")]
    return any(n.lower().endswith(".jsonl") for n in top) or "release.json" in top


def _single_folder(root: Path) -> Path:
    """A zip made of one folder (zip -r release.zip release/) is read from inside that folder."""
    entries = list(root.iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else root


def _convert(
    fmt: ReleaseFormat, target: Path, *, given_root: Path | None, work: Path, confine_to: Path | None
) -> ItemsFile:
    label = fmt.label or fmt.name
    spool = work / "converted-items.jsonl"
    rows = 0
    try:
        conversion = fmt.read(target, media_root=given_root)
        with open(spool, "w", encoding="utf-8") as out:
            for line in conversion.lines:
                rows += 1
                if not isinstance(line, dict):
                    raise ImportRefused([f"row {rows}: field -: the {fmt.name} reader gave no item object"])
                try:
                    out.write(json.dumps(line, ensure_ascii=False, allow_nan=False) + "\n")
                except (TypeError, ValueError) as exc:
                    raise ImportRefused([f"row {rows}: field -: not an item line JSON can hold ({exc})"]) from exc
    except FormatRefused as exc:
        raise ImportRefused([f"file: field -: {exc} (read as {label})"]) from exc
    except _READER_FAULTS as exc:
        where = f"row {rows + 1}" if rows else "file"
        raise ImportRefused(
            [f"{where}: field -: {target.name} could not be read as {label} ({type(exc).__name__}: {exc})"]
        ) from exc
    return ItemsFile(
        path=spool,
        media_root=_media_root(conversion.media_root, given_root, target, confine_to=confine_to),
        format=fmt.name,
        label=label,
        notes=[str(n) for n in conversion.notes],
        converted=True,
    )


def _media_root(said: Path | None, given: Path | None, target: Path, *, confine_to: Path | None) -> Path:
    """The folder the converted lines' media paths are relative to: the reader's, else the given
    one, else the read file's folder; with `confine_to` (an upload), never a folder outside it."""
    default = Path(given) if given is not None else (target if target.is_dir() else target.parent)
    chosen = Path(said) if said is not None else default
    if confine_to is None:
        return chosen
    inside = Path(confine_to).resolve()
    for candidate in (chosen, default):
        if candidate.resolve().is_relative_to(inside):
            return candidate
    return Path(confine_to)


def extract_zip(path: Path, dest: Path) -> Path:
    """Extract an uploaded zip into `dest`, refusing it whole (ImportRefused) when a member's path
    leaves the folder, is a symlink or appears twice, or when the sizes pass the limits
    (IMPORT_MAX_FILE_BYTES a member, STATELAB_MAX_ZIP_BYTES in all) — as the zip source does."""
    max_file = int(settings.IMPORT_MAX_FILE_BYTES)
    cap = int(getattr(settings, "STATELAB_MAX_ZIP_BYTES", 16 * 1024**3))
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ImportRefused([f"file: field -: {path.name}: not a readable zip ({exc})"]) from exc
    with archive:
        infos = [
            i for i in archive.infolist() if not i.filename.startswith(_ZIP_NOISE) and "/.DS_Store" not in i.filename
        ]
        declared = sum(i.file_size for i in infos)
        if declared > cap:
            raise ImportRefused(
                [
                    f"file: field -: the zip holds {declared} bytes uncompressed, more than the limit of {cap} bytes "
                    "(STATELAB_MAX_ZIP_BYTES); nothing was extracted"
                ]
            )
        if len(infos) > MAX_EXTRACTED_MEMBERS:
            raise ImportRefused(
                [f"file: field -: the zip holds {len(infos)} entries, more than {MAX_EXTRACTED_MEMBERS}"]
            )
        dest.mkdir(parents=True)
        root = dest.resolve()
        for info in infos:
            _extract_member(archive, info, root, max_file)
    return dest


def _noise(name: str) -> bool:
    return name.startswith(_ZIP_NOISE) or name.endswith("/.DS_Store")


def _extract_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, root: Path, max_file: int) -> None:
    name = info.filename
    refuse = lambda reason: ImportRefused([f"file: field -: zip entry {name!r}: {reason}"])  # noqa: E731
    if reason := check_media_path(name):
        raise refuse(reason)
    target = (root / name).resolve()
    if not target.is_relative_to(root):
        raise refuse("path leaves the zip's folder")
    if info.is_dir() and not stat.S_ISLNK(info.external_attr >> 16):
        target.mkdir(parents=True, exist_ok=True)
        return
    if reason := zip_file_reason(info, max_file):
        raise refuse(reason)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        out = open(target, "xb")
    except FileExistsError:
        raise refuse("appears twice in the zip") from None
    except (IsADirectoryError, NotADirectoryError):
        raise refuse("is both a file and a folder in the zip") from None
    try:
        with out, archive.open(info) as src:
            if copy_declared(src, out, info.file_size):
                raise refuse("holds more bytes than the zip declares")
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise refuse(f"cannot be read ({exc})") from exc


__all__ = [
    "OWN_FORMAT",
    "ItemsFile",
    "expected_shapes",
    "extract_zip",
    "format_choices",
    "format_refusal",
    "item_formats",
    "items_file",
]
