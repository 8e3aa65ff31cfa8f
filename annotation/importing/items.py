"""The item importer: validate everything, then write everything, in two streaming passes.

Pass 1 (validate) reads the JSONL line by line: every line is checked against its protocol's
format; every distinct media path is resolved, inspected and hashed once (a path used by many
items is checked once); ids are remembered as 8-byte hashes to find duplicates; ids already in
the project are compared, a chunk at a time, with what the line would store. If anything is
wrong the import is refused with every error and nothing has been written.

Pass 1 also encodes each accepted row in COPY text format. A large file (LIVE_COPY_MIN_BYTES of
item lines or more) outside a transaction (the command, the API's queued runs, the upload page)
streams those rows, while pass 1 is still validating, to ``COPY annotation_item FROM STDIN`` on a
second connection owned by a writer thread, so the server parses and indexes on the other core;
the writer's transaction stays open and is committed — together with the media rows — only once
pass 1 found no error, and rolled back otherwise. A smaller file, or any file inside a caller's
transaction (a request's batch of files, batch.py), writes on the caller's connection, in one
transaction that also holds the lock: no second connection, no thread, nothing a 1,000-line file
would notice. Media files stored for an import that then fails are deleted again, so a refused or
failed import leaves no trace. Lines identical to items already in the project are skipped.
Imports into one project take turns: the transaction that writes the rows first takes an advisory
lock keyed on the project (see `copy_spool.lock_project_for_import`), and only then are existing
ids looked at, so a second import of the same file waits and changes nothing (or, after
IMPORT_LOCK_WAIT_S, is refused).

A small file (under LIVE_COPY_MIN_BYTES) whose progress nobody follows (an import in a request)
is read and decoded whole first (line_scan.py). When every line is an object with its own id and
no other import of the project is under way (`stream_if_free`), the import takes the lock, reads what the
project holds under those ids (one query per 1,000 ids), and streams each accepted row to a COPY
on its connection while pass 1 checks the next lines (copy_stream.py): PostgreSQL parses and
indexes on the other core meanwhile. The first error stops the rows; a refused file's COPY is
abandoned and its transaction rolled back, so nothing of it stays. Otherwise (another import of
the project checks, waits its turn or writes; a file that will be refused; a queued run, whose progress counts
the bytes read as the lines are checked) pass 1 checks and encodes all its lines before it takes
the lock (they wait in memory), so two small imports into one project check their files at the
same time and take turns only for the comparison with the project's items and the write, which
copies the rows after pass 1.

Lines whose id the project holds with other content are refused, unless the import is asked to
``update``: then those items take the line's content, in the same transaction as the rest
(item_update.py says what happens to their status, annotations and releases; counted as
`updated`, with the fields that changed).

Re-importing with ``verified`` promotes items already in the project with identical content
from pending or annotated to verified (counted as `promoted`); discarded items stay discarded
(a reviewer's decision wins) and verified ones are left alone. Gold items (``"gold": true``,
complete lines only) are imported pending, whatever ``verified`` says: the annotation queue
offers only pending gold items, and their answers never make them done.

Memory holds one chunk of lines plus one entry per distinct media file, never the whole file
(plus 8 bytes per promoted item, and the new content of each item an update replaces).

The file may also be in one of the authors' formats of the project's protocol, detected or named
(``format_name``): it is converted to item lines first (annotation/importing/conversion.py), and
the report says which format was read and what the reader mapped. Fields the protocol does not
know are kept in the item's ``extra`` and named once in the report; ``strict`` refuses them.
"""

from __future__ import annotations

import contextlib
import re
from array import array
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction

from annotation.media.assets import MediaInfo, MediaRefused, inspect_media, known_media
from annotation.models import Item, ItemStatus, Project
from protocols import registry
from protocols.fields import NUL_REASON, UNSTORABLE_HINT, check_box_inside, nul_field, unstorable_value

