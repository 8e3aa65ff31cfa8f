"""Krippendorff's alpha: the one implementation, for the agreement page (annotation.agreement)
and the human reference of the correlation report (evaluation.stats). Plain numpy, no Django.

Reliability data are *units* (items), each the values its coders gave; None (or NaN) is a
missing value. A unit with m >= 2 values is pairable and adds 1 / (m - 1) to the coincidence
matrix o[c, k] for every ordered pair of its values from different coders; units with fewer
values drop out. With n_c the row sums and n their total (the pairable values),

    alpha = 1 - (n - 1) * sum(o_ck * d2_ck) / sum(n_c * n_k * d2_ck)

for the metric's squared difference d2: nominal (0 / 1), ordinal (ranks from the marginals:
(sum of n_g for g from c to k - (n_c + n_k) / 2)^2 over the ordered scale), interval ((c - k)^2)
and ratio (((c - k) / (c + k))^2). Alpha is undefined (None) with fewer than two pairable values
or without any variation (the expected disagreement is 0).

The matrix is additive over units, so the agreement page fills it one item at a time while it
streams a project, and the bootstrap of evaluation.stats sums per-unit matrices per resample.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

METRICS = ("nominal", "ordinal", "interval", "ratio")


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


class CoincidenceMatrix:
    """o[c, k] over an ordered value scale.

    With ``values`` the scale is fixed (a value outside it is an error, as a score of 7 on a
    1-5 scale would be); without, the scale is the sorted values of the pairable units seen so
    far and grows as units arrive. Values absent from the data add nothing, so both give the
    same alpha. Cells are summed in plain floats, one unit after the other (the agreement page
    adds units one at a time); `counts` is the numpy matrix.
    """

    def __init__(self, values: Iterable[Any] | None = None):
        self.fixed = values is not None
        self.values: list[Any] = list(values) if values is not None else []
        self.index = {v: i for i, v in enumerate(self.values)}
        self._cells = [[0.0] * len(self.values) for _ in self.values]

    def add_unit(self, unit: Iterable[Any]) -> None:
        """Add one unit's pairs: 1 / (m - 1) for every ordered pair of its m >= 2 values."""
        vals = [v for v in unit if not is_missing(v)]
        m = len(vals)
        if m < 2:
            return
        for v in vals:
            if v not in self.index:
                if self.fixed:
                    raise ValueError(f"value {v!r} is not on the scale {self.values}")
                self._insert(v)
        index = self.index
        seen: dict[int, int] = {}  # scale position -> how often the unit holds that value
        for v in vals:
            i = index[v]
            seen[i] = seen.get(i, 0) + 1
        cells, m_1 = self._cells, m - 1
        for i, ci in seen.items():
            row = cells[i]
            for k, ck in seen.items():
                ordered_pairs = ci * ck - (ci if i == k else 0)  # of values from different coders
                if ordered_pairs:
                    row[k] += ordered_pairs / m_1

    def _insert(self, value: Any) -> None:
        at = bisect_left(self.values, value)
        self.values.insert(at, value)
        self.index = {v: i for i, v in enumerate(self.values)}
        for row in self._cells:
            row.insert(at, 0.0)
        self._cells.insert(at, [0.0] * len(self.values))

    @property
    def counts(self) -> np.ndarray:
        """The matrix o[c, k], rows and columns in scale order."""
        return np.array(self._cells, dtype=np.float64).reshape(len(self.values), len(self.values))

    @property
    def pairable_values(self) -> float:
        """n: the number of pairable values (a whole number up to rounding)."""
        return float(self.counts.sum(axis=1).sum())

    def __getitem__(self, pair: tuple[Any, Any]) -> float:
        c, k = pair
        if c not in self.index or k not in self.index:
            return 0.0
        return self._cells[self.index[c]][self.index[k]]

    def items(self) -> Iterator[tuple[tuple[Any, Any], float]]:
        """((c, k), o_ck) for every cell of the scale."""
        for i, c in enumerate(self.values):
            for j, k in enumerate(self.values):
                yield (c, k), self._cells[i][j]

    def alpha(self, metric: str = "ordinal") -> float | None:
        return alpha_from_matrix(self.counts, self.values, metric)


def coincidence_matrix(units: Iterable[Sequence[Any]], values: Iterable[Any] | None = None) -> CoincidenceMatrix:
    """The coincidence matrix of `units` (see CoincidenceMatrix for the scale)."""
    matrix = CoincidenceMatrix(values)
    for unit in units:
        matrix.add_unit(unit)
    return matrix


def krippendorff_alpha(
    units: Iterable[Sequence[Any]], metric: str = "ordinal", *, values: Iterable[Any] | None = None
) -> float | None:
    """Krippendorff's alpha of `units` (one sequence of coders' values each, None = missing)."""
    return coincidence_matrix(units, values).alpha(metric)


def squared_differences(values: Sequence[Any], marginals: np.ndarray, metric: str) -> np.ndarray:
    """d2[c, k] of the metric over the ordered scale `values` (ordinal needs the marginals n_c)."""
    k = len(values)
    if metric == "nominal":
        return 1.0 - np.eye(k)
    if metric == "ordinal":
        cum = np.concatenate([[0.0], np.cumsum(marginals)])
        i = np.arange(k)
        lo, hi = np.minimum.outer(i, i), np.maximum.outer(i, i)
        return (cum[hi + 1] - cum[lo] - (marginals[:, None] + marginals[None, :]) / 2) ** 2
    if metric in ("interval", "ratio"):
        v = np.asarray(values, dtype=np.float64)
        diff = v[:, None] - v[None, :]
        if metric == "interval":
            return diff**2
        total = v[:, None] + v[None, :]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total != 0, (diff / np.where(total != 0, total, 1.0)) ** 2, 0.0)
    raise ValueError(f"unknown metric {metric!r}; use one of {', '.join(METRICS)}")


def alpha_from_matrix(o: np.ndarray, values: Sequence[Any], metric: str = "ordinal") -> float | None:
    """Alpha from a coincidence matrix `o` over the scale `values`; None when undefined."""
    n_c = o.sum(axis=1)
    n = float(n_c.sum())
    if n < 2:
        return None
    d = squared_differences(values, n_c, metric)
    expected = float((np.outer(n_c, n_c) * d).sum())
    if expected == 0:
        return None
    return 1.0 - (n - 1) * float((o * d).sum()) / expected
