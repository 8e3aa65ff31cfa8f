"""A frozen release's board as arrays: items, answer sets and clusters read straight from PostgreSQL
into numpy (evaluation/scoring/packed.py), scored by the protocol's ``score_columns``.

For a protocol whose scoring module offers the array form (``score_columns``, ``column_answer``,
``random_columns``, ``COLUMN_LABELS``: protocols/kit/choice_columns.py) and a release whose items
all store their resolved queries with the protocol's query keys. Anything else (a live board, an
item frozen before option orders were stored, a cluster value that is not a string or a number)
returns None and the board is read as records (evaluation/selectors.py), so both forms score the
same data alike.

Per item the server sends its position, each query's known answer as a letter code, how many
options it shows and the hash of their list (evaluation/scoring/choice_answers.py compares the
orders a model saw with it), the protocol's label fields as indexes and the cluster value's hash.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from django.db import connection

from annotation.models import Release
from inference.models import InferenceJob
from protocols import registry
from protocols.kit.choice_columns import ChoiceItems

from . import choice_answers
from .choice_answers import job_answers
from .packed import concatenated, read_packed_many

ITEMS_PER_READ = 250_000  # release items per packed read: memory stays flat
_SIMPLE_PATH_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_lit = choice_answers._lit


def array_form(protocol: str) -> bool:
    proto = registry.get(protocol)
    return proto.board == "models" and not proto.human_row and hasattr(proto.scoring, "score_columns")


def _cluster_paths(protocol: str) -> list[list[str]] | None:
    """The cluster key's paths as parts; None when one needs the record path's reading."""
    key = registry.get(protocol).cluster_key
    if key is None:
        return []
    paths = [path.split(".") for path in ((key,) if isinstance(key, str) else key)]
    for parts in paths:
        if parts[0] in ("id", "resolved") or not all(_SIMPLE_PATH_PART.fullmatch(p) for p in parts):
            return None
    return paths


def first_appearance_codes(keys: np.ndarray) -> np.ndarray:
    """(N, K) int64 keys -> one code per row, numbered in order of first appearance (as
    protocols.kit.clustered.cluster_codes numbers labels)."""
    if keys.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    rank = np.empty(first.shape[0], dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.shape[0])
    return rank[inverse.reshape(-1)]


def release_items(protocol: str, release: Release) -> tuple[ChoiceItems, np.ndarray, np.ndarray] | None:
    """(items, (N, Q) hashes of the release's option lists, cluster codes) or None (read as records)."""
    scoring = registry.get(protocol).scoring
    queries = tuple(registry.get(protocol).query_keys)
    paths = _cluster_paths(protocol)
    if paths is None:
        return None
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT ARRAY(SELECT jsonb_object_keys(payload->'resolved')) FROM annotation_releaseitem"
            " WHERE release_id = %s AND jsonb_typeof(payload->'resolved') = 'object' ORDER BY position LIMIT 1",
            [release.pk],
        )
        found = cursor.fetchone()
        cursor.execute(
            "SELECT count(*), min(position), max(position) FROM annotation_releaseitem WHERE release_id = %s",
            [release.pk],
        )
        count, low, high = cursor.fetchone()
    if not count or found is None or sorted(found[0]) != sorted(queries):
        return None
    key_order = tuple(queries.index(k) for k in found[0])
    fields: list[tuple[str, str, str]] = [
        ("id", "i8", "item_id"),
        ("pos", "i4", "position"),
        (
            "shape",
            "i2",
            f"CASE WHEN jsonb_typeof(r) = 'object' THEN CASE WHEN r ?& {_lit(list(queries))}::text[]"
            f" AND r - {_lit(list(queries))}::text[] = '{{}}'::jsonb THEN 1 ELSE 0 END ELSE 0 END",
        ),
    ]
    for j, q in enumerate(queries):
        spec = f"o{j}"
        fields += [
            (f"t{j}", "i2", choice_answers.letter_code(f"a{j}", -100)),
            (
                f"o{j}",
                "i2",
                f"CASE WHEN jsonb_typeof({spec}) = 'array' THEN jsonb_array_length({spec}) ELSE -100 END",
            ),
            (f"h{j}", "i8", choice_answers._ORDER_HASH.format(spec)),
        ]
    for name, names in scoring.COLUMN_LABELS.items():
        value = f"(p->{_lit(name)})"
        fields.append(
            (
                f"l_{name}",
                "i2",
                f"coalesce(array_position({_lit(list(names))}::text[],"
                f" CASE WHEN jsonb_typeof({value}) = 'string' THEN {value} #>> '{{}}' END) - 1, -1)",
            )
        )
    for c, parts in enumerate(paths):
        value = f"c{c}"
        fields += [
            (
                f"ck{c}",
                "i2",
                f"CASE WHEN {value} IS NULL OR jsonb_typeof({value}) = 'null' OR {value} = '\"\"'::jsonb THEN 0"
                f" WHEN jsonb_typeof({value}) IN ('string', 'number') THEN 1 ELSE 2 END",
            ),
            (f"ch{c}", "i8", f"coalesce(jsonb_hash_extended({value}, 0), 0)"),
        ]
    # OFFSET 0 keeps each subquery's values computed once per row (not inlined into every use).
    specs = ", ".join(f"r->{_lit(q)} AS s{j}" for j, q in enumerate(queries))
    answers = ", ".join(f"s{j}->>'answer' AS a{j}, s{j}->'options' AS o{j}" for j in range(len(queries)))
    clusters = "".join(f", payload #> {_lit(parts)}::text[] AS c{c}" for c, parts in enumerate(paths))
    source = (
        f"SELECT *, {answers} FROM (SELECT *, {specs} FROM (SELECT item_id, position,"
        f" payload->'resolved' AS r, payload AS p{clusters} FROM annotation_releaseitem"
        " WHERE release_id = %s AND position >= %s AND position < %s OFFSET 0) AS ri OFFSET 0) AS rs OFFSET 0"
    )
    chunks = [[release.pk, start, start + ITEMS_PER_READ] for start in range(low, high + 1, ITEMS_PER_READ)]
    parts = list(read_packed_many(fields, source, chunks))
    cols = concatenated(parts, fields)
    order = np.argsort(cols["pos"], kind="stable")
    cols = {name: values[order] for name, values in cols.items()}
    q = len(queries)
    truth = np.stack([cols[f"t{j}"] for j in range(q)], axis=1)
    n_options = np.stack([cols[f"o{j}"] for j in range(q)], axis=1)
    if not (cols["shape"] == 1).all() or (truth < 0).any() or (n_options < 0).any():
        return None
    if any((cols[f"ck{c}"] == 2).any() for c in range(len(paths))):
        return None
    items = ChoiceItems(
        queries=queries,
        key_order=key_order,
        item_ids=cols["id"].astype(np.int64),
        truth=truth.astype(np.int8),
        n_options=n_options.astype(np.int16),
        labels={name: cols[f"l_{name}"] for name in scoring.COLUMN_LABELS},
    )
    hashes = np.stack([cols[f"h{j}"] for j in range(q)], axis=1)
    return items, hashes, _cluster_codes(cols, len(paths), items.n)


