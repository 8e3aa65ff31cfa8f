"""The PostgreSQL write path of the item importer: the rows pass 1 accepted, encoded once in COPY
text format and streamed to ``COPY annotation_item FROM STDIN`` (items.py says when the live
writer thread runs and when a spool file is copied after pass 1), and the per-project import
lock that makes imports into one project take turns.
"""

from __future__ import annotations

import functools
import json
import queue
import tempfile
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from annotation.media.assets import MediaInfo
from annotation.models import Item, Project

from .common import ImportRefused
from .copy_stream import STREAM_CHUNK, CopyStream
from .formats import CheckedItem

SPOOL_CHUNK = 1024 * 1024
# Rows a spooled (not live) import keeps in memory before its spool goes to a temporary file.
SPOOL_MEMORY = 8 * 1024 * 1024
# First key of the PostgreSQL advisory lock that serializes imports into one project ("STLI");
# the second key is the project id.
IMPORT_LOCK_CLASS = 0x53544C49


def lock_project_for_import(cursor, project: Project) -> None:
    """Take the per-project import lock in the cursor's transaction (held until it ends).

    Two imports into one project would otherwise both find no existing ids and both write; the
    second then fails on the unique (project, external_id) index. With the lock the second waits
    until the first has committed (or rolled back), then compares against what is there: an
    identical file changes nothing. After IMPORT_LOCK_WAIT_S seconds of waiting it is refused
    with a clear message instead. PostgreSQL only; the caller skips it elsewhere.

    The lock is tried first (free: one statement); a busy one is waited for by PostgreSQL itself
    (`lock_timeout` set for that statement only, in a savepoint), so the next import starts the
    moment the one before commits, not after a sleep.
    """
    if try_lock_project_for_import(cursor, project):
        return
    wait_ms = max(1, int(float(getattr(settings, "IMPORT_LOCK_WAIT_S", 600)) * 1000))
    try:
        with transaction.atomic(using=cursor.db.alias):
            cursor.execute("SELECT current_setting('lock_timeout')")
            before = cursor.fetchone()[0]
            cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{wait_ms}ms"])
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [IMPORT_LOCK_CLASS, project.pk])
            # Back to what it was for the rest of the import's transaction.
            cursor.execute("SELECT set_config('lock_timeout', %s, true)", [before])
    except OperationalError as exc:
        if getattr(getattr(exc, "__cause__", None), "sqlstate", None) != "55P03":  # lock_not_available
            raise
        raise ImportRefused(
            [
                f"file: field -: another import into project {project.slug} is still running; "
                "nothing was written, try again once it has finished"
            ]
        ) from exc


def try_lock_project_for_import(cursor, project: Project) -> bool:
    """Take the per-project import lock if it is free now (one statement); False if it is held."""
    cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [IMPORT_LOCK_CLASS, project.pk])
    return bool(cursor.fetchone()[0])


def media_map(checked: CheckedItem, media: dict[str, MediaInfo]) -> dict[str, Any]:
    """payload field -> sha256 (a list of sha256 for list fields, e.g. an "images" field)."""
    out: dict[str, Any] = {}
    for field_name, relpath, _kind in checked.media_paths:
        sha = media[relpath].sha256
        if isinstance(checked.payload[field_name], list):
            out.setdefault(field_name, []).append(sha)
        else:
            out[field_name] = sha
    return out


# json.dumps's output with its default options, without the per-call set-up and the circular
# reference check (a decoded JSON line holds no cycles).
json_encode = json.JSONEncoder(check_circular=False).encode
# The same output from the C encoder made once (JSONEncoder.encode builds it anew on every call):
# for the dicts and lists of a row, never a bare string (its encode has its own fast path).
_C_ENCODE = (
    json.encoder.c_make_encoder(
        None, json.JSONEncoder().default, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True
    )
    if json.encoder.c_make_encoder is not None
    else None
)


def json_container(value: dict | list) -> str:
    """`json_encode` of a dict or a list (the payload, the tags of a row)."""
    if _C_ENCODE is None:
        return json_encode(value)
    return "".join(_C_ENCODE(value, 0))


def copy_text(value: str) -> str:
    """Escape a value for PostgreSQL's COPY text format (JSON text only ever needs the backslash)."""
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        value = value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return value


def copy_constant(value: Any) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, (int, float)):
        return str(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "obj"):  # psycopg Jsonb adapter of a JSONField default
        value = value.obj
    if isinstance(value, (dict, list)):
        return copy_text(json.dumps(value))
    return copy_text(str(value))


