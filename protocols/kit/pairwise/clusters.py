"""Votes grouped into clusters (the prompt they were cast on, say) for the cluster-robust sandwich.

Votes on one prompt are not independent: a prompt that flatters one model's style lends it every
vote cast on it. The clustered sandwich (intervals.py) sums each cluster's vote scores before taking
the outer product, so the votes of one cluster count as one draw. It needs, per cluster, how many
votes of each outcome each pair got: ``VoteClusters``, one row per (cluster, pair) with at least one
vote. Definitions: docs/statistics.md ("Clustered sandwich").
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from .counts import PairCounts, _indices, _outcome_codes


@dataclass(frozen=True)
class VoteClusters:
    """Rows per (cluster, pair), arrays of length Q: the cluster's code (0..n_clusters-1), the pair's
    position in ``PairCounts``' arrays, and the counts as the fit sees them (ties include both bad)."""

    cluster: np.ndarray
    pair: np.ndarray
    wins: np.ndarray  # the pair's first model preferred
    losses: np.ndarray
    ties: np.ndarray
    n_clusters: int


def vote_clusters(counts: PairCounts, model_a, model_b, outcome, labels: Sequence[Hashable]) -> VoteClusters:
    """Group the votes behind ``counts`` (the same rows as ``from_battles`` took: ``model_a``,
    ``model_b``, ``outcome``) by ``labels[i]``, any hashable value per vote. Refuses votes on a pair
    ``counts`` does not hold, and a label list of another length."""
    names = counts.models
    a = _indices(model_a, names, "model_a")
    b = _indices(model_b, names, "model_b")
    codes = _outcome_codes(outcome)
    if not (a.shape[0] == b.shape[0] == codes.shape[0] == len(labels)):
        raise ValueError(
            f"model_a, model_b, outcome and cluster labels differ in length "
            f"({a.shape[0]}, {b.shape[0]}, {codes.shape[0]}, {len(labels)})"
        )
    index: dict[Hashable, int] = {}
    cluster = np.fromiter((index.setdefault(x, len(index)) for x in labels), dtype=np.int64, count=len(labels))
    swap = a > b
    first, second = np.where(swap, b, a), np.where(swap, a, b)
    code = np.where(swap & (codes == 0), 1, np.where(swap & (codes == 1), 0, codes))
    k = counts.n_models
    pair_of = np.full(k * k, -1, dtype=np.int64)
    pair_of[counts.first * k + counts.second] = np.arange(counts.first.shape[0])
    pair = pair_of[first * k + second]
    if pair.size and pair.min() < 0:
        pos = int(np.flatnonzero(pair < 0)[0])
        raise ValueError(f"vote {pos} compares {names[first[pos]]!r} and {names[second[pos]]!r}, a pair without counts")
    n_pairs, n_clusters = counts.first.shape[0], len(index)
    # One row per (cluster, pair) that has a vote; outcome 2 (tie) and 3 (both bad) are both ties here.
    key = cluster * n_pairs + pair
    rows, inverse = np.unique(key, return_inverse=True)
    inverse = inverse.reshape(-1)
    table = np.bincount(inverse * 3 + np.minimum(code, 2), minlength=rows.shape[0] * 3).reshape(-1, 3)
    return VoteClusters(
        cluster=rows // n_pairs,
        pair=rows % n_pairs,
        wins=table[:, 0],
        losses=table[:, 1],
        ties=table[:, 2],
        n_clusters=n_clusters,
    )