from .common import ErrorLog, ImportRefused, KeySeen, parse_json_line, report_duplicates
from .conversion import expected_shapes, items_file
from .copy_spool import CopySpool, media_map
from .formats import EXTRA, CheckedItem, check_item, check_tables
from .item_report import KEPT_NAMES_MAX, KEPT_NAMES_SHOWN, ItemImportReport, project_for_import  # noqa: F401
from .item_update import PROMOTABLE as _PROMOTABLE
from .item_update import ItemUpdate, new_status, update_message
from .item_write import items_write
from .line_scan import EXISTING_CHUNK, UNPARSED, distinct_ids, existing_rows, mark_under_way, parsed_lines, stream_lock
from .media_cache import media_info_cached
from .sources import ReadMeter, SourceError, open_source

# Names of kept fields remembered per import (a file whose every line has new ones stops there).
_LINE_PREFIX = re.compile(r"^line (\d+):")
# Item lines from which an import outside a transaction streams its rows to a second connection
# while validating (LiveCopy); below, the rows are copied after pass 1 on the importing connection.
LIVE_COPY_MIN_BYTES = 4 * 1024 * 1024

_PENDING = ItemStatus.PENDING.value
_STATUS_TEXT = {
    (True, True): ItemStatus.VERIFIED.value,
    (True, False): ItemStatus.VERIFIED.value,
    (False, True): ItemStatus.ANNOTATED.value,
    (False, False): ItemStatus.PENDING.value,
}


