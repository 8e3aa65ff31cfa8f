"""Standard errors of a board's mean-of-item metrics, naive and clustered (docs/statistics.md,
"Clustered errors and paired comparisons"). Plain Python + numpy, no Django.

Items that share a context (the questions of one scene, the frames of one video, the videos of one
prompt) are not independent: their scores move together, and a standard error that treats them as
independent is too small. Each protocol names the payload field that groups its items
(``Protocol.cluster_key``, protocols/base.py): a field name, a dotted path into the payload
("extra.video_id") or a tuple of them (a pair of videos). An item without a value is a cluster of
its own.

For the n counted scores s_i of one metric with mean s̄, in C clusters:
- ``se`` = sd / √n, sd the sample standard deviation (n − 1 in the denominator);
- ``se_clustered`` = √(C / (C − 1) · Σ_c (Σ_{i∈c} (s_i − s̄))²) / n, the cluster-robust (sandwich)
  standard error of a mean with the usual small-sample factor C / (C − 1);
- ``design_effect`` = (se_clustered / se)²: how many times the variance grows through clustering.
With every item in a cluster of its own the two errors are equal, so the design effect is 1.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from .matrix import ItemMatrix

ClusterKey = str | tuple[str, ...] | None


def _lookup(payload: Mapping[str, Any], path: str) -> Any:
    value: Any = payload
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _hashable(value: Any) -> Hashable:
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return value


def cluster_value(payload: Mapping[str, Any], key: ClusterKey) -> Hashable | None:
    """The item's cluster under ``key``, or None when the item has no value there (or any part of a
    tuple key is missing)."""
    if key is None:
        return None
    paths = (key,) if isinstance(key, str) else tuple(key)
    values = [_lookup(payload, path) for path in paths]
    if any(v is None or v == "" for v in values):
        return None
    return _hashable(values[0]) if len(values) == 1 else tuple(_hashable(v) for v in values)


def cluster_labels(
    payloads: Sequence[Mapping[str, Any]], unit_ids: Sequence[Hashable], key: ClusterKey
) -> list[Hashable]:
    """One label per unit: its cluster, or ("unit", its id) where it has none (a cluster of its own)."""
    out: list[Hashable] = []
    for payload, unit in zip(payloads, unit_ids):
        value = cluster_value(payload, key)
        out.append(("unit", unit) if value is None else ("cluster", value))
    return out


def cluster_codes(labels: Sequence[Hashable]) -> tuple[np.ndarray, int]:
    """Labels -> (integer code per unit, number of clusters), codes in order of first appearance."""
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(label, len(index)) for label in labels), dtype=np.int64, count=len(labels))
    return codes, len(index)


def standard_errors(scores: Sequence[float] | np.ndarray, codes: np.ndarray | Sequence[int]) -> dict[str, Any]:
    """{"n", "clusters", "se", "se_clustered", "design_effect"} of the mean of ``scores``, units grouped
    by ``codes`` (any integers). A figure that is undefined (fewer than two scores or clusters, or no
    spread) is None."""
    s = np.asarray(scores, dtype=np.float64)
    codes = np.asarray(codes, dtype=np.int64)
    n = int(s.size)
    _, inverse = np.unique(codes, return_inverse=True)
    c = int(inverse.max()) + 1 if n else 0
    out: dict[str, Any] = {"n": n, "clusters": c, "se": None, "se_clustered": None, "design_effect": None}
    if n < 2:
        return out
    dev = s - s.mean()
    out["se"] = float(np.sqrt((dev @ dev) / (n - 1)) / np.sqrt(n))
    if c >= 2:
        sums = np.bincount(inverse.reshape(-1), weights=dev, minlength=c)
        out["se_clustered"] = float(np.sqrt(c / (c - 1) * (sums @ sums)) / n)
    if out["se"] and out["se_clustered"] is not None:
        out["design_effect"] = (out["se_clustered"] / out["se"]) ** 2
    return out


def matrix_standard_errors(
    matrix: ItemMatrix, codes: np.ndarray | Sequence[int], keys: Sequence[str], *, scale: float = 1.0
) -> dict[str, dict[str, Any]]:
    """``standard_errors`` per key of ``keys`` that is a column of ``matrix`` (a mean of item
    scores), on the printed scale (``scale`` 100 for percentages); the rows counted for that column
    only. Keys that are no column (a metric derived from several means) are left out."""
    codes = np.asarray(codes, dtype=np.int64)
    values, counted = matrix.float_values()
    out: dict[str, dict[str, Any]] = {}
    for key in keys:
        if key not in matrix.keys:
            continue
        j = matrix.column(key)
        rows = counted[:, j] > 0
        result = standard_errors(values[rows, j] * scale, codes[rows])
        out[key] = result
    return out
