"""Writing a release's items while their lines are made (annotation/freezing.py): the COPY rows
go to a thread of their own, which sends them as ``COPY … FROM STDIN`` statements of about
SEGMENT_ROWS rows each, with the table's deferred foreign keys checked at the end of each
statement rather than all at commit. PostgreSQL then checks one segment's keys while Python makes
the next segment's lines, where it would otherwise check every row's keys at commit with Python
waiting. The rows, their order and what is stored are the same; memory stays at about QUEUED + 2
pieces of about PUT_BYTES (the queue, the piece being sent, the piece being gathered).

While the block runs, the connection belongs to the thread's COPY: the rows' maker must not query
(annotation/freezing.py refuses any statement of Django's meanwhile; one would wait for the
connection's lock while the thread waits for rows)."""

from __future__ import annotations

import queue
import threading
from typing import Any

from psycopg import sql as pgsql

SEGMENT_ROWS = 2_000  # about this many rows per COPY statement (a segment ends at a chunk's end)
# Rows are handed to the thread in pieces of about PUT_BYTES (few hand-overs of the interpreter
# lock), at most QUEUED pieces made and not yet sent.
PUT_BYTES = 1024 * 1024
QUEUED = 4
_DONE = object()
# The table's foreign keys that are checked at commit unless set otherwise (Django declares every
# foreign key DEFERRABLE INITIALLY DEFERRED).
_SQL_DEFERRED_KEYS = (
    "SELECT conname FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'f' "
    "AND condeferrable AND condeferred ORDER BY conname"
)


class _Aborted(Exception):
    """The maker of the rows failed: the COPY in progress is abandoned (the transaction with it)."""


class SegmentedCopy:
    """``with SegmentedCopy(cursor, statement, table) as copy: copy.write(rows, rows_so_far)``: the
    rows written in order by COPY statements from a thread, each segment's foreign keys checked
    when it ends. An error of the thread is raised by the next hand-over of rows (a ``write`` that
    ends a segment or gathers PUT_BYTES) or at the end; an error of
    the maker abandons the COPY in progress. The cursor is not to be used until the block ends."""

    def __init__(self, cursor, statement: Any, table: str):
        self.cursor, self.statement, self.table = cursor, statement, table
        self.error: BaseException | None = None
        self.aborted = False
        self.segment_end = SEGMENT_ROWS
        self.pending: list[bytes] = []
        self.pending_size = 0

    def __enter__(self) -> SegmentedCopy:
        self.cursor.execute(_SQL_DEFERRED_KEYS, [self.table])
        self.keys = [pgsql.Identifier(name) for (name,) in self.cursor.fetchall()]
        self._constraints("IMMEDIATE")
        self.queue: queue.Queue = queue.Queue(QUEUED)
        self.thread = threading.Thread(target=self._run, name="freeze-copy", daemon=True)
        self.thread.start()
        return self

    def write(self, data: bytes, rows: int) -> None:
        """Send `data` (whole COPY rows); `rows`: the rows made so far, this chunk's included."""
        self.pending.append(data)
        self.pending_size += len(data)
        end = rows >= self.segment_end
        if end:
            self.segment_end = rows + SEGMENT_ROWS
        if end or self.pending_size >= PUT_BYTES:
            self._flush(end)

    def _flush(self, end: bool) -> None:
        if self.pending:
            self._put((self.pending, end))
            self.pending, self.pending_size = [], 0

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is not None:
            self._abort()
            if self.error is not None and exc is not self.error:
                exc.add_note(f"the release item writer had failed too: {self.error!r}")
            return
        try:
            self._flush(False)
            self._put(_DONE)
        except BaseException:  # the writer's error, or an interrupt: the thread must not wait for rows
            self._abort()
            raise
        self.thread.join()
        if self.error is not None:
            raise self.error
        # As declared, for the rest of the transaction (a rolled-back savepoint restores it itself).
        self._constraints("DEFERRED")

    def _abort(self) -> None:
        """End the thread without the rest of the rows: the COPY in progress is abandoned."""
        self.aborted = True
        try:
            self.queue.put_nowait(_DONE)  # wakes a thread waiting for rows; it sees `aborted`
        except queue.Full:
            pass  # the thread takes a piece soon and sees `aborted` then
        self.thread.join()

    def _constraints(self, mode: str) -> None:
        if self.keys:
            self.cursor.execute(pgsql.SQL("SET CONSTRAINTS {} " + mode).format(pgsql.SQL(", ").join(self.keys)))

    def _put(self, item) -> None:
        while True:
            if self.error is not None:
                raise self.error
            try:
                self.queue.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    def _get(self):
        item = self.queue.get()
        if self.aborted:
            raise _Aborted("the release item rows were not all made")
        return item

    def _run(self) -> None:
        try:
            item = self._get()
            while item is not _DONE:
                with self.cursor.copy(self.statement) as copy:
                    while item is not _DONE:
                        chunks, end = item
                        for data in chunks:
                            copy.write(data)
                        if end:  # the segment ends here: its keys are checked while the next is made
                            break
                        item = self._get()
                if item is not _DONE:
                    item = self._get()
        except BaseException as exc:  # raised in the maker's thread (write or the block's end)
            self.error = exc
