"""Freezing a release (annotation/releases.py describes releases, their lines and checksum):
set-based, one ``COPY … TO STDOUT`` reads a split's verified items into a spool (decoded once, as
they arrive, the protocol's vocabulary taken meanwhile), ``COPY … FROM STDIN`` statements of about
freezing_copy.SEGMENT_ROWS rows each write the release items from a thread while their export lines
are made and hashed (the foreign keys checked segment by segment, not at commit); the media map the
checksum ends with is kept while writing when it is small (MEDIA_MAP_PATHS) and otherwise read back
by a statement over what was written, as are the media checks."""

from __future__ import annotations

import json
import marshal
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from psycopg import sql as pgsql

from protocols import registry

from .audit.record import audit_record
from .freezing_copy import SegmentedCopy
from .interchange.checksum import (
    LINES_AND_MEDIA,
    canonical,
    checksum_finish_sorted,
    checksum_start,
)
from .interchange.frozen import line_media, project_snapshot
from .models import AuditAction, Item, ItemStatus, MediaAsset, Project, Release, ReleaseItem
from .protocols import MEDIA_FIELDS, vocabulary

VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,49}$")
FLUSH_BYTES = 256 * 1024  # the COPY's rows are sent in chunks of about this many bytes


class ReleaseRefused(Exception):
    """A freeze that may not happen (version taken, nothing verified, bad name)."""


def export_line(
    *, protocol: str, external_id: str, payload: dict, split: str, tags: list, seed: int, vocabulary=None
) -> dict:
    return export_line_maker(protocol, split=split, seed=seed, vocabulary=vocabulary)(external_id, payload, tags)


def export_line_maker(protocol: str, *, split: str, seed: int, vocabulary=None) -> Callable[[str, dict, list], dict]:
    """`export_line` for many items of one release: ``make(external_id, payload, tags)``, the
    protocol looked up once."""
    resolve = registry.get(protocol).resolve_queries  # what annotation.protocols.resolve_queries calls

    def make(external_id: str, payload: dict, tags: list) -> dict:
        line = {"id": external_id, **payload, "split": split, "tags": list(tags)}
        line["resolved"] = resolve(external_id, payload, seed=seed, vocabulary=vocabulary)
        return line

    return make


@transaction.atomic
def release_freeze(*, project: Project, version: str, split: str = "test", user=None) -> Release:
    """Freeze the verified items of `split` into release `version` (unique per project).

    Set-based: one ``COPY … TO STDOUT`` reads the items (into a spool file, so memory stays flat),
    ``COPY … FROM STDIN`` statements of about freezing_copy.SEGMENT_ROWS rows each write the release
    items from a thread while the lines are made and hashed, and
    the media map the checksum ends with is kept meanwhile (at most MEDIA_MAP_PATHS paths; a
    larger one, the media checks and the stored-file check are statements over what was
    written). The lines, their order and the checksum are those of the item-by-item freeze this
    replaced (tests/annotation/test_freeze_set_based.py keeps it as the reference)."""
    if not VERSION_RE.match(version or ""):
        raise ReleaseRefused("version: use letters, digits, '.', '_' or '-' (e.g. v1), at most 50 characters")
    if Release.objects.filter(project=project, version=version).exists():
        raise ReleaseRefused(f"version: release {version} exists already; releases are immutable, pick a new version")
    if not Item.objects.filter(project=project, split=split, status=ItemStatus.VERIFIED).exists():
        raise ReleaseRefused(f"split: no verified items in split {split!r}")
    try:
        with transaction.atomic():
            release = Release.objects.create(
                project=project,
                version=version,
                split=split,
                created_by=user,
                option_seed=project.option_seed,
                checksum="",
                checksum_method=LINES_AND_MEDIA,
                frozen_project=project_snapshot(project),
            )
    except IntegrityError as exc:  # a concurrent freeze took the version
        raise ReleaseRefused(f"version: release {version} exists already") from exc
    with connection.cursor() as cursor, _ItemSpool(cursor.cursor, project=project, split=split) as spool:
        release_vocabulary = spool.vocabulary
        lines = _FrozenLines(release, project=project, vocabulary=release_vocabulary)
        # The writer thread's errors are psycopg's: raised as Django's (IntegrityError ...), as the
        # ORM raises them. While it writes, no statement of Django's may run (freezing_copy.py).
        with (
            connection.wrap_database_errors,
            SegmentedCopy(cursor.cursor, _SQL_WRITE_ITEMS, _RELEASE_ITEMS) as copy,
            connection.execute_wrapper(_no_statements_while_writing),
        ):
            for chunk in lines.copy_chunks(spool):
                copy.write(chunk, lines.position)
        if lines.shipped is not None:  # the media map was small enough to keep while writing
            checksum, conflict, unstored = _kept_media_checksum(cursor.cursor, lines)
        else:
            checksum, conflict, unstored = _media_checksum(cursor.cursor, release, lines.digest)
        if conflict or lines.conflict is not None:
            _refuse_media_conflict(spool, project=project, split=split, vocabulary=release_vocabulary)
        if unstored:
            _check_stored(cursor.cursor, release)
    release.checksum = checksum
    release.item_count = lines.position
    release.save(update_fields=["item_count", "checksum"])
    audit_record(
        action=AuditAction.FREEZE,
        actor=user,
        project=project,
        obj=release,
        details={"split": split, "items": release.item_count, "checksum": release.checksum},
    )
    return release