class _Validation:
    """State of pass 1."""

    def __init__(
        self,
        project: Project,
        source,
        verified: bool,
        strict: bool = False,
        *,
        live: bool = False,
        defer: bool = False,
        update: bool = False,
    ):
        self.project = project
        self.source = source
        self.verified = verified
        self.strict = strict
        self.update = update
        self.updates: list[ItemUpdate] = []  # existing items whose content an update replaces
        self.kept: set[str] = set()
        self.errors = ErrorLog()
        self.media: dict[str, MediaInfo] = {}
        self.media_refused: dict[str, str] = {}
        self.ids = KeySeen()
        # (line, item, status, its COPY row when encoded before the lock was held)
        self.pending_existing: list[tuple[int, CheckedItem, str, str | None]] = []
        self.promote = array("q")  # ids of identical existing items a verified import promotes
        self.report = ItemImportReport()
        self.spool = CopySpool(project, live=live)  # accepted rows, encoded for COPY
        # `defer` (a small file, rows spooled): pass 1 checks and encodes every line before the
        # project's import lock is taken, so imports into one project take turns only for the
        # comparison with its items and the write; every line waits in `pending_existing` until then.
        self.locked = False
        self.check_existing = True
        self.check_existing_first = not defer
        self.defer = defer
        # Stream mode (run(): a small file whose ids are distinct, its project's lock free at once):
        # the project's items under the file's ids, read before pass 1; the rows go to PostgreSQL
        # while the lines are checked.
        self.existing: dict[str, tuple] | None = None
        if not defer:
            self.lock()

    def lock(self) -> None:
        """Take the project's import lock, then look whether the project holds items already."""
        try:  # before looking at existing ids: a concurrent import into the project finishes first
            self.spool.lock_project(self.project)
        except BaseException:
            self.spool.close()
            raise
        self.locked = True
        if not self.check_existing_first and len(self.pending_existing) <= EXISTING_CHUNK:
            # Every line waits for one comparison with the project's items: that one query finds
            # nothing in an empty project, so asking first whether it is empty would only add one.
            self.check_existing = True
        else:
            self.check_existing = Item.objects.filter(project=self.project).exists()

    def media_info(self, relpath: str, kind: str) -> MediaInfo | str:
        """Inspect a media path once per import; returns its info or the refusal reason."""
        if relpath in self.media_refused:
            return self.media_refused[relpath]
        info = self.media.get(relpath)
        if info is None:
            reason = self.source.media_reason(relpath)
            if reason is None:
                try:
                    with self.source.local_path(relpath) as local:
                        info = media_info_cached(
                            local,
                            kind,
                            relpath,
                            stable=self.source.stable_media,
                            compute=lambda: (
                                # a query: the connection must not be in a COPY (stream mode)
                                self.spool.pause()
                                or known_media(local, kind, name=relpath)
                                or inspect_media(local, kind, name=relpath)
                            ),
                        )
                except MediaRefused as exc:
                    reason = str(exc)
            if reason is not None:
                self.media_refused[relpath] = reason
                return reason
            self.media[relpath] = info
        if info.kind != kind:
            return f"is used as {kind} here but as {info.kind} elsewhere in the file"
        return info

    def accept(self, checked: CheckedItem, status: str, row: str | None = None) -> None:
        self.report.by_status[status] = self.report.by_status.get(status, 0) + 1
        if not self.errors.total:
            if row is None:
                self.spool.add(checked, self.media, status)
            else:
                self.spool.add_row(row)

    def stream_if_free(self, parsed: list) -> None:
        """Stream mode, when the file's ids are distinct and no other import of the project is under
        way (line_scan.stream_lock): take the import lock, read what the project holds under those
        ids, and let the rows go to a COPY as pass 1 accepts them. Otherwise (another import checks,
        waits or writes) nothing changes: the lines are checked first and the lock is waited for
        after, so the other import does not wait for this one's check."""
        ids = distinct_ids(parsed)
        if ids is None:  # refused later: checked first, and seen as under way meanwhile
            mark_under_way(self.project)
            return
        if not stream_lock(self.project):
            return
        self.locked = True
        existing: dict[str, tuple] = {}
        if len(ids) <= EXISTING_CHUNK or Item.objects.filter(project=self.project).exists():
            for start in range(0, len(ids), EXISTING_CHUNK):
                for row in existing_rows(self.project, ids[start : start + EXISTING_CHUNK]):
                    existing[row[1]] = row
                if len(existing) > EXISTING_CHUNK:
                    # A file naming many items the project holds (a re-import, an update): not
                    # streamed, so no more than two chunks of them are ever held at once. The lock
                    # is kept; pass 1 compares its lines 1,000 at a time, as a large file does.
                    return
        self.existing = existing
        self.spool.stream()

    def run(self) -> None:
        protocol = self.project.protocol
        verified = self.verified
        box_pixels = registry.get(protocol).box_pixels
        check, tables, strict = check_item, check_tables(protocol), self.strict
        kept = self.kept
        errors = self.errors
        media = self.media
        ids_add = self.ids.add
        report = self.report
        by_status = report.by_status
        spool_add = self.spool.add
        lines = parsed_lines(self.source.lines())
        # A small file whose reading nobody follows (a run's progress counts the bytes read as the
        # lines are checked): its lines are read at once, and may stream (stream_if_free).
        if self.defer and self.source.meter is None:
            lines = list(lines)
            self.stream_if_free(lines)
        elif self.defer:  # checked first in any case; seen as under way by imports that might stream
            mark_under_way(self.project)
        existing = self.existing
        streaming = existing is not None
        count = 0
        for line, text, obj in lines:
            if obj is UNPARSED:
                parse_json_line(line, text, errors)  # records why
                continue
            count += 1
            if "\\u0000" in text and (nul := nul_field(obj)) is not None:  # JSON spells a NUL only so
                errors.add(line, nul, NUL_REASON)
                continue
            if UNSTORABLE_HINT.search(text) and (bad := unstorable_value(obj)) is not None:  # jsonb refuses it
                errors.add(line, *bad)
                continue
            checked = check(protocol, obj, verified=verified, strict=strict, tables=tables)
            if type(checked) is list:
                for err in checked:
                    errors.add(line, err.field, err.reason)
                if isinstance(obj, dict) and isinstance(obj.get("id"), str):
                    ids_add(obj["id"])
                continue
            if not streaming:  # stream mode: the ids are known distinct
                ids_add(checked.external_id)
            media_ok = True
            for field_name, relpath, kind in checked.media_paths:
                info = media.get(relpath)
                if info is not None and info.kind == kind:
                    continue  # fast path: a file seen before in this import
                got = self.media_info(relpath, kind)
                if isinstance(got, str):
                    errors.add(line, field_name, f"{relpath}: {got}")
                    media_ok = False
            if not media_ok:
                continue
            payload = checked.payload
            if EXTRA in payload and len(kept) < KEPT_NAMES_MAX:
                kept.update(payload[EXTRA])
            if "bbox" in payload or "box_units" in payload:
                # A box in other units becomes pixels of its image (the protocol's box_pixels), then
                # must lie inside it.
                info = media[payload["image"]]
                reason = box_pixels(payload, info.width, info.height)
                if reason is None and isinstance(payload.get("bbox"), list):
                    reason = check_box_inside(payload["bbox"], info.width, info.height)
                if reason:
                    errors.add(line, "bbox", reason)
                    continue
            status = _STATUS_TEXT[verified, checked.complete] if not checked.gold else _PENDING
            if streaming:  # the lock is held and the project's items under the file's ids known
                if checked.external_id in existing:
                    self.pending_existing.append((line, checked, status, None))
                else:  # accept(), inlined: the row goes to the COPY
                    by_status[status] = by_status.get(status, 0) + 1
                    if not errors.total:
                        spool_add(checked, media, status)
            elif not self.locked:  # deferred: encoded now, compared and written once the lock is held
                self.pending_existing.append((line, checked, status, self.spool.row(checked, media, status)))
            elif self.check_existing:
                self.pending_existing.append((line, checked, status, None))
                if len(self.pending_existing) >= EXISTING_CHUNK:
                    self.compare_existing()
            else:  # accept(), inlined
                by_status[status] = by_status.get(status, 0) + 1
                if not errors.total:
                    spool_add(checked, media, status)
        report.lines = count
        # Stream mode: the COPY ends here, before any other statement; a refused file's is abandoned.
        self.spool.end_stream(abort=bool(errors))
        if not self.locked:
            self.lock()
        pending, self.pending_existing = self.pending_existing, []
        for start in range(0, len(pending), EXISTING_CHUNK):
            self.pending_existing = pending[start : start + EXISTING_CHUNK]
            self.compare_existing()
        colliding = self.ids.colliding() if not streaming else ()  # stream mode: ids known distinct
        if colliding:
            report_duplicates(self._id_lines(), colliding, self.errors, field_name="id", what="id")
        if self.report.lines == 0 and not self.errors:
            self.errors.add("file", "-", "holds no items")
        self.report.media_files = len(self.media)
        self.report.kept_fields = sorted(kept)

    def _id_lines(self):
        for line, text in self.source.lines():
            obj = parse_json_line(line, text, ErrorLog())
            if isinstance(obj, dict) and isinstance(obj.get("id"), str):
                yield line, obj["id"]

    def compare_existing(self) -> None:
        """Lines whose id exists already: identical content is skipped (or, in a verified import,
        promoted to verified when still pending or annotated), different content is refused, or,
        in an import that updates, replaces the item's (written with the rest, item_update.py)."""
        if not self.pending_existing:
            return
        if not self.check_existing:  # deferred lines of a project that held no items
            for _line, checked, status, row in self.pending_existing:
                self.accept(checked, status, row)
            self.pending_existing = []
            return
        by_id = {c.external_id: (line, c, status) for line, c, status, _row in self.pending_existing}
        if self.existing is not None:  # stream mode: read before pass 1
            rows = [self.existing[external_id] for external_id in by_id if external_id in self.existing]
        else:  # in the file's order, as stream mode reads them (the query's order is the plan's)
            rows = sorted(existing_rows(self.project, list(by_id)), key=lambda row: by_id[row[1]][0])
        existing: set[str] = set()
        for pk, external_id, payload, split, tags, media, is_gold, status, n_annotations in rows:
            existing.add(external_id)
            line, checked, line_status = by_id[external_id]
            new_media = media_map(checked, self.media)
            differ = [
                name
                for name, same in (
                    ("payload", payload == checked.payload),
                    ("split", split == checked.split),
                    ("tags", tags == checked.tags),
                    ("media", media == new_media),
                    ("gold", is_gold == checked.gold),
                )
                if not same
            ]
            if differ and self.update:
                after = new_status(line_status=line_status, old_status=status, annotation_count=n_annotations)
                self.updates.append(ItemUpdate(pk, external_id, checked, new_media, after, differ, line_status))
                self.report.updated += 1
            elif differ:
                self.errors.add(line, "id", update_message(external_id, differ))
            elif self.verified and not is_gold and status in _PROMOTABLE:
                self.promote.append(pk)
                self.report.promoted += 1
            else:
                self.report.unchanged += 1
        for _line, checked, status, row in self.pending_existing:
            if checked.external_id not in existing:
                self.accept(checked, status, row)
        self.pending_existing = []