@functools.cache
def _copy_statement() -> tuple[list[str], str, str]:
    """The COPY statement's columns, its SQL, and the rendered defaults of the columns the
    importer does not set (annotation_count, any added later), after created_at and updated_at:
    worked out once per process, not per import."""
    others = [f for f in Item._meta.concrete_fields if not f.primary_key and f.name not in CopySpool.SET_BY_IMPORT]
    columns = [*CopySpool.COLUMNS, "created_at", "updated_at", *(f.column for f in others)]
    defaults = "".join("\t" + copy_constant(f.get_db_prep_save(f.get_default(), connection)) for f in others)
    cols = ", ".join(f'"{c}"' for c in columns)
    return columns, f'COPY "{Item._meta.db_table}" ({cols}) FROM STDIN', defaults


class CopySpool:
    """Rows accepted by pass 1, encoded once for COPY, sent in 1 MiB chunks either to a live
    writer thread (see `LiveCopy`) or to a temporary file copied after pass 1, or (`stream`) in
    smaller chunks to a COPY on this connection while pass 1 runs (copy_stream.py). The write never
    re-parses the JSONL nor adapts values row by row, and memory stays flat (a bounded queue, or
    the file on disk).
    """

    COLUMNS = ("project_id", "external_id", "payload", "media", "status", "split", "tags", "is_gold")
    SET_BY_IMPORT = (
        "project",
        "external_id",
        "payload",
        "media",
        "status",
        "split",
        "tags",
        "is_gold",
        "created_at",
        "updated_at",
    )

    def __init__(self, project: Project, *, live: bool = True):
        now = timezone.now()
        self.columns, self.sql, defaults = _copy_statement()
        self.suffix = "\t" + copy_constant(now) + "\t" + copy_constant(now) + defaults + "\n"
        self.prefix = f"{project.pk}\t"
        self._media_json: dict[tuple, str] = {}
        self._tags_json: dict[tuple, str] = {}
        self.rows = 0
        self._parts: list[str] = []  # rows of the chunk being built
        self._size = 0  # their length in characters
        self._chunk = SPOOL_CHUNK
        self.streamer: CopyStream | None = None  # set by stream()
        self.file = None  # the spool file (spool mode), made on the first chunk
        # Live mode (`live`, for large files: items.LIVE_COPY_MIN_BYTES): a writer thread with its
        # own connection runs the COPY while pass 1 is still validating, so PostgreSQL parses and
        # indexes rows on the other core. It needs every row it references (the project)
        # committed, so it is never used inside an atomic block. Otherwise the rows wait in memory
        # (on disk past SPOOL_MEMORY) and are copied on this connection after pass 1.
        self.live = live and not connection.in_atomic_block
        if self.live:
            self.writer = LiveCopy(self.sql, project)
            self.writer.start()
            self._streaming = True

    def stream(self) -> None:
        """From now on, send the rows to a COPY on this connection as they come (spool mode only;
        the caller holds the project's import lock, and `pause`s before any other statement)."""
        self.streamer = CopyStream(self.sql)
        self._chunk = STREAM_CHUNK

    def pause(self) -> None:
        """Stream mode: end the open COPY (if any) so that the connection can run a query."""
        if self.streamer is not None:
            self.streamer.pause()

    def end_stream(self, *, abort: bool) -> None:
        """Stream mode, end of pass 1: the last rows and the end of the COPY, or (`abort`: the
        import is refused) the COPY ended with an error and the transaction left to roll back."""
        if self.streamer is None:
            return
        if abort:
            self._parts, self._size = [], 0
            self.streamer.abort()
        else:
            self._emit()
            self.streamer.end()

    def lock_project(self, project: Project) -> None:
        """Hold the per-project import lock in the transaction that will write the rows."""
        if self.live:
            self.writer.locked.wait()
            if self.writer.error is not None:
                raise self.writer.error
        else:
            with connection.cursor() as cur:
                lock_project_for_import(cur, project)

    def add(self, checked: CheckedItem, media: dict[str, MediaInfo], status: str) -> None:
        self.add_row(self.row(checked, media, status))

    def add_row(self, row: str) -> None:
        """A row encoded by `row`."""
        self._parts.append(row)
        self._size += len(row)
        self.rows += 1
        if self._size >= self._chunk:
            self._emit()

    def row(self, checked: CheckedItem, media: dict[str, MediaInfo], status: str) -> str:
        """The item's row in COPY text format."""
        paths = checked.media_paths
        key = paths[0][1] if len(paths) == 1 else tuple([p for _f, p, _k in paths])
        media_json = self._media_json.get(key)
        if media_json is None:
            if len(self._media_json) > 50_000:
                self._media_json.clear()
            media_json = self._media_json[key] = copy_text(json_encode(media_map(checked, media)))
        # JSON text holds no raw tab or newline: only its backslashes need escaping for COPY.
        payload = "".join(_C_ENCODE(checked.payload, 0)) if _C_ENCODE is not None else json_encode(checked.payload)
        if "\\" in payload:
            payload = payload.replace("\\", "\\\\")
        tags = checked.tags
        if tags:  # the same few tag lists on many lines: encoded once per import
            tags_key = tuple(tags)
            tags_json = self._tags_json.get(tags_key)
            if tags_json is None:
                if len(self._tags_json) > 10_000:
                    self._tags_json.clear()
                tags_json = self._tags_json[tags_key] = copy_text(json_container(tags))
        else:
            tags_json = "[]"
        return (
            f"{self.prefix}{copy_text(checked.external_id)}\t{payload}\t{media_json}\t{status}\t"
            f"{copy_text(checked.split)}\t{tags_json}\t{'t' if checked.gold else 'f'}{self.suffix}"
        )

    def _emit(self) -> None:
        if self._parts:
            chunk = "".join(self._parts).encode("utf-8")
            self._parts = []
            self._size = 0
            if self.streamer is not None:
                self.streamer.write(chunk)
            elif self.live:
                self.writer.chunks.put(chunk)
            else:
                if self.file is None:
                    Path(settings.CACHE_ROOT).mkdir(parents=True, exist_ok=True)
                    self.file = tempfile.SpooledTemporaryFile(
                        max_size=SPOOL_MEMORY, dir=settings.CACHE_ROOT, prefix="import-spool-"
                    )
                self.file.write(chunk)

    def _end_stream(self) -> None:
        if self.live and self._streaming:
            self._emit()
            self.writer.chunks.put(None)
            self._streaming = False

    def copy_into_db(self) -> None:
        """Spool-file mode: stream the spooled rows to COPY on this connection (stream mode: the
        rows not sent yet, if any)."""
        self._emit()
        if self.streamer is not None:
            self.streamer.end()
            return
        if self.file is None:  # no row
            return
        self.file.flush()
        self.file.seek(0)
        with connection.cursor() as cur:
            with cur.cursor.copy(self.sql) as copy:
                while chunk := self.file.read(SPOOL_CHUNK):
                    copy.write(chunk)

    def commit(self, before_commit) -> None:
        """Live mode: end the COPY, run `before_commit` (media) in the writer's transaction, commit."""
        self._end_stream()
        self.writer.finish(before_commit)

    def close(self) -> None:
        if self.live:
            if self.writer.is_alive():  # not committed: roll the writer's transaction back
                self._end_stream()
                self.writer.finish(None)
        else:
            if self.streamer is not None and self.streamer.open:  # pass 1 or the write failed
                self.streamer.abort()
            if self.file is not None:
                self.file.close()


