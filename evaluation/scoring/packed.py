"""Columns of a query read as numpy arrays, packed into a few bytea values by PostgreSQL.

A board reads millions of rows; any per-row Python (an ORM object, a tuple, a COPY message) costs
more than scoring them. Here the server encodes each row's fields with their binary send functions
(``int8send`` ...) and concatenates a whole chunk of rows into one ``bytea`` (``string_agg``), which
numpy reads in place as one structured array. Every field is fixed-width and must never be NULL (a
NULL would drop its row from the aggregate): callers ``coalesce`` to a sentinel, and the row count
sent alongside catches any slip.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import psycopg
from django.db import connection

PARALLEL_READS = 2  # packed reads at once, each on its own connection (its own server process)
SEND = {
    "i2": ("int2send", "int2"),
    "i4": ("int4send", "int4"),
    "i8": ("int8send", "int8"),
    "f8": ("float8send", "float8"),
}


class PackedReadError(RuntimeError):
    pass


def packed_sql(fields: Sequence[tuple[str, str, str]], source: str) -> str:
    """``SELECT count(*), string_agg(<fields sent>, '')`` over ``source`` (a subquery whose columns
    the field expressions name); ``fields``: (name, kind, SQL expression)."""
    parts = " || ".join(f"{SEND[kind][0]}(({expr})::{SEND[kind][1]})" for _, kind, expr in fields)
    return f"SELECT count(*), string_agg({parts}, ''::bytea) FROM ({source}) AS src"


def int8_array(values: Any) -> str:
    """Whole numbers as one PostgreSQL array literal (``{1,2,3}``), for a parameter cast with
    ``::int8[]``: psycopg dumps a Python list element by element (about 0.8 s for the 600,000 ids of
    a 1M-item board), the literal costs a ``str`` per number."""
    return "{" + ",".join(map(str, np.asarray(values, dtype=np.int64).tolist())) + "}"


def record_dtype(fields: Sequence[tuple[str, str, str]]) -> np.dtype:
    return np.dtype([(name, ">" + kind) for name, kind, _ in fields])


def read_packed(fields: Sequence[tuple[str, str, str]], source: str, params: Sequence[Any]) -> dict[str, np.ndarray]:
    """The fields of every row of ``source`` as native-endian arrays (row order: the server's)."""
    dtype = record_dtype(fields)
    connection.ensure_connection()
    # A server-binding cursor (Django's binds on the client, and such cursors return text only).
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(packed_sql(fields, source), list(params), binary=True)
        count, data = cursor.fetchone()
    data = data or b""
    if len(data) != count * dtype.itemsize:
        raise PackedReadError(f"packed read: {count} rows but {len(data)} bytes (a field was NULL?)")
    records = np.frombuffer(data, dtype=dtype)
    return {name: records[name].astype(records[name].dtype.newbyteorder("=")) for name, _, _ in fields}


def _read_in_thread(fields, source: str, params: Sequence[Any]) -> dict[str, np.ndarray]:
    try:
        return read_packed(fields, source, params)
    finally:
        connection.close()  # this worker thread's own connection


def read_packed_many(
    fields: Sequence[tuple[str, str, str]], source: str, param_sets: Sequence[Sequence[Any]]
) -> Iterator[dict[str, np.ndarray]]:
    """``read_packed`` for each parameter set, in order. Outside a transaction the reads run
    ``PARALLEL_READS`` at a time on connections of their own (the server evaluates each on its own
    core); inside one (a request's, a test's) they run one after another on its connection, which
    alone sees what the transaction wrote."""
    if connection.in_atomic_block or len(param_sets) < 2:
        for params in param_sets:
            yield read_packed(fields, source, params)
        return
    with ThreadPoolExecutor(max_workers=PARALLEL_READS) as pool:
        yield from pool.map(lambda params: _read_in_thread(fields, source, params), param_sets)


def concatenated(parts: list[dict[str, np.ndarray]], fields: Sequence[tuple[str, str, str]]) -> dict[str, np.ndarray]:
    dtype = record_dtype(fields)
    if not parts:
        return {name: np.empty(0, dtype=dtype[name].newbyteorder("=")) for name, _, _ in fields}
    return {name: np.concatenate([p[name] for p in parts]) for name, _, _ in fields}