def items_import(
    *,
    project: Project,
    path: Path,
    media_root: Path | None = None,
    verified: bool = False,
    actor=None,
    run_id: int | None = None,
    progress: ReadMeter | None = None,
    format_name: str | None = None,
    strict: bool = False,
    confined: bool = False,
    stored: list[str] | None = None,
    update: bool = False,
    savepoint: bool = True,
) -> ItemImportReport:
    """Import a JSONL, JSON or zip of item lines (+ media folder), or a file or folder in one of the
    protocol's authors' formats (detected, or `format_name`), into `project`, all or nothing;
    audited as `actor`'s import (of import run `run_id` when the import page or API made one).
    `progress` counts the reads of the items file once it is this import's turn. `strict`
    refuses fields the protocol does not know (otherwise kept in the item's extra). `confined`
    (an upload): media come only from `media_root` or from inside the uploaded zip. `stored`:
    receives the names of the media files written (a caller's transaction that may still roll back
    deletes them then). `update`: lines whose id the project holds with other content replace
    that content (item_update.py) instead of being refused. `savepoint=False`: a caller inside
    a transaction that it rolls back whole when this raises (batch.py) spares the import its own
    savepoint (two statements).

    Raises ImportRefused with "line N: field F: reason" messages ("row N" for the Nth item an
    authors' file was converted to) when any line is invalid; nothing is written then.
    Re-importing an identical file creates nothing.
    """
    with items_file(
        protocol=project.protocol, path=path, media_root=media_root, format_name=format_name, confined=confined
    ) as read:
        try:
            report = _import_file(
                project,
                read.path,
                media_root=read.media_root,
                verified=verified,
                strict=strict,
                progress=progress,
                audit={"actor": actor, "file": Path(path).name, "run": run_id, "format": read.format},
                stored=stored,
                update=update,
                savepoint=savepoint,
            )
        except ImportRefused as exc:
            if read.converted:  # its line N is the Nth converted row, not a line of the authors' file
                exc.read_as = read.label
                exc.errors = [_LINE_PREFIX.sub(r"row \1:", message) for message in exc.errors]
            raise
    report.format, report.format_label, report.notes = read.format, read.label, read.notes
    return report


