"""Paired comparisons of models against a baseline on the same items (docs/statistics.md,
"Clustered errors and paired comparisons"). Plain Python + numpy/SciPy, no Django.

Two models answered the same units (items; for a board of generators, the prompts they share), so
their difference is judged on the per-unit differences, not on two independent intervals:
- the difference of the means with a paired bootstrap interval: units resampled together, whole
  clusters at a time when the protocol groups its items (protocols/kit/clustered.py);
- binary scores (every unit 0 or 1 for both): the exact McNemar test, a two-sided binomial test on
  the discordant units (one right, the other wrong) with p = 1/2; other scores: the paired t-test;
- Holm's step-down adjustment of the p values across all models compared with the one baseline,
  and a flag where the adjusted p is below the level.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from .bootstrap import N_BOOT, percentile_ci

LEVEL = 0.05  # significance level of the Holm-adjusted p values


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-adjusted p values, in the given order; None stays None and does not count in m.

    The k-th smallest of m p values becomes max over j ≤ k of min(1, (m − j + 1) · p_(j)).
    """
    present = [(p, i) for i, p in enumerate(pvalues) if p is not None]
    m = len(present)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(present)):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def is_binary(*arrays: np.ndarray) -> bool:
    return all(bool(np.isin(a, (0.0, 1.0)).all()) for a in arrays)


def mcnemar_exact(model: np.ndarray, baseline: np.ndarray) -> tuple[int, int, float]:
    """(units the model gets right and the baseline wrong, the reverse, two-sided exact p)."""
    better = int(((model == 1) & (baseline == 0)).sum())
    worse = int(((model == 0) & (baseline == 1)).sum())
    if better + worse == 0:
        return better, worse, 1.0
    return better, worse, float(stats.binomtest(better, better + worse, 0.5).pvalue)


def paired_t(model: np.ndarray, baseline: np.ndarray) -> float | None:
    """Two-sided p of the paired t-test; None below two units. Differences without spread: p = 1
    when they are all 0, else 0 (the t statistic is infinite)."""
    diff = model - baseline
    if diff.size < 2:
        return None
    if np.all(diff == diff[0]):
        return 1.0 if diff[0] == 0 else 0.0
    return float(stats.ttest_rel(model, baseline).pvalue)


def bootstrap_difference(
    diff: np.ndarray, codes: np.ndarray, *, n_boot: int = N_BOOT, seed: int = 0
) -> list[float] | None:
    """Percentile interval of the mean difference, resampling clusters (``codes``) with replacement;
    a resample's mean is the sum of its clusters' differences over their units."""
    if diff.size == 0:
        return None
    _, inverse = np.unique(codes, return_inverse=True)
    inverse = inverse.reshape(-1)
    c = int(inverse.max()) + 1
    sums = np.bincount(inverse, weights=diff, minlength=c)
    sizes = np.bincount(inverse, minlength=c).astype(np.float64)
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(c, np.full(c, 1.0 / c), size=n_boot).astype(np.float64)
    return percentile_ci((draws @ sums) / (draws @ sizes))


def compare(
    model: Sequence[float] | np.ndarray,
    baseline: Sequence[float] | np.ndarray,
    codes: Sequence[int] | np.ndarray,
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> dict[str, Any]:
    """One model against the baseline on paired unit scores (same order; ``codes``: each unit's cluster).

    {"n", "clusters", "difference", "ci", "test", "p"} (+ "discordant": [model better, baseline
    better] for McNemar); difference = model − baseline on the scores' own scale.
    """
    a = np.asarray(model, dtype=np.float64)
    b = np.asarray(baseline, dtype=np.float64)
    codes = np.asarray(codes, dtype=np.int64)
    n = int(a.size)
    out: dict[str, Any] = {
        "n": n,
        "clusters": int(np.unique(codes).size),
        "difference": None,
        "ci": None,
        "test": None,
        "p": None,
    }
    if n == 0:
        return out
    out["difference"] = float((a - b).mean())
    out["ci"] = bootstrap_difference(a - b, codes, n_boot=n_boot, seed=seed)
    if is_binary(a, b):
        better, worse, p = mcnemar_exact(a, b)
        out.update(test="mcnemar_exact", p=p, discordant=[better, worse])
    else:
        out.update(test="paired_t", p=paired_t(a, b))
    return out


def adjust(comparisons: list[dict[str, Any]], *, level: float = LEVEL) -> list[dict[str, Any]]:
    """Add "p_holm" and "significant" (p_holm < level) to each comparison, adjusted across all of them."""
    for entry, adjusted in zip(comparisons, holm([c["p"] for c in comparisons])):
        entry["p_holm"] = adjusted
        entry["significant"] = adjusted is not None and adjusted < level
    return comparisons