# The freeze's statements (the set-based path above). Identifiers are the models' own tables;
# values are bound by psycopg (COPY statements are merged client-side).
_ITEMS = Item._meta.db_table
_RELEASE_ITEMS = ReleaseItem._meta.db_table
_ASSETS = MediaAsset._meta.db_table
# The verified items of one split in release order (the order the item-by-item freeze read them in).
_SQL_READ_ITEMS = (
    f'COPY (SELECT id, external_id, payload, tags, media FROM "{_ITEMS}" '
    "WHERE project_id = {project} AND split = {split} AND status = {status} ORDER BY external_id) TO STDOUT"
)
_SQL_WRITE_ITEMS = f'COPY "{_RELEASE_ITEMS}" (release_id, item_id, position, payload, media) FROM STDIN'
# Every media path of the release with the smallest and largest SHA-256 recorded for it (one file
# per path when the two are equal everywhere) and whether a file with the smallest is stored
# ("t" / "f"), in code point order of the path (the order canonical JSON sorts keys in).
_SQL_MEDIA_PAIRS = (
    "COPY (SELECT g.path, g.low, g.high, "
    f'EXISTS (SELECT 1 FROM "{_ASSETS}" a WHERE a.sha256 = g.low) FROM ('
    "SELECT m.key AS path, min(m.value) AS low, max(m.value) AS high "
    f'FROM "{_RELEASE_ITEMS}" r CROSS JOIN LATERAL jsonb_each_text(r.media) m '
    'WHERE r.release_id = {release} GROUP BY m.key) g ORDER BY g.path COLLATE "C") TO STDOUT'
)
# The media hashes of the release with no stored file: how many, and the first in code point order
# (run only when the media map found one, to name them as the refusal always has).
_SQL_UNSTORED = (
    'SELECT count(*), min(s.sha COLLATE "C") FROM ('
    f'SELECT DISTINCT m.value AS sha FROM "{_RELEASE_ITEMS}" r CROSS JOIN LATERAL jsonb_each_text(r.media) m '
    "WHERE r.release_id = %s) s "
    f'WHERE NOT EXISTS (SELECT 1 FROM "{_ASSETS}" a WHERE a.sha256 = s.sha)'
)
SPOOL_MEMORY = 8 * 1024 * 1024  # a spool larger than this goes to a temporary file under CACHE_ROOT
# Decoded rows are spooled (marshal, the decoded values exactly) and read back this many at a time.
SPOOL_BATCH = 256
# The media map is kept in memory while the lines are written up to this many paths (a release
# sharing a few files, the usual case, needs no statement reading the media back); a release
# naming more paths is read back by _SQL_MEDIA_PAIRS instead, so memory stays bounded.
MEDIA_MAP_PATHS = 50_000
# Decoded tags and made media columns kept for the rows that repeat them (most items of a release
# share their tags and files); past this many distinct ones the memo starts again.
DECODED_KEPT = 1024
_SQL_STORED = f'SELECT count(DISTINCT sha256) FROM "{_ASSETS}" WHERE sha256 = ANY(%s)'
_COPY_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_COPY_CODES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_JSON_DECODE = json.JSONDecoder().decode  # what json.loads (and Django's JSONField) decode with
# The decoder's scanner alone: PostgreSQL writes a jsonb value with no whitespace around it, so
# the two whitespace matches `decode` adds are skipped (anything else is decoded in full).
_JSON_SCAN = json.JSONDecoder().scan_once
# The canonical serialization (annotation.interchange.checksum.canonical) by the C encoder made
# once, without the circular-reference check a tree decoded from JSON cannot need; the module's
# own function where the C encoder is missing.
_C_CANONICAL = (
    json.encoder.c_make_encoder(
        None, json.JSONEncoder().default, json.encoder.encode_basestring, None, ":", ",", True, False, True
    )
    if json.encoder.c_make_encoder is not None
    else None
)
_MEDIA_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _no_statements_while_writing(execute, sql, params, many, context):
    raise RuntimeError(
        "a statement while the release items are written: the connection belongs to the writer's COPY "
        "(annotation/freezing_copy.py); the line making must not query"
    )