class _Aborted(Exception):
    pass


class LiveCopy(threading.Thread):
    """Runs ``COPY … FROM STDIN`` on the thread's own database connection, fed by a queue.

    Everything it writes stays in its transaction until `finish(before_commit)`: with a callable
    it runs it (storing the media in the same transaction) and commits; with None it rolls back.
    """

    def __init__(self, sql: str, project: Project):
        super().__init__(name="statelab-import-copy", daemon=True)
        self.sql = sql
        self.project = project
        self.chunks: queue.Queue = queue.Queue(maxsize=16)
        # Set once the per-project import lock is held (or taking it failed: `error` says why).
        self.locked = threading.Event()
        self._decided = threading.Event()
        self._before_commit = None
        self._stream_ended = False
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with transaction.atomic():
                with connection.cursor() as cur:
                    try:
                        lock_project_for_import(cur, self.project)
                    finally:
                        self.locked.set()
                    with cur.cursor.copy(self.sql) as copy:
                        while (chunk := self.chunks.get()) is not None:
                            copy.write(chunk)
                        self._stream_ended = True
                self._decided.wait()
                if self._before_commit is None:
                    raise _Aborted
                self._before_commit()
        except _Aborted:
            pass
        except BaseException as exc:  # reported to the importing thread by lock_project() or finish()
            self.error = exc
            self.locked.set()
            while not self._stream_ended and self.chunks.get() is not None:
                pass  # keep the producer from blocking on a full queue
            self._stream_ended = True
        finally:
            connection.close()

    def finish(self, before_commit) -> None:
        self._before_commit = before_commit
        self._decided.set()
        self.join()
        if self.error is not None and before_commit is not None:
            raise self.error
