"""OSCBench video-rating scoring (PROTOCOLS.md §5). Plain numpy, no Django.

Item score per criterion = mean of the raters who gave a number (N/A is missing, never 0);
normalized = (mean - 1) / 4, printed 0-1 with three decimals. The state-change score of an item
is the mean of its normalized osc_accuracy and osc_consistency; it is broken down per scenario
and per action category. A judge is one "rater" per item.

Arrays: ``sums`` and ``counts`` are (N, 8) integers in ``CRITERIA`` order: the sum of the given
scores and how many were given.
"""
from __future__ import annotations

from decimal import Decimal
from typing import Mapping, Sequence

import numpy as np

from annotation.protocols import OSC_CRITERIA as CRITERIA
from annotation.protocols import OSC_SCENARIOS as SCENARIOS

from .common import ItemMatrix, bootstrap_cis, printed_means

KEYS = CRITERIA
PRIMARY = "osc_accuracy"
PLACES = 3
_ACC, _CONS = CRITERIA.index("osc_accuracy"), CRITERIA.index("osc_consistency")


def ratings_to_arrays(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, R, 8) scores with NaN for missing / N/A -> (sums, counts), each (N, 8) int64."""
    scores = np.asarray(scores, dtype=np.float64)
    given = np.isfinite(scores)
    sums = np.where(given, scores, 0).sum(axis=1).astype(np.int64)
    return sums, given.sum(axis=1).astype(np.int64)


def score_dicts_to_arrays(per_item: Sequence[Sequence[Mapping[str, int | None]]]) -> tuple[np.ndarray, np.ndarray]:
    """Per item a list of {criterion: 1..5 | None} (one per rater) -> (sums, counts).

    One list comprehension per criterion over all ratings, then bincount by item: the per-rating
    Python work is a dict lookup per criterion.
    """
    n = len(per_item)
    sums = np.zeros((n, len(CRITERIA)), dtype=np.int64)
    counts = np.zeros((n, len(CRITERIA)), dtype=np.int64)
    flat = [rating or {} for ratings in per_item for rating in ratings]
    if not flat:
        return sums, counts
    owner = np.repeat(np.arange(n), [len(ratings) for ratings in per_item])
    for j, criterion in enumerate(CRITERIA):
        values = np.array([r.get(criterion) for r in flat], dtype=np.float64)  # None -> NaN
        given = np.isfinite(values)
        sums[:, j] = np.rint(np.bincount(owner, weights=np.where(given, values, 0.0), minlength=n)).astype(np.int64)
        counts[:, j] = np.bincount(owner, weights=given, minlength=n).astype(np.int64)
    return sums, counts


def state_change_cells(sums: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(num, den) per item of mean(normalized accuracy, normalized consistency); den 0 if either missing."""
    sa, ca = sums[:, _ACC], counts[:, _ACC]
    sc, cc = sums[:, _CONS], counts[:, _CONS]
    both = (ca > 0) & (cc > 0)
    num = np.where(both, (sa - ca) * cc + (sc - cc) * ca, 0)
    den = np.where(both, 8 * ca * cc, 0)
    return num, den


def item_matrix(
    sums: np.ndarray,
    counts: np.ndarray,
    *,
    scenarios: Sequence[str] | np.ndarray | None = None,
    action_categories: Sequence[str] | np.ndarray | None = None,
    parse_failures: int = 0,
) -> ItemMatrix:
    sums = np.asarray(sums, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    num = sums - counts
    den = 4 * counts  # 0 where nobody gave a number: not counted
    sc_num, sc_den = state_change_cells(sums, counts)
    nums, dens, keys = [num, sc_num[:, None]], [den, sc_den[:, None]], list(CRITERIA) + ["state_change"]
    for labels, prefix, names in (
        (scenarios, "scenario", SCENARIOS),
        (action_categories, "action_category", None),
    ):
        if labels is None:
            continue
        labels = np.asarray(labels, dtype=object)
        # A video without the (optional) label is in no group of that breakdown.
        for name in names or sorted({label for label in labels.tolist() if label not in (None, "")}, key=str):
            member = labels == name
            nums.append(np.where(member, sc_num, 0)[:, None])
            dens.append(np.where(member, sc_den, 0)[:, None])
            keys.append(f"state_change:{prefix}:{name}")
    return ItemMatrix(keys=tuple(keys), num=np.hstack(nums), den=np.hstack(dens), parse_failures=parse_failures, n=sums.shape[0])


def printed(matrix: ItemMatrix) -> dict[str, Decimal | None]:
    return printed_means(matrix, matrix.keys, places=PLACES, as_percent=False)


def cis(matrix: ItemMatrix, *, n_boot: int = 1000, seed: int = 0) -> dict[str, list[float] | None]:
    return bootstrap_cis(matrix, keys=matrix.keys, scale=1.0, places=PLACES, n_boot=n_boot, seed=seed)


def item_means(sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(N, 8) float mean score per item and criterion, NaN where nobody gave a number."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.where(counts > 0, counts, 1), np.nan)


def random_ratings(n_items: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded uniform 1..5 scores, one rater per item and criterion."""
    rng = np.random.default_rng(seed)
    sums = rng.integers(1, 6, size=(n_items, len(CRITERIA))).astype(np.int64)
    return sums, np.ones_like(sums)