def _copy_unescape(field: str) -> str:
    return _COPY_ESCAPE.sub(lambda m: _COPY_CODES.get(m.group(1), m.group(1)), field)


def _copy_rows(source: Iterable[bytes]) -> Iterator[list[str | None]]:
    """The rows of ``COPY … TO STDOUT`` (text format), one line each, as lists of fields (None for
    NULL)."""
    for raw in source:
        fields = raw.decode("utf-8").rstrip("\n").split("\t")
        if b"\\" in raw:  # an escape, or NULL
            fields = [None if f == "\\N" else _copy_unescape(f) for f in fields]
        yield fields


def _json(text: str | None) -> Any:
    if text is None:
        return None
    if text == "[]":
        return []
    try:
        value, end = _JSON_SCAN(text, 0)
    except StopIteration:
        end = -1
    return value if end == len(text) else _JSON_DECODE(text)


def _canonical(obj: Any) -> bytes:
    if _C_CANONICAL is None:
        return canonical(obj)
    return "".join(_C_CANONICAL(obj, 0)).encode("utf-8")


class _ItemSpool:
    """The items of the freeze as one ``COPY … TO STDOUT`` wrote them, decoded once as they arrive
    (while PostgreSQL reads and writes the next ones) and spooled as ``marshal`` batches of
    SPOOL_BATCH rows (memory below SPOOL_MEMORY, then a temporary file); read as often as needed,
    each time the same rows. The protocol's vocabulary is taken from the payloads as they pass
    (`vocabulary`), so it needs no pass of its own."""

    def __init__(self, cursor, *, project: Project, split: str):
        self.cursor, self.project, self.split = cursor, project, split
        self.vocabulary: Any = None

    def __enter__(self) -> _ItemSpool:
        Path(settings.CACHE_ROOT).mkdir(parents=True, exist_ok=True)
        self.file = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY, dir=settings.CACHE_ROOT, prefix="freeze-")
        statement = pgsql.SQL(_SQL_READ_ITEMS).format(
            project=self.project.pk, split=self.split, status=str(ItemStatus.VERIFIED)
        )
        try:
            with self.cursor.copy(statement) as copy:
                rows = self._spooled(copy)
                # Release-wide data the protocol's queries need (None for most: they never read it).
                self.vocabulary = vocabulary(self.project.protocol, (row[2] for row in rows))
                for _ in rows:  # the rows the vocabulary did not read are spooled all the same
                    pass
        except BaseException:
            self.file.close()
            raise
        return self

    def _spooled(self, copy) -> Iterator[tuple[int, str, Any, Any, str | None]]:
        """The rows of the COPY in progress, decoded; each batch is written to the spool before its
        rows are handed on, so the spool holds what PostgreSQL sent whatever the reader does.
        Tags are decoded once per distinct text (at most DECODED_KEPT kept): the value is shared by
        the rows with that text, so it is read, never changed (export_line_maker copies it)."""
        decoded: dict[str | None, Any] = {}
        batch: list[tuple[int, str, Any, Any, str | None]] = []
        for pk, external_id, payload, tags, media in _copy_rows(bytes(block) for block in copy):
            if tags in decoded:
                tag_list = decoded[tags]
            else:
                if len(decoded) >= DECODED_KEPT:
                    decoded.clear()
                tag_list = decoded[tags] = _json(tags)
            batch.append((int(pk), external_id, _json(payload), tag_list, media))
            if len(batch) >= SPOOL_BATCH:
                self._write(batch)
                yield from batch
                batch = []
        self._write(batch)
        yield from batch

    def _write(self, batch: list) -> None:
        if batch:
            data = marshal.dumps(batch)
            self.file.write(len(data).to_bytes(8, "little"))
            self.file.write(data)

    def __exit__(self, *exc) -> None:
        self.file.close()

    def rows(self) -> Iterator[tuple[int, str, Any, Any, Any]]:
        """(item pk, external id, payload, tags, media) in release order, decoded."""
        for pk, external_id, payload, tags, media in self.raw_media_rows():
            yield pk, external_id, payload, tags, _json(media)

    def raw_media_rows(self) -> Iterator[tuple[int, str, Any, Any, str | None]]:
        """`rows` with the media column as PostgreSQL wrote it (text, or None)."""
        self.file.seek(0)
        read = self.file.read
        while head := read(8):
            yield from marshal.loads(read(int.from_bytes(head, "little")))


