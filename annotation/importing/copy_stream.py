"""A COPY on the importing connection fed while pass 1 still checks the lines (items.py, a small
file whose project lock was free at once): each chunk of encoded rows goes to
``COPY annotation_item FROM STDIN`` as soon as it is full, so PostgreSQL parses and indexes those
rows on the other core while Python checks the next ones. The rows are in the import's
transaction, like any other statement of it: a refused file rolls them back with the rest.

While a COPY is open the connection runs nothing else; `pause` ends it (the rows sent so far
stay in the transaction) before a query of pass 1 (a media file seen for the first time), and the
next chunk starts another COPY. `end` closes it at the end of pass 1; `abort` (pass 1 found an
error, or failed) ends it with an error, which leaves the transaction to be rolled back, as it
is then anyway.
"""

from __future__ import annotations

import logging

from django.db import connection
from psycopg.copy import LibpqWriter

log = logging.getLogger(__name__)

# Bytes of rows handed to PostgreSQL at a time: small enough that it starts on the first rows
# early, large enough that a chunk costs one system call among hundreds of rows.
STREAM_CHUNK = 64 * 1024


class _Abandoned(Exception):
    """Ends a COPY whose rows are not wanted (the message PostgreSQL's error quotes)."""


class CopyStream:
    """``COPY … FROM STDIN`` on the current connection (inside the caller's transaction), opened on
    the first chunk and after each `pause`."""

    def __init__(self, sql: str):
        self.sql = sql
        self._cursor = None
        self._context = None  # psycopg's cursor.copy() context manager, entered
        self._copy = None
        self.copies = 0  # COPY statements started (one, unless pass 1 paused it)

    @property
    def open(self) -> bool:
        return self._copy is not None

    def write(self, chunk: bytes) -> None:
        if self._copy is None:
            self._cursor = connection.cursor()
            pg_cursor = self._cursor.cursor
            # Every chunk is flushed to the socket at once (flush_threshold 0): PostgreSQL starts on
            # it while the next one is built, instead of when libpq's buffer fills.
            self._context = pg_cursor.copy(self.sql, writer=LibpqWriter(pg_cursor, flush_threshold=0))
            self._copy = self._context.__enter__()
            self.copies += 1
        self._copy.write(chunk)

    def end(self) -> None:
        """End the open COPY, if any; its rows stay in the transaction."""
        context, cursor = self._context, self._cursor
        self._copy = self._context = self._cursor = None
        if context is not None:
            try:
                context.__exit__(None, None, None)
            finally:
                cursor.close()

    pause = end

    def abort(self) -> None:
        """End the open COPY with an error (nothing it received is kept); the transaction must be
        rolled back, and Django is told so."""
        context, cursor = self._context, self._cursor
        self._copy = self._context = self._cursor = None
        if context is None:
            return
        try:
            context.__exit__(_Abandoned, _Abandoned("import refused or failed"), None)
        except Exception as exc:  # noqa: BLE001 - on the way to a rollback already
            log.warning("ending an abandoned import COPY: %s", exc)
        finally:
            try:
                cursor.close()
            finally:
                if connection.in_atomic_block:
                    connection.needs_rollback = True
