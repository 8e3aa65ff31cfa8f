"""A release written back in its paper's authors' format (the round trip of an authors' release).

The project's protocol lists its authors' formats (protocols/kit/releases.py); those of kind
``"items"`` with ``writes`` turn a release's frozen lines (annotation/releases.py `release_lines`:
the export lines, ``extra`` provenance included) into the authors' files, copying media through
`release_media_opener`, so the files and media are exactly what the release froze, never the live
items. A lab can then publish a corrected or extended release that the authors' own evaluation
code reads unchanged.

- `authors_export(release, name, out_dir)` writes a folder, all or nothing: into a scratch folder
  beside it, renamed into place once the writer is done (`export_release --format NAME -o DIR`);
- `authors_zip_parts(release, name)` streams a zip of that folder, and `authors_download_response`
  serves it as a download.

Nothing here names a protocol: the formats come from the registry.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

from django.http import StreamingHttpResponse

from protocols import registry
from protocols.kit.releases import FormatRefused, ReleaseFormat

from ..models import Annotation, Release
from ..project_setup import project_setting
from ..releases import release_export_record, release_lines, release_media_opener
from .stream_zip import StreamSink

FLUSH_BYTES = 256 * 1024
# What a writer may raise on lines it cannot write in its format: the export is refused with it.
_WRITER_FAULTS = (FormatRefused, ValueError, KeyError, TypeError, IndexError, FileNotFoundError)


class AuthorsExportError(Exception):
    """The release cannot be written in that format (unknown, read only, or its lines do not fit)."""


def authors_export_formats(protocol: str) -> tuple[ReleaseFormat, ...]:
    """The protocol's authors' formats a release exports to (items formats that write)."""
    return tuple(f for f in registry.get(protocol).formats if f.kind == "items" and f.writes)


def authors_export_format(protocol: str, name: str) -> ReleaseFormat:
    """One of `authors_export_formats` by name; AuthorsExportError naming those there are."""
    for fmt in authors_export_formats(protocol):
        if fmt.name == name:
            return fmt
    known = ", ".join(f.name for f in authors_export_formats(protocol)) or "none"
    raise AuthorsExportError(
        f"protocol {protocol} exports no authors' format {name!r} (the authors' formats it writes: {known})"
    )


def authors_export(release: Release, name: str, out_dir: Path) -> dict:
    """Write `release` in the authors' format `name` into the folder `out_dir` (new, or empty);
    returns {"format", "items", "files"}. Nothing is left at `out_dir` when the writer fails."""
    fmt = authors_export_format(release.project.protocol, name)
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise AuthorsExportError(f"{out_dir} exists and is not an empty folder; name a new one")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=out_dir.parent))
    try:
        written = _write(release, fmt, scratch)
        if out_dir.exists():
            out_dir.rmdir()
        os.replace(scratch, out_dir)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return {"format": fmt.name, "items": release.item_count, "files": len(written)}


def release_votes(release: Release) -> dict[str, list[dict]]:
    """Item id -> the stored answers collected on the release's items now (what a writer with
    ``writes_votes`` writes as the human labels; the votes a board of the release reads), less
    those of raters excluded from the project's boards (the protocol's ``rater_screen_module``)."""
    project = release.project
    screen = registry.get(project.protocol).rater_screen
    excluded = (
        set(project_setting(project.settings, screen.EXCLUDED_SETTING, [], project=project.slug))
        if screen is not None
        else set()
    )
    rows = (
        Annotation.objects.filter(item__release_items__release=release)
        .order_by("item_id", "id")
        .values_list("item__external_id", "annotator_id", "external_rater", "result")
    )
    out: dict[str, list[dict]] = {}
    for external_id, annotator, external, result in rows:
        if (f"user:{annotator}" if annotator is not None else f"ext:{external}") not in excluded:
            out.setdefault(external_id, []).append(result or {})
    return out


def _write(release: Release, fmt: ReleaseFormat, folder: Path) -> list[Path]:
    lines = release_lines(release)
    extra = {"votes": release_votes(release)} if getattr(fmt, "writes_votes", False) else {}
    try:
        return list(fmt.write(lines, folder, open_media=release_media_opener(release), **extra))
    except _WRITER_FAULTS as exc:
        raise AuthorsExportError(
            f"release {release.version} cannot be written as {fmt.label or fmt.name}: {exc}"
        ) from exc
    finally:
        # A writer that stops early leaves the lines' server-side cursor open: closed here, in
        # the transaction that opened it.
        close = getattr(lines, "close", None)
        if close is not None:
            close()


def authors_zip_parts(release: Release, name: str) -> Iterator[bytes]:
    """The release in the authors' format `name`, as a zip streamed in chunks. The files are
    written to a scratch folder first (a writer writes files, not a stream), so a refusal comes
    before the first byte: call `next()` once, or use `authors_zip_stream`."""
    fmt = authors_export_format(release.project.protocol, name)
    with tempfile.TemporaryDirectory(prefix="statelab-authors-") as work:
        folder = Path(work) / "release"
        folder.mkdir()
        _write(release, fmt, folder)
        yield b""  # written: what follows is only zipping
        sink = StreamSink()
        with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                info = zipfile.ZipInfo(path.relative_to(folder).as_posix(), date_time=(2020, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                with open(path, "rb") as src, zf.open(info, "w", force_zip64=True) as dst:
                    while chunk := src.read(FLUSH_BYTES):
                        dst.write(chunk)
                        if sink.pending() >= FLUSH_BYTES:
                            yield sink.drain()
                yield sink.drain()
        yield sink.drain()


def authors_zip_stream(release: Release, name: str) -> Iterator[bytes]:
    """`authors_zip_parts` with the writing done now: AuthorsExportError is raised here, before
    a response starts; the returned iterator only zips."""
    parts = authors_zip_parts(release, name)
    next(parts)
    return (chunk for chunk in parts if chunk)


def authors_export_filename(release: Release, name: str) -> str:
    return f"{release.project.slug}-{release.version}.{name}.zip"


def authors_download_response(release: Release, name: str, *, actor=None) -> StreamingHttpResponse:
    """The release in the authors' format `name` as a zip attachment (the releases page and API);
    AuthorsExportError before any byte when it cannot be written. The download is audited."""
    chunks = authors_zip_stream(release, name)
    response = StreamingHttpResponse(chunks, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{authors_export_filename(release, name)}"'
    response["X-Release-Checksum"] = release.checksum
    release_export_record(release=release, fmt=name, actor=actor)
    return response