class _FrozenLines:
    """Makes the export lines of the release from the spooled items, hashes them in release order
    and encodes the release item rows for COPY. A line naming one path for two different files is
    only noted here (`conflict`); the refusal is decided once the rows are written."""

    def __init__(self, release: Release, *, project: Project, vocabulary: Any):
        self.release, self.project, self.vocabulary = release, project, vocabulary
        self.digest = checksum_start(protocol=project.protocol, split=release.split, option_seed=release.option_seed)
        self.media_fields = MEDIA_FIELDS[project.protocol]
        self.position = 0
        self.conflict: int | None = None  # the first position whose line names a path twice, for two files
        # path -> the SHA-256 of its first line, while at most MEDIA_MAP_PATHS (then None), and
        # whether two lines name one path for two different files.
        self.shipped: dict[str, str] | None = {}
        self.shipped_conflict = False

    def copy_chunks(self, spool: _ItemSpool) -> Iterator[bytes]:
        prefix = f"{self.release.pk}\t".encode()
        make_line = export_line_maker(
            self.project.protocol, split=self.release.split, seed=self.release.option_seed, vocabulary=self.vocabulary
        )
        digest, media_fields = self.digest, self.media_fields
        # (the item's media text, the line's value at each media field) -> the line's media
        # column, already escaped for COPY, and whether the line names one path for two files.
        # The pairs of a kept entry were added to the map when it was made, so a line that finds
        # it adds nothing new (at most DECODED_KEPT entries: lines with files of their own do not
        # repeat).
        columns: dict[tuple, tuple[bytes, bool]] = {}
        chunk: list[bytes] = []
        size = 0
        for pk, external_id, payload, tags, media_text in spool.raw_media_rows():
            line = make_line(external_id, payload, tags)
            key = (media_text, *[line.get(name) for name in media_fields])
            try:
                column = columns.get(key)
            except TypeError:  # a list of paths: not a key, the column is made for this line alone
                column, key = None, None
            if column is None:
                column = self._media_column(line, _json(media_text))
                if key is not None:
                    if len(columns) >= DECODED_KEPT:
                        columns.clear()
                    columns[key] = column
            files, conflict = column
            if conflict and self.conflict is None:
                self.conflict = self.position
            text = _canonical(line)
            digest.update(text)
            digest.update(b"\n")
            # Canonical JSON holds no tab, newline or carriage return: only the backslash needs
            # COPY's escape (annotation/importing/copy_spool.copy_text).
            row = b"%d\t%d\t%s\t%s\n" % (pk, self.position, text.replace(b"\\", b"\\\\"), files)
            chunk.append(prefix + row)
            size += len(row)
            self.position += 1
            if size >= FLUSH_BYTES:
                yield b"".join(chunk)
                chunk, size = [], 0
        if chunk:
            yield b"".join(chunk)

    def _media_column(self, line: dict, item_media: Any) -> tuple[bytes, bool]:
        """The line's media map as the release item's media column (COPY text), whether it names
        one path for two files; its pairs join the media map kept for the checksum."""
        media: dict[str, str] = {}
        conflict = False
        for path, sha in line_media(line, item_media, self.media_fields):
            if media.setdefault(path, sha) != sha:
                conflict = True
        shipped = self.shipped
        if shipped is not None:
            for path, sha in media.items():
                if shipped.setdefault(path, sha) != sha:
                    self.shipped_conflict = True
            if len(shipped) > MEDIA_MAP_PATHS:
                self.shipped = None
        return _MEDIA_JSON(media).encode("utf-8").replace(b"\\", b"\\\\"), conflict


