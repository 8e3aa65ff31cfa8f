"""Array form shared by every protocol's scoring, exact printing and the item bootstrap.

Plain Python + numpy, no Django.

A scored answer set is an ``ItemMatrix``: one row per scored unit (an item, or one blind answer for a
Human row), one column per base metric; cell value = ``num / den`` with integer numerator and
denominator, and ``den == 0`` meaning "this unit does not count for that metric" (a breakdown
that does not contain it). A metric is the mean of its counted cells. Integers keep the printed
figure exact (rounded half up from the exact rational), and the same arrays feed a vectorized
bootstrap over rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from typing import TypeVar

import numpy as np

from .bootstrap import N_BOOT, percentile_ci

COMPRESS_FROM = 5_000  # rows from which the bootstrap resamples column by column (see _bootstrap_per_column)
SMALL_DEN = 16  # exact_means sums every column at once when no denominator is larger
CELL_TABLE_MAX = 1 << 20  # cells (columns x codes) the bootstrap counts for all columns at once
ROW_BLOCK = 65_536  # rows per bincount when counting them


def to_decimal(value: Fraction | int | Decimal, places: int) -> Decimal:
    """Exact rational -> Decimal rounded half up to ``places`` decimals."""
    if isinstance(value, Decimal):
        exact = value
    else:
        frac = Fraction(value)
        with localcontext() as ctx:
            ctx.prec = 60
            exact = Decimal(frac.numerator) / Decimal(frac.denominator)
    quantum = Decimal(1).scaleb(-places)
    with localcontext() as ctx:
        ctx.prec = 60
        return exact.quantize(quantum, rounding=ROUND_HALF_UP)


def percent(value: Fraction | int, places: int = 2) -> Decimal:
    return to_decimal(Fraction(value) * 100, places)


def _int_array(a) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu" or arr.dtype.kind == "u":
        arr = arr.astype(np.int64)
    return arr


@dataclass
class ItemMatrix:
    keys: tuple[str, ...]
    num: np.ndarray  # (N, M) int64
    den: np.ndarray  # (N, M) int64; 0 = not counted
    parse_failures: int = 0
    n: int = 0  # items scored (rows may be more for pooled human answers)
    diagnostics: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Small integer dtypes (int8 for 0/1 correctness) are kept to save memory; sums are taken in int64.
        self.num = _int_array(self.num).reshape(-1, len(self.keys))
        self.den = _int_array(self.den).reshape(-1, len(self.keys))
        if not self.n:
            self.n = int(self.num.shape[0])

    def column(self, key: str) -> int:
        return self.keys.index(key)

    def exact_means(self) -> dict[str, Fraction | None]:
        """Mean of num/den over counted rows, as an exact Fraction (None when no row counts)."""
        den_max = int(self.den.max()) if self.den.size else 0
        if den_max > SMALL_DEN or (self.den.size and int(self.den.min()) < 0):
            return self._exact_means_by_column()
        # Every column at once, a block of rows at a time (bounded temporaries), one pass per
        # denominator value (a protocol has a few: 1, 2, 6 ...): integer sums in int64, so the total
        # is exact; one Fraction per (column, denominator).
        counts = np.count_nonzero(self.den, axis=0)
        sums = np.zeros((den_max + 1, len(self.keys)), dtype=np.int64)
        for start in range(0, self.den.shape[0], ROW_BLOCK):
            num, den = self.num[start : start + ROW_BLOCK], self.den[start : start + ROW_BLOCK]
            for d in range(1, den_max + 1):
                at = den == d
                if at.any():
                    sums[d] += (num * at).sum(axis=0, dtype=np.int64)  # num where den == d, else 0
        totals = [Fraction(0)] * len(self.keys)
        for d, j in zip(*np.nonzero(sums)):
            totals[j] += Fraction(int(sums[d, j]), int(d))
        return {key: (totals[j] / int(counts[j]) if counts[j] else None) for j, key in enumerate(self.keys)}

    def _exact_means_by_column(self) -> dict[str, Fraction | None]:
        """exact_means for matrices with large denominators: per column, sums per distinct one."""
        out: dict[str, Fraction | None] = {}
        for j, key in enumerate(self.keys):
            num, den = self.num[:, j], self.den[:, j]
            # Sum per distinct denominator (bincount: integer sums are exact in float64 below 2**53),
            # so the exact total costs one Fraction per denominator; bin 0 (not counted) is skipped.
            present = np.bincount(den)
            count = int(present[1:].sum())
            if count == 0:
                out[key] = None
                continue
            per_den = np.bincount(den, weights=num)
            total = Fraction(0)
            for d in np.nonzero(present[1:])[0] + 1:
                total += Fraction(int(per_den[d]), int(d))
            out[key] = total / count
        return out

    def counts(self) -> dict[str, int]:
        return {key: int((self.den[:, j] > 0).sum()) for j, key in enumerate(self.keys)}

    def float_values(self) -> tuple[np.ndarray, np.ndarray]:
        """(values with 0 where not counted, counted mask as float) — inputs of the bootstrap."""
        counted = self.den > 0
        values = np.where(counted, self.num / np.where(counted, self.den, 1), 0.0)
        return values, counted.astype(np.float64)


def _column_cells(matrix: ItemMatrix) -> Iterator[tuple[np.ndarray, np.ndarray, int, int]]:
    """Per column: its distinct (num, den) cells as codes ``(num - num_min) * span + den`` (ascending),
    how many rows hold each, ``span`` (largest den + 1) and ``num_min``. When every column's codes
    fit a small table, all columns are counted together, one bincount per block of rows (a column
    of a C-ordered matrix is strided: reading it alone costs more than counting it)."""
    num, den = matrix.num, matrix.den
    n_rows, m = num.shape
    if den.size and int(den.min()) < 0:
        raise ValueError("an item matrix's denominators are 0 (not counted) or more")
    num_min = num.min(axis=0).astype(np.int64)
    span = den.max(axis=0).astype(np.int64) + 1
    size = int(((num.max(axis=0).astype(np.int64) - num_min + 1) * span).max())
    if m * size <= CELL_TABLE_MAX:
        offsets = np.arange(m, dtype=np.int64) * size - num_min * span
        table = np.zeros(m * size, dtype=np.int64)
        for start in range(0, n_rows, ROW_BLOCK):
            codes = num[start : start + ROW_BLOCK].astype(np.int64) * span + den[start : start + ROW_BLOCK] + offsets
            table += np.bincount(codes.ravel(), minlength=m * size)
        for j in range(m):
            counts = table[j * size : (j + 1) * size]
            cells = np.nonzero(counts)[0]
            yield cells, counts[cells], int(span[j]), int(num_min[j])
        return
    for j in range(m):
        col_num = num[:, j].astype(np.int64)
        col_den = den[:, j].astype(np.int64)
        codes = (col_num - int(num_min[j])) * int(span[j]) + col_den
        if int(codes.max()) < 50_000_000:
            counts = np.bincount(codes)
            cells = np.nonzero(counts)[0]
            counts = counts[cells]
        else:
            cells, counts = np.unique(codes, return_counts=True)
        yield cells, counts, int(span[j]), int(num_min[j])


def _bootstrap_per_column(matrix: ItemMatrix, *, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Column-wise bootstrap for large answer sets: a column's resampled mean depends only on how many
    rows of each distinct (num, den) cell are drawn, i.e. a multinomial over those cells, so each
    column costs O(N) to count and O(n_boot x distinct cells) to resample. Marginal intervals are
    exactly those of resampling rows; only joint statistics across columns would differ.
    """
    n_rows, m = matrix.num.shape
    out = np.full((n_boot, m), np.nan)
    for j, (cells, counts, span, num_min) in enumerate(_column_cells(matrix)):
        cell_den = cells % span
        cell_num = cells // span + num_min
        counted = cell_den > 0
        if not counted.any():
            continue
        values = np.where(counted, cell_num / np.where(counted, cell_den, 1), 0.0)
        # Cells with the same value (2/4 and 1/2; every uncounted cell) are one category of the
        # multinomial: equal rationals divide to the same float, so nothing changes but the cost.
        key = np.where(counted, values, -1.0)
        uniq, inv = np.unique(key, return_inverse=True)
        counts = np.bincount(inv.reshape(-1), weights=counts)
        counted = uniq >= 0
        values = np.where(counted, uniq, 0.0)
        draws = rng.multinomial(n_rows, counts / counts.sum(), size=n_boot).astype(np.float64)
        sums = draws @ values
        cnts = draws @ counted.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, j] = np.where(cnts > 0, sums / np.where(cnts > 0, cnts, 1), np.nan)
    return out