def _cluster_codes(cols: dict[str, np.ndarray], n_paths: int, n: int) -> np.ndarray:
    """Cluster codes in release order: items with equal values share one; an item without a value
    (any part missing, null or empty) is a cluster of its own."""
    if n_paths == 0:
        return np.arange(n, dtype=np.int64)
    own = np.zeros(n, dtype=bool)
    keys = np.zeros((n, n_paths + 1), dtype=np.int64)
    for c in range(n_paths):
        own |= cols[f"ck{c}"] == 0
        keys[:, c + 1] = cols[f"ch{c}"]
    keys[own] = 0
    keys[own, 0] = np.arange(1, int(own.sum()) + 1)  # its own: a key no valued item has
    return first_appearance_codes(keys)


def board_rows(
    protocol: str, release: Release | None, jobs: Sequence[tuple[str, InferenceJob]], *, seed: int
) -> tuple[list[tuple[str, Any, InferenceJob | None]], np.ndarray] | None:
    """([(row name, item matrix, job or None for Random)], cluster codes), or None where the board
    must be read as records. ``jobs``: (name, job) of each model row, in board order."""
    if release is None or not array_form(protocol):
        return None
    read = release_items(protocol, release)
    if read is None:
        return None
    items, hashes, codes = read
    scoring = registry.get(protocol).scoring
    rows: list[tuple[str, Any, InferenceJob | None]] = [
        (name, scoring.score_columns(items, job_answers(protocol, job, items, hashes)), job) for name, job in jobs
    ]
    if items.n:
        random = scoring.random_columns(items, rng=np.random.default_rng(seed))
        rows.append(("Random", scoring.score_columns(items, random), None))
    return rows, codes