def _media_checksum(cursor, release: Release, digest) -> tuple[str, bool, bool]:
    """The checksum, ended with the release's media map as written (read back in path order);
    whether some path names two different files, and whether some file has no stored copy (either
    refuses the freeze: the checksum is then not kept)."""
    conflict = unstored = False

    def pairs() -> Iterator[tuple[str, str]]:
        nonlocal conflict, unstored
        with cursor.copy(pgsql.SQL(_SQL_MEDIA_PAIRS).format(release=release.pk)) as copy:
            for path, low, high, stored in _copy_rows(_lines(copy)):
                conflict = conflict or low != high
                unstored = unstored or stored != "t"
                yield path, low

    return checksum_finish_sorted(digest, pairs()), conflict, unstored


def _kept_media_checksum(cursor, lines: _FrozenLines) -> tuple[str, bool, bool]:
    """`_media_checksum` from the media map kept while the lines were written (the same pairs in
    the same code point order of the path), with one statement for whether every file is stored."""
    shipped = lines.shipped or {}
    shas = sorted(set(shipped.values()))
    unstored = False
    if shas:
        cursor.execute(_SQL_STORED, [shas])
        unstored = cursor.fetchone()[0] != len(shas)
    return checksum_finish_sorted(lines.digest, sorted(shipped.items())), lines.shipped_conflict, unstored


def _lines(copy) -> Iterator[bytes]:
    """The rows of a ``COPY … TO STDOUT`` in progress, one line each (rows end with a newline)."""
    rest = b""
    for block in copy:
        data = rest + bytes(block)
        *rows, rest = data.split(b"\n")
        for row in rows:
            yield row + b"\n"
    if rest:
        yield rest


def _refuse_media_conflict(spool: _ItemSpool, *, project: Project, split: str, vocabulary: Any) -> None:
    """Replay the lines in release order to name the first two items that name one path for two
    different files, as the refusal always has (only on this path does memory grow with the
    number of media paths)."""
    media_fields = MEDIA_FIELDS[project.protocol]
    shipped: dict[str, tuple[str, str]] = {}  # relative path -> (sha256, the first item naming it)
    for _, external_id, payload, tags, item_media in spool.rows():
        line = export_line(
            protocol=project.protocol,
            external_id=external_id,
            payload=payload,
            split=split,
            tags=tags,
            seed=project.option_seed,
            vocabulary=vocabulary,
        )
        for path, sha in line_media(line, item_media, media_fields):
            first = shipped.setdefault(path, (sha, external_id))
            if first[0] != sha:
                raise ReleaseRefused(
                    f"media: items {first[1]} and {external_id} name {path} for two different files; "
                    "a release ships one file per path"
                )
    raise RuntimeError("the release items name one path for two files, but the replayed lines do not")


def _check_stored(cursor, release: Release) -> None:
    """Refuse the freeze when an item names a media hash with no stored file (its export could not
    ship it)."""
    cursor.execute(_SQL_UNSTORED, [release.pk])
    missing, first = cursor.fetchone()
    if missing:
        raise ReleaseRefused(f"media: {missing} media file(s) have no stored copy (sha256 {first}, ...)")
