"""The one runner of fixed SQL statements on the hot paths: the task queue (annotation/queue/) and
the token and project-with-role lookups of every API request (annotation/permissions.py).

A statement goes through a psycopg RawCursor with server-side binding: its
`%(name)s` placeholders are rewritten once per process as PostgreSQL's own $1, $2, ... (psycopg
would otherwise re-parse a long statement such as the claim on every call), and with preparing on
(config/settings.py prepare_threshold; off with DATABASE_PREPARE=0) it is parsed and planned once
per connection: planning cost more than executing the claim, and no ORM query is compiled per call
(PostgreSQL keeps the generic plan: the right one here, index range walks and primary-key probes
whatever the ids). Same connection and transaction as the ORM; errors are mapped to Django's
(IntegrityError). Like every prepared statement it bypasses Django's query log.

Callers send ids as int8 (psycopg's Int8), so one prepared statement serves every id, and list
columns, never `*`, so a migration adding a column does not break a prepared statement.
"""

from __future__ import annotations

import functools
import re

from django.db import DEFAULT_DB_ALIAS, connection, connections
from psycopg import RawCursor
from psycopg.types.numeric import Int8

_NAMED = re.compile(r"%\((\w+)\)s")


@functools.lru_cache(maxsize=128)
def native(sql: str) -> tuple[str, tuple[str, ...]]:
    """`%(name)s` placeholders rewritten as $1, $2, ... and the names in that order."""
    names: list[str] = []

    def number(match: re.Match) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    return _NAMED.sub(number, sql), tuple(names)


def rows(sql: str, params: dict, *, using: str = DEFAULT_DB_ALIAS, prepare: bool | None = True) -> list[tuple]:
    """Run one statement inside the caller's transaction; all rows.

    prepare=True prepares it on its first run on a connection (the queue's statements), None after
    psycopg's prepare_threshold runs (the per-request lookups of permissions.py).
    """
    query, names = native(sql)
    db = connections[using]
    # As Django's own cursors do: with CONN_HEALTH_CHECKS, the first statement of a request checks
    # the persistent connection (a PostgreSQL restart broke it) and reconnects instead of failing.
    db.close_if_health_check_failed()
    db.ensure_connection()
    db.validate_no_broken_transaction()
    with db.wrap_database_errors:
        with RawCursor(db.connection) as cursor:
            cursor.execute(query, [params[name] for name in names], prepare=prepare)
            return cursor.fetchall()  # every statement run here returns rows


def first_row(sql: str, params: dict, *, using: str = DEFAULT_DB_ALIAS) -> tuple | None:
    """The first row of a lookup by key (or None): through rows() with whole numbers sent as int8
    and preparing left to prepare_threshold."""
    params = {k: Int8(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in params.items()}
    found = rows(sql, params, using=using, prepare=None)
    return found[0] if found else None


def instance(model, values):
    """A model instance from the values of its concrete columns in order (queue.sql.columns), JSON
    fields decoded as the ORM does."""
    fields = model._meta.concrete_fields
    values = [
        f.from_db_value(v, None, connection) if hasattr(f, "from_db_value") else v for f, v in zip(fields, values)
    ]
    return model.from_db(connection.alias, [f.attname for f in fields], values)
