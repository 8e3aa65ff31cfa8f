"""Releases: freeze a split's verified items into an immutable, checksummed version, and export it.

Freezing copies every verified item of one split, ordered by external id, into `ReleaseItem`
rows whose payload is the item's *export line*: the import format (docs/architecture.md,
"Interchange formats": ``id``, the protocol fields, ``split``, ``tags``) plus ``resolved`` — every
query's option order and correct answer from `annotation.protocols.resolve_queries` with the
project's option seed (a protocol with a ``vocabulary``, protocols/base.py, gets the one of the
whole release) — and whose ``media`` is the SHA-256 of the stored file at every relative path the
line names. The release also keeps the project's slug, name, description and settings as they
were (`Release.frozen_project`). Every export (JSON, JSONL, zip, Hugging Face, COCO, lmms-eval, the
authors' formats through `release_media_opener`) reads only those records
(annotation/interchange/frozen.py), never a live item or the live project, so the same release
always exports the same bytes, whatever is edited later. A release ships one file per path: two
items naming one path for different files are refused at the freeze.

Checksum (annotation/interchange/checksum.py): SHA-256 over the canonical serialization (JSON,
sorted keys, no spaces, UTF-8) of ``{"protocol", "split", "option_seed"}``, of each export line
in release order, then of ``{"media": {path: sha256}}`` (every file the release ships), each
followed by a newline; so it covers the media bytes too, and a zip export is checked against it
by hashing the files it holds (`zip_checksum`). It does not cover the version name or the
creation time, so an export imported into a new project (``--verified``, same option seed) and
frozen again gives the same checksum: the round trip is checkable by comparing two hex strings.
Releases frozen before media were recorded (``checksum_method`` "lines") cover the lines only.

Export formats (all streamed; nothing is built in memory):
- ``json``: one object ``{protocol, project, version, split, created_at, item_count, checksum,
  option_seed, items: [...]}``;
- ``jsonl``: a first line ``{"release": {header}}`` then one export line per item — the item
  importer skips that header line, so a JSONL export imports as is with ``--media-root``;
- ``zip``: ``release.json`` (the header), ``items.jsonl`` (the export lines) and every media
  file at the relative path its items name. Importing that zip needs nothing else.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Iterable, Iterator
from typing import Any, BinaryIO

from django.db.models import TextField
from django.db.models.functions import Cast
from django.http import StreamingHttpResponse

from protocols import registry

from .audit.record import audit_record
from .freezing import (  # noqa: F401  (the public names of releases, defined there)
    VERSION_RE,
    ReleaseRefused,
    export_line,
    export_line_maker,
    release_freeze,
)
from .interchange import coco, hf
from .interchange.checksum import (
    canonical,
    checksum_finish,
    checksum_start,
)
from .interchange.frozen import StoredMedia, frozen_media_map, frozen_rows
from .interchange.header import release_header
from .interchange.stream_zip import StreamSink, zip_entry
from .models import AuditAction, Project, Release, ReleaseItem

EXPORT_CHUNK = 2000
FLUSH_BYTES = 256 * 1024
EXPORT_FORMATS = ("json", "jsonl", "zip", "hf", "coco", "coco_zip")
BOX_ONLY_FORMATS = ("coco", "coco_zip")  # COCO object detection: box projects only


def export_formats(protocol: str) -> tuple[str, ...]:
    """The formats a release of this protocol exports to."""
    boxes = registry.get(protocol).workflow == "box"
    return tuple(f for f in EXPORT_FORMATS if boxes or f not in BOX_ONLY_FORMATS)


def release_lines(release: Release) -> Iterator[dict]:
    """The export lines in release order, fetched in chunks (a server-side cursor)."""
    rows = ReleaseItem.objects.filter(release=release).order_by("position").values_list("payload", flat=True)
    return rows.iterator(chunk_size=EXPORT_CHUNK)


def release_checksum(release: Release) -> str:
    """The checksum recomputed from the lines and media the release recorded (equal to
    ``release.checksum`` while nothing it recorded was changed)."""
    digest = checksum_start(protocol=release.project.protocol, split=release.split, option_seed=release.option_seed)
    for line in release_lines(release):
        digest.update(canonical(line) + b"\n")
    return checksum_finish(digest, frozen_media_map(release), method=release.checksum_method)


def release_line_texts(release: Release) -> Iterator[str]:
    """The export lines as JSON text straight from the database (no decode/re-encode in Python).

    PostgreSQL renders jsonb as one line of JSON, so each value is a ready JSONL line.
    """
    rows = (
        ReleaseItem.objects.filter(release=release)
        .order_by("position")
        .annotate(text=Cast("payload", TextField()))
        .values_list("text", flat=True)
    )
    return rows.iterator(chunk_size=EXPORT_CHUNK)


def release_media_map(release: Release) -> dict[str, str]:
    """Relative media path -> SHA-256 of every media file the release ships, as recorded at the
    freeze (one file per path)."""
    return frozen_media_map(release)


def release_media_opener(release: Release) -> Callable[[str], BinaryIO]:
    """``open_media(relative path)`` for the authors' format writers (protocols/kit/releases.py):
    opens the stored file a media path of the release's lines names, as the release recorded it
    at the freeze (the path's SHA-256, then the stored asset with that hash); the live items are
    never read. A path the release does not name raises FileNotFoundError."""
    wanted: dict[str, str] | None = None
    files = StoredMedia()

    def open_media(relpath: str) -> BinaryIO:
        nonlocal wanted
        if wanted is None:
            wanted = release_media_map(release)
        sha = wanted.get(relpath)
        if sha is None:
            raise FileNotFoundError(f"release {release.version} names no media file {relpath!r}")
        return files.open(sha)

    return open_media


def _buffered(parts: Iterable[bytes]) -> Iterator[bytes]:
    """Join small pieces into chunks of about FLUSH_BYTES for the response / file writes."""
    buf: list[bytes] = []
    size = 0
    for part in parts:
        buf.append(part)
        size += len(part)
        if size >= FLUSH_BYTES:
            yield b"".join(buf)
            buf, size = [], 0
    if buf:
        yield b"".join(buf)


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _json_parts(release: Release) -> Iterator[bytes]:
    head = _dumps(release_header(release))
    yield head[:-1] + b',"items":['
    first = True
    for text in release_line_texts(release):
        yield (b"\n" if first else b",\n") + text.encode("utf-8")
        first = False
    yield b"\n]}\n"


def _jsonl_parts(release: Release, *, header: bool = True) -> Iterator[bytes]:
    if header:
        yield _dumps({"release": release_header(release)}) + b"\n"
    for text in release_line_texts(release):
        yield text.encode("utf-8") + b"\n"


def _zip_parts(release: Release) -> Iterator[bytes]:
    """A zip written on the fly (data descriptors, no seeking): header, items, media files (as the
    release recorded them at the freeze)."""
    sink = StreamSink()
    wanted: dict[str, str] = {}  # relative path -> sha256 (one file per path)
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr(zip_entry("release.json"), json.dumps(release_header(release), indent=2))
        yield sink.drain()
        with zf.open(zip_entry("items.jsonl"), "w", force_zip64=True) as out:
            for _, line, media in frozen_rows(release):
                out.write(_dumps(line) + b"\n")
                for path, sha in media.items():
                    wanted.setdefault(path, sha)
                if sink.pending() >= FLUSH_BYTES:
                    yield sink.drain()
        yield sink.drain()
        files = StoredMedia()
        files.load(wanted.values())
        for path in sorted(wanted):
            with files.open(wanted[path]) as src, zf.open(zip_entry(path, stored=True), "w", force_zip64=True) as dst:
                while chunk := src.read(FLUSH_BYTES):
                    dst.write(chunk)
                    yield sink.drain()
    yield sink.drain()


def release_export(release: Release, fmt: str = "json") -> Iterator[bytes]:
    """The release as a stream of byte chunks in `fmt` (json | jsonl | zip | hf (a zipped dataset
    folder) | coco | coco_zip)."""
    if fmt in BOX_ONLY_FORMATS and registry.get(release.project.protocol).workflow != "box":
        protocol = release.project.protocol
        raise ReleaseRefused(f"{fmt} export is for box projects, not {protocol}")
    if fmt == "hf":
        return (chunk for chunk in hf.hf_zip_parts(release, flush_bytes=FLUSH_BYTES) if chunk)
    if fmt == "coco":
        return _buffered(coco.coco_parts(release))
    if fmt == "coco_zip":
        return (chunk for chunk in coco.coco_zip_parts(release, flush_bytes=FLUSH_BYTES) if chunk)
    if fmt == "json":
        return _buffered(_json_parts(release))
    if fmt == "jsonl":
        return _buffered(_jsonl_parts(release))
    if fmt == "zip":
        return (chunk for chunk in _zip_parts(release) if chunk)
    raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(EXPORT_FORMATS)}")


_EXTENSIONS = {"coco": "coco.json", "coco_zip": "coco.zip", "hf": "hf.zip"}


def export_filename(release: Release, fmt: str) -> str:
    return f"{release.project.slug}-{release.version}.{_EXTENSIONS.get(fmt, fmt)}"


EXPORT_CONTENT_TYPES = {
    "json": "application/json",
    "jsonl": "application/x-ndjson",
    "zip": "application/zip",
    "coco": "application/json",
    "coco_zip": "application/zip",
    "hf": "application/zip",
}


def release_list_data(*, project: Project) -> list[dict]:
    """The project's releases, newest first (releases page and API)."""
    return [
        {
            "version": r.version,
            "split": r.split,
            "item_count": r.item_count,
            "checksum": r.checksum,
            "created_at": r.created_at.isoformat(),
            "created_by": r.created_by.username if r.created_by else None,
        }
        for r in project.releases.select_related("created_by").order_by("-created_at")
    ]


def release_download_response(release: Release, fmt: str, *, actor=None) -> StreamingHttpResponse:
    """The release streamed as an attachment (page and API); the download is audited."""
    response = StreamingHttpResponse(release_export(release, fmt), content_type=EXPORT_CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{export_filename(release, fmt)}"'
    response["X-Release-Checksum"] = release.checksum
    release_export_record(release=release, fmt=fmt, actor=actor)
    return response


def release_export_record(*, release: Release, fmt: str, actor=None, **details) -> None:
    """Record in the audit trail that `release` was exported in `fmt` (a download, or the
    export_release command with `details` such as the Hub repository it was pushed to)."""
    audit_record(
        action=AuditAction.EXPORT, actor=actor, project=release.project, obj=release, details={"format": fmt, **details}
    )