def bootstrap_means(
    matrix: ItemMatrix, *, n_boot: int = N_BOOT, seed: int = 0, max_cells: int = 20_000_000, per_column: bool = True
) -> np.ndarray:
    """(n_boot, M) column means over rows resampled with replacement; NaN where a resample counts none.

    Resamples are drawn as row-count weights (multinomial via bincount) and reduced with one
    matrix product per block, so the cost is O(n_boot * N) memory-bounded by ``max_cells``.
    """
    n_rows, m = matrix.num.shape
    out = np.full((n_boot, m), np.nan)
    if n_rows == 0:
        return out
    rng = np.random.default_rng(seed)
    if n_rows >= COMPRESS_FROM and per_column:
        return _bootstrap_per_column(matrix, n_boot=n_boot, rng=rng)
    values, counted = matrix.float_values()
    block = max(1, min(n_boot, max_cells // max(n_rows, 1)))
    for start in range(0, n_boot, block):
        b = min(block, n_boot - start)
        idx = rng.integers(0, n_rows, size=(b, n_rows))
        flat = (idx + (np.arange(b) * n_rows)[:, None]).ravel()
        weights = np.bincount(flat, minlength=b * n_rows).reshape(b, n_rows).astype(np.float64)
        sums = weights @ values
        cnts = weights @ counted
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + b] = np.where(cnts > 0, sums / np.where(cnts > 0, cnts, 1), np.nan)
    return out


Derive = Callable[[Mapping[str, np.ndarray]], Mapping[str, np.ndarray]]


def bootstrap_cis(
    matrix: ItemMatrix,
    *,
    keys: Sequence[str],
    scale: float = 100.0,
    places: int = 2,
    derive: Derive | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> dict[str, list[float] | None]:
    """Rounded [lo, hi] per reported key. ``derive`` computes non-mean metrics from resampled base means."""
    # Derived metrics combine columns: they need rows resampled jointly.
    samples = bootstrap_means(matrix, n_boot=n_boot, seed=seed, per_column=derive is None)
    base = {key: samples[:, j] for j, key in enumerate(matrix.keys)}
    if derive is not None:
        base = {**base, **derive(base)}
    out: dict[str, list[float] | None] = {}
    for key in keys:
        if key not in base:
            out[key] = None
            continue
        ci = percentile_ci(base[key])
        out[key] = None if ci is None else [printed_bound(ci[0] * scale, places), printed_bound(ci[1] * scale, places)]
    return out


def printed_bound(value: float, places: int) -> float:
    """A float interval bound rounded half up like the point values (from its shortest decimal
    form: 54.125 -> 54.13, where round() on the binary float gives 54.12)."""
    return float(to_decimal(Decimal(repr(float(value))), places))


def printed_means(
    matrix: ItemMatrix, keys: Sequence[str], *, places: int = 2, as_percent: bool = True
) -> dict[str, Decimal | None]:
    exact = matrix.exact_means()
    out: dict[str, Decimal | None] = {}
    for key in keys:
        value = exact.get(key)
        if value is None:
            out[key] = None
        else:
            out[key] = percent(value, places) if as_percent else to_decimal(value, places)
    return out


def nanmean_rows(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """Element-wise mean of the finite entries of several equally shaped arrays (NaN when none)."""
    stacked = np.vstack([np.asarray(a, dtype=np.float64) for a in arrays])
    finite = np.isfinite(stacked)
    cnt = finite.sum(axis=0)
    total = np.where(finite, stacked, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, total / np.where(cnt > 0, cnt, 1), np.nan)


Number = TypeVar("Number")


def criteria_mean(values: Iterable[Number | None]) -> Number | None:
    """A rated row's overall score: the mean of its per-criterion means over the criteria that have
    one (N/A never counts as 0), as a rating paper averages a generator's over its criteria. A rating
    protocol's "criteria_mean" column and the correlation page's system-level ranking both use it."""
    given = [v for v in values if v is not None]
    return sum(given) / len(given) if given else None  # type: ignore[operator,return-value]
