"""The bootstrap's shared settings and its percentile interval, for every figure that prints one:
leaderboard metrics (each protocol's scoring), correlations, leave-one-rater-out and alpha
(evaluation.stats, evaluation.correlation). Plain numpy, no Django.

The resamples themselves are drawn where their statistic is computed (seeded there); what is
shared is how many are drawn and how an interval is read from them.
"""

from __future__ import annotations

import numpy as np

N_BOOT = 1000  # resamples per interval, unless a caller asks for another number
CI_LEVEL = 0.95  # the intervals are 95 % percentile intervals


def percentile_ci(samples: np.ndarray, level: float = CI_LEVEL) -> list[float] | None:
    """[lo, hi]: the percentile interval of bootstrap samples (NaN samples dropped); None when none is finite."""
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return None
    alpha = (1 - level) / 2
    lo, hi = np.quantile(finite, [alpha, 1 - alpha])
    return [float(lo), float(hi)]
