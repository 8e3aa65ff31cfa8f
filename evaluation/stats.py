"""Agreement statistics: Kendall tau-b, Spearman rho, bootstrap intervals, Krippendorff's alpha,
leave-one-rater-out human reference. Plain numpy/SciPy, no Django.

Missing values (None / NaN) drop the pair; they never become 0. A statistic that cannot be
computed (too few pairs, a constant vector) is returned as value None with a ``note`` saying why.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Mapping, Sequence

import numpy as np
from scipy import stats as sps

MIN_PAIRS = 3
N_BOOT = 1000


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


# --- vectorized forms for the bootstrap (same definitions, checked against SciPy in tests) ---

def tau_b_from_signs(sx: np.ndarray, sy: np.ndarray) -> np.ndarray:
    """tau-b over the last two axes of pairwise sign matrices: sum(sx*sy) / sqrt(sum(sx^2) sum(sy^2)).

    Pairs tied in x drop out of sum(sx^2) (the "not tied in x" count P+Q+U), pairs tied in y out
    of sum(sy^2), and pairs tied in both out of everything, exactly as tau-b defines them.
    """
    num = (sx * sy).sum(axis=(-2, -1))
    den = np.sqrt((sx * sx).sum(axis=(-2, -1)) * (sy * sy).sum(axis=(-2, -1)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def bootstrap_correlations(
    x: Sequence[Any], y: Sequence[Any], *, n_boot: int = N_BOOT, seed: int = 0, min_pairs: int = MIN_PAIRS, max_cells: int = 8_000_000
) -> dict[str, np.ndarray]:
    """Bootstrap samples of tau-b and rho, resampling paired items; NaN for degenerate resamples."""
    xs, ys = paired(x, y)
    n = xs.size
    out = {"kendall_tau_b": np.full(n_boot, np.nan), "spearman_rho": np.full(n_boot, np.nan)}
    if n < min_pairs:
        return out
    rng = np.random.default_rng(seed)
    idx_all = rng.integers(0, n, size=(n_boot, n))
    # Spearman: Pearson correlation of average ranks, all resamples at once.
    rx = sps.rankdata(xs[idx_all], axis=1)
    ry = sps.rankdata(ys[idx_all], axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        den = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
        out["spearman_rho"] = np.where(den > 0, (rx * ry).sum(axis=1) / np.where(den > 0, den, 1), np.nan)
    sx_full = np.sign(xs[:, None] - xs[None, :])
    sy_full = np.sign(ys[:, None] - ys[None, :])
    block = max(1, max_cells // (n * n))
    for start in range(0, n_boot, block):
        idx = idx_all[start : start + block]
        sx = sx_full[idx[:, :, None], idx[:, None, :]]
        sy = sy_full[idx[:, :, None], idx[:, None, :]]
        out["kendall_tau_b"][start : start + block] = tau_b_from_signs(sx, sy)
    return out


def percentile_ci(samples: np.ndarray, level: float = 0.95) -> list[float] | None:
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return None
    a = (1 - level) / 2
    lo, hi = np.quantile(finite, [a, 1 - a])
    return [float(lo), float(hi)]


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

def coincidence_matrix(units: Sequence[Sequence[Any]], values: Sequence[Any]) -> np.ndarray:
    """Coincidence matrix o[c, k] over the given ordered value scale.

    ``units``: per unit (item) the values given by its raters (None / NaN = missing). Units with
    fewer than two values are not pairable and drop out. Each ordered pair of values from
    different raters in a unit of m values adds 1 / (m - 1).
    """
    index = {v: i for i, v in enumerate(values)}
    k = len(values)
    o = np.zeros((k, k))
    for unit in units:
        vals = [v for v in unit if v is not None and not (isinstance(v, float) and np.isnan(v))]
        m = len(vals)
        if m < 2:
            continue
        counts = np.zeros(k)
        for v in vals:
            counts[index[int(v) if isinstance(v, float) and float(v).is_integer() else v]] += 1
        pair = np.outer(counts, counts) - np.diag(counts)
        o += pair / (m - 1)
    return o


def _delta2(values: Sequence[Any], n_c: np.ndarray, metric: str) -> np.ndarray:
    k = len(values)
    if metric == "nominal":
        return 1.0 - np.eye(k)
    if metric == "interval":
        v = np.asarray(values, dtype=np.float64)
        return (v[:, None] - v[None, :]) ** 2
    if metric == "ordinal":
        d = np.zeros((k, k))
        cum = np.concatenate([[0.0], np.cumsum(n_c)])
        for c in range(k):
            for j in range(k):
                lo, hi = min(c, j), max(c, j)
                d[c, j] = (cum[hi + 1] - cum[lo] - (n_c[c] + n_c[j]) / 2) ** 2
        return d
    raise ValueError(f"unknown metric {metric!r}")


def krippendorff_alpha(
    units: Sequence[Sequence[Any]], *, values: Sequence[Any] = (1, 2, 3, 4, 5), metric: str = "ordinal"
) -> Correlation:
    """Krippendorff's alpha from units x raters data (missing allowed), via the coincidence matrix.

    alpha = 1 - (n - 1) * sum(o_ck * d_ck) / sum(n_c * n_k * d_ck). ``n`` of the result is the
    number of pairable values.
    """
    o = coincidence_matrix(units, values)
    n_c = o.sum(axis=1)
    n = float(n_c.sum())
    if n < 2:
        return Correlation(None, int(n), "too few pairable values")
    d = _delta2(values, n_c, metric)
    observed = float((o * d).sum())
    expected = float((np.outer(n_c, n_c) * d).sum())
    if expected == 0:
        return Correlation(None, int(round(n)), "undefined: all values identical")
    return Correlation(1.0 - (n - 1) * observed / expected, int(round(n)))


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
