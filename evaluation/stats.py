"""Agreement statistics: Kendall tau-b, Spearman rho, bootstrap intervals, Krippendorff's alpha
(annotation.reliability's, with notes and a bootstrap), leave-one-rater-out human reference.
Plain numpy/SciPy, no Django.

Missing values (None / NaN) drop the pair; they never become 0. A statistic that cannot be
computed (too few pairs, a constant vector) is returned as value None with a ``note`` saying why.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from annotation import reliability
from protocols.kit.bootstrap import N_BOOT, percentile_ci

MIN_PAIRS = 3


@dataclass(frozen=True)
class Correlation:
    value: float | None
    n: int
    note: str | None = None


def as_float_array(values: Sequence[Any]) -> np.ndarray:
    """Numbers -> float array; None stays NaN (never 0)."""
    return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)


def paired(x: Sequence[Any], y: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    x, y = as_float_array(x), as_float_array(y)
    if x.shape != y.shape:
        raise ValueError("x and y differ in length")
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def _check(x: np.ndarray, y: np.ndarray, min_pairs: int) -> str | None:
    if x.size < min_pairs:
        return f"too few items: {x.size} paired values, at least {min_pairs} needed"
    if np.all(x == x[0]) or np.all(y == y[0]):
        return "undefined: one side is constant"
    return None


def kendall_tau_b(x: Sequence[Any], y: Sequence[Any], *, min_pairs: int = MIN_PAIRS) -> Correlation:
    xs, ys = paired(x, y)
    note = _check(xs, ys, min_pairs)
    if note:
        return Correlation(None, int(xs.size), note)
    value = float(sps.kendalltau(xs, ys, variant="b").statistic)
    return Correlation(value, int(xs.size)) if np.isfinite(value) else Correlation(None, int(xs.size), "undefined")


def spearman_rho(x: Sequence[Any], y: Sequence[Any], *, min_pairs: int = MIN_PAIRS) -> Correlation:
    xs, ys = paired(x, y)
    note = _check(xs, ys, min_pairs)
    if note:
        return Correlation(None, int(xs.size), note)
    value = float(sps.spearmanr(xs, ys).statistic)
    return Correlation(value, int(xs.size)) if np.isfinite(value) else Correlation(None, int(xs.size), "undefined")


# --- bootstrap of tau-b and rho ------------------------------------------------------------
#
# A resample of n paired items is described by its weights: w[i] = how many times item i was
# drawn. Copies of one item are tied in x and in y, so tau-b and rho of the resample depend only
# on the weights, and both can be computed without materializing n x n pair matrices:
# - rho: average ranks of each distinct value from the weighted value counts (a cumulative sum),
#   then the weighted Pearson correlation of those ranks: O(n) per resample;
# - tau-b: few distinct values (judge scores 1-5, human means of 3 raters) -> a weighted
#   contingency table of (x value, y value); concordant minus discordant pairs come from its 2-D
#   cumulative sums, ties from its margins: O(n + kx * ky) per resample. Many distinct values ->
#   SciPy's O(n log n) tau-b on the resampled vectors.
# The resamples themselves (``resample_indices``) are the ordinary bootstrap: n draws with
# replacement per resample, seeded; tests check both paths against SciPy on those resamples.

TABLE_MAX_CELLS = 65_536  # distinct (x, y) value cells up to which tau-b uses the contingency table
_BLOCK_VALUES = 4_000_000  # resample draws held in memory at once


def resample_indices(n: int, n_boot: int, seed: int):
    """Yield (start, idx) blocks of bootstrap draws, idx of shape (b, n); the same stream for any caller."""
    rng = np.random.default_rng(seed)
    block = max(1, min(n_boot, _BLOCK_VALUES // max(n, 1)))
    for start in range(0, n_boot, block):
        b = min(block, n_boot - start)
        yield start, rng.integers(0, n, size=(b, n))


def _weights(idx: np.ndarray, n: int) -> np.ndarray:
    """(b, n) draws -> (b, n) int64 weights (times each item was drawn)."""
    b = idx.shape[0]
    flat = (idx + (np.arange(b) * n)[:, None]).ravel()
    return np.bincount(flat, minlength=b * n).reshape(b, n)


def _value_codes(v: np.ndarray) -> tuple[np.ndarray, int]:
    uniq, inv = np.unique(v, return_inverse=True)
    return inv.reshape(-1), int(uniq.size)


def _weighted_value_counts(codes: np.ndarray, k: int, w: np.ndarray) -> np.ndarray:
    """(b, k) total weight per distinct value."""
    b, n = w.shape
    flat = (codes[None, :] + (np.arange(b) * k)[:, None]).ravel()
    return np.bincount(flat, weights=w.ravel().astype(np.float64), minlength=b * k).reshape(b, k)


def _average_ranks(counts: np.ndarray) -> np.ndarray:
    """(b, k) weighted value counts -> (b, k) average rank (1-based) of each value, as rankdata gives."""
    below = np.cumsum(counts, axis=1) - counts
    return below + (counts + 1) / 2


def _ratio(num: np.ndarray, den_sq: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = den_sq > 0
        return np.where(ok, num / np.sqrt(np.where(ok, den_sq, 1)), np.nan)


def spearman_from_weights(cx: np.ndarray, kx: int, cy: np.ndarray, ky: int, w: np.ndarray) -> np.ndarray:
    """rho per resample from value codes and (b, n) weights: Pearson of average ranks, weighted."""
    tx, ty = _weighted_value_counts(cx, kx, w), _weighted_value_counts(cy, ky, w)
    total = w.sum(axis=1, keepdims=True).astype(np.float64)
    mean = (total + 1) / 2
    dx = _average_ranks(tx) - mean  # (b, kx)
    dy = _average_ranks(ty) - mean
    wf = w.astype(np.float64)
    cov = (
        wf
        * np.take_along_axis(dx, np.broadcast_to(cx, w.shape), 1)
        * np.take_along_axis(dy, np.broadcast_to(cy, w.shape), 1)
    ).sum(axis=1)
    var_x = (tx * dx * dx).sum(axis=1)
    var_y = (ty * dy * dy).sum(axis=1)
    return _ratio(cov, var_x * var_y)


def tau_b_from_table(table: np.ndarray) -> np.ndarray:
    """tau-b per resample from (b, kx, ky) integer weighted contingency tables (values in order).

    S = sum over cells c of C[c] * (weight strictly below-left - weight strictly above-left);
    tau-b = S / sqrt((n0 - n1) (n0 - n2)), n0 = N(N-1)/2, n1 / n2 = pairs tied in x / in y.
    """
    c = table.astype(np.int64)
    b, kx, ky = c.shape
    cum = np.zeros((b, kx + 1, ky + 1), dtype=np.int64)
    cum[:, 1:, 1:] = c.cumsum(axis=1).cumsum(axis=2)  # cum[a, j] = sum of rows < a, cols < j
    below_left = cum[:, :-1, :-1]  # x smaller, y smaller: concordant with the cell
    above_left = cum[:, :-1, -1:] - cum[:, :-1, 1:]  # x smaller, y larger: discordant
    s = (c * (below_left - above_left)).sum(axis=(1, 2))
    total = c.sum(axis=(1, 2))
    tx, ty = c.sum(axis=2), c.sum(axis=1)
    n0 = total * (total - 1) // 2
    n1 = (tx * (tx - 1) // 2).sum(axis=1)
    n2 = (ty * (ty - 1) // 2).sum(axis=1)
    return _ratio(s.astype(np.float64), (n0 - n1).astype(np.float64) * (n0 - n2).astype(np.float64))


def tau_b_from_signs(sx: np.ndarray, sy: np.ndarray) -> np.ndarray:
    """tau-b over the last two axes of pairwise sign matrices: sum(sx*sy) / sqrt(sum(sx^2) sum(sy^2)).

    For small vectors only (generators at system level): pairs tied in x drop out of sum(sx^2),
    pairs tied in y out of sum(sy^2), exactly as tau-b defines them.
    """
    num = (sx * sy).sum(axis=(-2, -1))
    return _ratio(num, (sx * sx).sum(axis=(-2, -1)) * (sy * sy).sum(axis=(-2, -1)))


def weighted_correlations(
    xs: np.ndarray, ys: np.ndarray, w: np.ndarray, *, table_max_cells: int = TABLE_MAX_CELLS
) -> tuple[np.ndarray, np.ndarray]:
    """(tau-b, rho) per row of ``w``: the correlations of the sample holding w[r, i] copies of item i."""
    w = np.asarray(w, dtype=np.int64)
    cx, kx = _value_codes(xs)
    cy, ky = _value_codes(ys)
    rho = spearman_from_weights(cx, kx, cy, ky, w)
    b = w.shape[0]
    tau = np.full(b, np.nan)
    if kx * ky <= table_max_cells:
        cell = cx * ky + cy
        sub = max(1, _BLOCK_VALUES // max(kx * ky, w.shape[1], 1))  # bound b * kx * ky in memory
        for s0 in range(0, b, sub):
            ws = w[s0 : s0 + sub]
            bs = ws.shape[0]
            flat = (cell[None, :] + (np.arange(bs) * kx * ky)[:, None]).ravel()
            table = np.bincount(flat, weights=ws.ravel().astype(np.float64), minlength=bs * kx * ky)
            tau[s0 : s0 + bs] = tau_b_from_table(np.rint(table).astype(np.int64).reshape(bs, kx, ky))
    else:
        # Many distinct values: SciPy's O(n log n) tau-b on the resampled vectors (order is irrelevant).
        for r in range(b):
            tau[r] = sps.kendalltau(np.repeat(xs, w[r]), np.repeat(ys, w[r]), variant="b").statistic
    return tau, rho


def bootstrap_correlations(
    x: Sequence[Any],
    y: Sequence[Any],
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
    min_pairs: int = MIN_PAIRS,
    table_max_cells: int = TABLE_MAX_CELLS,
) -> dict[str, np.ndarray]:
    """Bootstrap samples of tau-b and rho, resampling paired items; NaN for degenerate resamples.

    Same resamples as drawing ``xs[idx], ys[idx]`` for each block of ``resample_indices`` and
    calling SciPy on them, at O(n + distinct cells) per resample when values repeat.
    """
    xs, ys = paired(x, y)
    n = xs.size
    out = {"kendall_tau_b": np.full(n_boot, np.nan), "spearman_rho": np.full(n_boot, np.nan)}
    if n < min_pairs:
        return out
    for start, idx in resample_indices(n, n_boot, seed):
        b = idx.shape[0]
        tau, rho = weighted_correlations(xs, ys, _weights(idx, n), table_max_cells=table_max_cells)
        out["kendall_tau_b"][start : start + b] = tau
        out["spearman_rho"][start : start + b] = rho
    return out


def resample_weights(n: int, n_boot: int, seed: int):
    """Yield (start, (b, n) weights) of the item bootstrap (the draws of ``resample_indices``)."""
    for start, idx in resample_indices(n, n_boot, seed):
        yield start, _weights(idx, n)


def correlation_with_ci(x: Sequence[Any], y: Sequence[Any], *, n_boot: int = N_BOOT, seed: int = 0) -> dict[str, Any]:
    """{"kendall_tau_b", "spearman_rho", "n", "ci": {"kendall_tau_b": [lo, hi], "spearman_rho": [lo, hi]}}."""
    tau = kendall_tau_b(x, y)
    rho = spearman_rho(x, y)
    result: dict[str, Any] = {"kendall_tau_b": tau.value, "spearman_rho": rho.value, "n": tau.n}
    if tau.value is None and rho.value is None:
        result["ci"] = None
    else:
        samples = bootstrap_correlations(x, y, n_boot=n_boot, seed=seed)
        result["ci"] = {
            "kendall_tau_b": percentile_ci(samples["kendall_tau_b"]) if tau.value is not None else None,
            "spearman_rho": percentile_ci(samples["spearman_rho"]) if rho.value is not None else None,
        }
    note = tau.note or rho.note
    if note:
        result["note"] = note
    return result


# --- Krippendorff's alpha -------------------------------------------------------------------
# One implementation, annotation.reliability (the agreement page uses it too); here it gets the
# note of an undefined value and a bootstrap over units.


def krippendorff_alpha(
    units: Sequence[Sequence[Any]], *, values: Sequence[Any] = (1, 2, 3, 4, 5), metric: str = "ordinal"
) -> Correlation:
    """Krippendorff's alpha from units x raters data (missing allowed) on the scale ``values``.

    ``n`` of the result is the number of pairable values.
    """
    o = reliability.coincidence_matrix(units, values)
    n = o.pairable_values
    if n < 2:
        return Correlation(None, int(n), "too few pairable values")
    value = o.alpha(metric)
    if value is None:
        return Correlation(None, int(round(n)), "undefined: all values identical")
    return Correlation(value, int(round(n)))


def _unit_coincidences(units: Sequence[Sequence[Any]], values: Sequence[Any]) -> np.ndarray:
    """(n_units, k * k): each unit's contribution to the coincidence matrix (0 for unpairable units)."""
    k = len(values)
    out = np.zeros((len(units), k * k))
    for u, unit in enumerate(units):
        out[u] = reliability.coincidence_matrix([unit], values).counts.ravel()
    return out