def _import_file(
    project: Project,
    path: Path,
    *,
    media_root: Path | None,
    verified: bool,
    strict: bool,
    progress: ReadMeter | None,
    audit: dict,
    stored: list[str] | None = None,
    update: bool = False,
    savepoint: bool = True,
) -> ItemImportReport:
    try:
        source = open_source(path, media_root=media_root, max_bytes=settings.IMPORT_MAX_FILE_BYTES)
    except SourceError as exc:
        reason = f"{exc}; expected {expected_shapes(project.protocol)}" if exc.shape else str(exc)
        raise ImportRefused([f"file: field -: {reason}"]) from exc
    header_protocol = source.header.get("protocol") if isinstance(source.header, dict) else None
    if isinstance(header_protocol, str) and header_protocol != project.protocol:
        source.close()
        raise ImportRefused(
            [
                f"file: field protocol: the file is a release export of protocol {header_protocol}, "
                f"project {project.slug} uses {project.protocol}"
            ]
        )
    try:
        # A large file outside a transaction streams its rows to a writer thread while pass 1 runs;
        # anything else is one transaction on this connection (the caller's, or opened here).
        live = not connection.in_atomic_block and source.items_bytes() >= LIVE_COPY_MIN_BYTES
        # Inside a caller's transaction that is rolled back whole on any failure, no savepoint.
        nested = connection.in_atomic_block and not savepoint
        with contextlib.nullcontext() if live or nested else transaction.atomic():
            small = source.items_bytes() < LIVE_COPY_MIN_BYTES
            validation = _Validation(
                project, source, verified, strict, live=live, defer=not live and small, update=update
            )
            try:
                if progress is not None:  # pass 1 is the one read of the file
                    source.follow(progress, passes=1)
                validation.run()
                validation.report.header = source.header
                if validation.errors:
                    raise validation.errors.refuse()
                return items_write(project, source, validation, audit, stored=stored)
            finally:
                validation.spool.close()
    finally:
        source.close()
