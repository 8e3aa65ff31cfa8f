"""Correlation figures equal SciPy's on the same vectors; N/A drops pairs; alpha matches the literature."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from evaluation import stats

X = [1, 2, 2, 3, 4, 4, 4, 5, None, 3, 1, 2]
Y = [2.0, 2.0, 3.0, 3.0, 4.5, 4.0, None, 5.0, 1.0, 2.5, 1.0, 2.0]


def _scipy_pairs():
    keep = [i for i in range(len(X)) if X[i] is not None and Y[i] is not None]
    return [X[i] for i in keep], [Y[i] for i in keep]


def test_kendall_and_spearman_equal_scipy_with_ties_and_na():
    xs, ys = _scipy_pairs()
    tau = stats.kendall_tau_b(X, Y)
    rho = stats.spearman_rho(X, Y)
    assert tau.n == rho.n == 10
    assert tau.value == sps.kendalltau(xs, ys, variant="b").statistic
    assert rho.value == sps.spearmanr(xs, ys).statistic


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_point_estimates_equal_scipy_on_tied_vectors_with_na(seed):
    rng = np.random.default_rng(seed)
    judge = rng.integers(1, 6, size=80).astype(object)
    human = (rng.integers(3, 16, size=80) / 3).astype(object)
    judge[rng.random(80) < 0.1] = None
    human[rng.random(80) < 0.1] = None
    keep = [i for i in range(80) if judge[i] is not None and human[i] is not None]
    xs, ys = [float(judge[i]) for i in keep], [float(human[i]) for i in keep]
    assert stats.kendall_tau_b(list(judge), list(human)).value == sps.kendalltau(xs, ys).statistic
    assert stats.spearman_rho(list(judge), list(human)).value == sps.spearmanr(xs, ys).statistic


def naive_bootstrap(x, y, n_boot, seed):
    """SciPy on every resampled vector, from the same resample draws."""
    xs, ys = stats.paired(x, y)
    taus, rhos = [], []
    for _, idx in stats.resample_indices(xs.size, n_boot, seed):
        for r in idx:
            taus.append(sps.kendalltau(xs[r], ys[r]).statistic)
            rhos.append(sps.spearmanr(xs[r], ys[r]).statistic)
    return np.array(taus), np.array(rhos)


@pytest.mark.parametrize("table_max_cells", [stats.TABLE_MAX_CELLS, 0])  # contingency table / O(n log n) fallback
def test_fast_bootstrap_equals_naive_bootstrap_resample_by_resample(table_max_cells):
    x = X + [5, 5, 1, 3, 2]
    y = Y + [4.0, 5.0, 1.5, None, 2.0]
    fast = stats.bootstrap_correlations(x, y, n_boot=300, seed=4, table_max_cells=table_max_cells)
    taus, rhos = naive_bootstrap(x, y, 300, 4)
    # Degenerate resamples (a constant side) are NaN on both sides.
    assert np.array_equal(np.isnan(fast["kendall_tau_b"]), np.isnan(taus))
    assert np.array_equal(np.isnan(fast["spearman_rho"]), np.isnan(rhos))
    ok = ~np.isnan(taus)
    assert np.allclose(fast["kendall_tau_b"][ok], taus[ok], rtol=0, atol=1e-12)
    assert np.allclose(fast["spearman_rho"][ok], rhos[ok], rtol=0, atol=1e-12)
    assert ok.sum() > 250


def test_table_bootstrap_handles_few_values_at_scale():
    # Judge scores 1-5 against means of three raters: the contingency-table path, not n x n pairs.
    rng = np.random.default_rng(3)
    human = rng.integers(1, 6, size=(3000, 3)).mean(axis=1)
    judge = np.clip(np.rint(human + rng.normal(scale=0.7, size=3000)), 1, 5)
    fast = stats.bootstrap_correlations(judge, human, n_boot=20, seed=9)
    taus, rhos = naive_bootstrap(judge, human, 20, 9)
    assert np.allclose(fast["kendall_tau_b"], taus, rtol=0, atol=1e-12)
    assert np.allclose(fast["spearman_rho"], rhos, rtol=0, atol=1e-12)


def test_too_few_and_constant_say_so_instead_of_zero():
    few = stats.kendall_tau_b([1, None, 3], [2, 2, None])
    assert few.value is None and few.n == 1 and "too few" in few.note
    const = stats.spearman_rho([1, 2, 3, 4], [3, 3, 3, 3])
    assert const.value is None and "constant" in const.note
    result = stats.correlation_with_ci([1, 2], [1, 2])
    assert result["kendall_tau_b"] is None and result["ci"] is None and "too few" in result["note"]


def test_correlation_with_ci_brackets_the_point_estimate():
    rng = np.random.default_rng(5)
    x = rng.normal(size=60)
    y = x + rng.normal(scale=0.8, size=60)
    r = stats.correlation_with_ci(list(x), list(y), n_boot=400, seed=1)
    assert r["n"] == 60
    assert r["ci"]["kendall_tau_b"][0] < r["kendall_tau_b"] < r["ci"]["kendall_tau_b"][1]
    assert r["ci"]["spearman_rho"][0] < r["spearman_rho"] < r["ci"]["spearman_rho"][1]
    assert r == stats.correlation_with_ci(list(x), list(y), n_boot=400, seed=1)


@pytest.mark.parametrize("metric,expected", [("nominal", 0.743), ("interval", 0.849), ("ordinal", 0.815)])
def test_krippendorff_alpha_matches_published_example(metric, expected):
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 observers, 12 units.
    a = [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None]
    b = [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3]
    c = [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None]
    d = [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]
    alpha = stats.krippendorff_alpha(list(zip(a, b, c, d)), metric=metric)
    assert round(alpha.value, 3) == expected
    assert alpha.n == 40


def test_krippendorff_alpha_without_pairable_values_says_so():
    alpha = stats.krippendorff_alpha([[3, None], [None, 4]])
    assert alpha.value is None and alpha.note


def test_leave_one_rater_out_matches_manual_computation():
    ratings = {
        "r1": {"i1": 1, "i2": 2, "i3": 4, "i4": 5, "i5": None},
        "r2": {"i1": 2, "i2": 2, "i3": 5, "i4": 4, "i5": 3},
        "r3": {"i1": 1, "i2": 3, "i3": 4, "i4": 5, "i5": 1},
    }
    out = stats.leave_one_rater_out(ratings)
    taus, rhos = [], []
    for r in ratings:
        xs, ys = [], []
        for item, score in ratings[r].items():
            others = [ratings[o][item] for o in ratings if o != r and ratings[o][item] is not None]
            if score is not None and others:
                xs.append(score)
                ys.append(sum(others) / len(others))
        taus.append(sps.kendalltau(xs, ys).statistic)
        rhos.append(sps.spearmanr(xs, ys).statistic)
    assert math.isclose(out["loo_kendall_tau_b"], float(np.mean(taus)), rel_tol=1e-12)
    assert math.isclose(out["loo_spearman_rho"], float(np.mean(rhos)), rel_tol=1e-12)
    assert out["raters"] == 3


def test_rank_respects_intervals_and_never_inverts_values():
    from evaluation.ranking import interval_ranks

    values = [60.0, 58.0, 40.0, None, 10.0]
    cis = [[55.0, 65.0], [50.0, 62.0], [35.0, 45.0], None, [5.0, 54.0]]
    # 60 and 58 overlap: both rank 1; 40 lies below both: rank 3. 10's interval overlaps 58's,
    # but 10 must not rank above 40 (a higher value): it shares rank 3.
    assert interval_ranks(values, cis) == [1, 1, 3, None, 3]
    # Overlapping intervals share a rank even when the lower value's interval is wider.
    assert interval_ranks([10.0, 40.0], [[5.0, 54.0], [35.0, 45.0]]) == [1, 1]
    # Separated intervals order the rows; equal values overlapping a separated pair.
    assert interval_ranks([80.0, 50.0, 50.0], [[75.0, 85.0], [45.0, 55.0], [20.0, 90.0]]) == [1, 2, 1]


def test_tau_b_from_signs_equals_scipy_on_small_vectors():
    rng = np.random.default_rng(0)
    x = rng.integers(1, 4, size=(6, 9)).astype(float)
    y = x + rng.integers(-1, 2, size=(6, 9))
    sx = np.sign(x[:, :, None] - x[:, None, :])
    sy = np.sign(y[:, :, None] - y[:, None, :])
    ours = stats.tau_b_from_signs(sx, sy)
    for b in range(6):
        assert math.isclose(ours[b], sps.kendalltau(x[b], y[b]).statistic, rel_tol=1e-12)