def krippendorff_alpha_bootstrap(
    units: Sequence[Sequence[Any]],
    *,
    values: Sequence[Any] = (1, 2, 3, 4, 5),
    metric: str = "ordinal",
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> np.ndarray:
    """alpha per resample of the units (items); the coincidence matrix is additive over units."""
    k = len(values)
    per_unit = _unit_coincidences(units, values)
    out = np.full(n_boot, np.nan)
    if not len(units):
        return out
    for start, w in resample_weights(len(units), n_boot, seed):
        o = (w.astype(np.float64) @ per_unit).reshape(-1, k, k)
        for r in range(o.shape[0]):
            alpha = reliability.alpha_from_matrix(o[r], values, metric)
            if alpha is not None:
                out[start + r] = alpha
    return out


# --- human reference ------------------------------------------------------------------------


def leave_one_rater_out(ratings: Mapping[Hashable, Mapping[Hashable, float | None]]) -> dict[str, Any]:
    """Each rater vs the mean of the other raters on the same items, averaged over raters.

    ``ratings``: rater -> {item: score or None}. A rater's comparison uses the items where they
    gave a number and at least one other rater did. Raters whose correlation is undefined are
    left out of the average (and counted in ``raters_undefined``).
    """
    items_by_rater = {r: {i: s for i, s in scores.items() if s is not None} for r, scores in ratings.items()}
    taus, rhos = [], []
    undefined = 0
    for rater, own in items_by_rater.items():
        xs, ys = [], []
        for item, score in own.items():
            others = [o[item] for r2, o in items_by_rater.items() if r2 != rater and item in o]
            if others:
                xs.append(score)
                ys.append(float(np.mean(others)))
        tau, rho = kendall_tau_b(xs, ys), spearman_rho(xs, ys)
        if tau.value is None or rho.value is None:
            undefined += 1
            continue
        taus.append(tau.value)
        rhos.append(rho.value)
    out: dict[str, Any] = {
        "loo_kendall_tau_b": float(np.mean(taus)) if taus else None,
        "loo_spearman_rho": float(np.mean(rhos)) if rhos else None,
        "raters": len(taus),
        "raters_undefined": undefined,
    }
    if not taus:
        out["note"] = "too few raters with overlapping items"
    return out


def leave_one_rater_out_bootstrap(
    ratings: Mapping[Hashable, Mapping[Hashable, float | None]],
    items: Sequence[Hashable],
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """The leave-one-rater-out means per resample of ``items`` (same pairing rules as
    ``leave_one_rater_out``; raters undefined in a resample are left out of its average)."""
    position = {item: i for i, item in enumerate(items)}
    by_rater = {r: {i: v for i, v in scores.items() if v is not None} for r, scores in ratings.items()}
    per_rater = []
    for rater, own in by_rater.items():
        xs, ys, pos = [], [], []
        for item, score in own.items():
            others = [o[item] for r2, o in by_rater.items() if r2 != rater and item in o]
            if others and item in position:
                xs.append(float(score))
                ys.append(float(np.mean(others)))
                pos.append(position[item])
        if len(xs) >= MIN_PAIRS:
            per_rater.append((np.array(xs), np.array(ys), np.array(pos, dtype=np.int64)))
    taus = np.full((len(per_rater), n_boot), np.nan)
    rhos = np.full((len(per_rater), n_boot), np.nan)
    if per_rater and items:
        for start, w in resample_weights(len(items), n_boot, seed):
            b = w.shape[0]
            for r, (xs, ys, pos) in enumerate(per_rater):
                tau, rho = weighted_correlations(xs, ys, w[:, pos])
                taus[r, start : start + b] = tau
                rhos[r, start : start + b] = rho
    both = np.isfinite(taus) & np.isfinite(rhos)  # a rater counts where both are defined, as above
    with np.errstate(invalid="ignore", divide="ignore"):
        cnt = both.sum(axis=0)
        loo_tau = np.where(cnt > 0, np.where(both, taus, 0).sum(axis=0) / np.maximum(cnt, 1), np.nan)
        loo_rho = np.where(cnt > 0, np.where(both, rhos, 0).sum(axis=0) / np.maximum(cnt, 1), np.nan)
    return {"loo_kendall_tau_b": loo_tau, "loo_spearman_rho": loo_rho}
