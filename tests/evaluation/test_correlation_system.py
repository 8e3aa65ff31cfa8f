"""System-level and human-reference agreement: point values equal SciPy on generator means, and
every bootstrap interval equals the naive one (recompute from the resampled items)."""

import numpy as np
import pytest
from scipy import stats as sps

from evaluation import correlation, stats
from protocols.kit.bootstrap import percentile_ci
from protocols.oscbench import CRITERIA

GENERATORS = [g for g in ("g1", "g2", "g3", "g4", "g5") for _ in range(6)]


def vectors(seed=0):
    rng = np.random.default_rng(seed)
    n = len(GENERATORS)
    level = np.array([{"g1": 4, "g2": 3, "g3": 3, "g4": 2, "g5": 1}[g] for g in GENERATORS], dtype=float)
    human, judge = {}, {}
    for c in CRITERIA:
        h = np.clip(np.rint(level + rng.normal(scale=1.0, size=n)), 1, 5) + rng.integers(0, 3, size=n) / 3
        j = np.clip(np.rint(level + rng.normal(scale=1.2, size=n)), 1, 5)
        hl, jl = list(h), list(j)
        if c in ("subject", "scene"):
            for i in range(0, n, 4):
                hl[i] = None  # N/A: missing, never 0
                jl[i + 1 if i + 1 < n else i] = None
        human[c], judge[c] = hl, jl
    return human, judge


def gen_means(values, generators):
    out = {}
    for g in sorted(set(generators)):
        vals = [v for v, gg in zip(values, generators) if gg == g and v is not None]
        out[g] = float(np.mean(vals)) if vals else None
    return out


def naive_system(human, judge, generators, criterion=None):
    """SciPy tau-b over generators defined on both sides (NaN when fewer than 3)."""
    names = sorted(set(generators))
    if criterion is not None:
        h, j = gen_means(human[criterion], generators), gen_means(judge[criterion], generators)
    else:
        hc = [gen_means(human[c], generators) for c in CRITERIA]
        jc = [gen_means(judge[c], generators) for c in CRITERIA]
        h = {g: (np.mean(v) if (v := [m[g] for m in hc if m[g] is not None]) else None) for g in names}
        j = {g: (np.mean(v) if (v := [m[g] for m in jc if m[g] is not None]) else None) for g in names}
    keep = [g for g in names if h[g] is not None and j[g] is not None]
    if len(keep) < 3:
        return np.nan
    return sps.kendalltau([h[g] for g in keep], [j[g] for g in keep]).statistic


def test_system_tau_overall_and_per_criterion_with_n_and_naive_bootstrap_ci():
    human, judge = vectors()
    n_boot = 60
    out = correlation.system_agreement(human, judge, GENERATORS, n_boot=n_boot, seed=0)
    assert out["overall"]["n"] == 5
    assert out["overall"]["kendall_tau_b"] == pytest.approx(naive_system(human, judge, GENERATORS), abs=1e-12)
    for c in CRITERIA:
        assert out["per_criterion"][c]["n"] == 5
        assert out["per_criterion"][c]["kendall_tau_b"] == pytest.approx(
            naive_system(human, judge, GENERATORS, c), abs=1e-12
        )
    # Naive bootstrap: rebuild each resample's items and recompute the generator rankings from scratch.
    naive = {"overall": [], **{c: [] for c in CRITERIA}}
    for _, w in stats.resample_weights(len(GENERATORS), n_boot, 0):
        for row in w:
            idx = np.repeat(np.arange(len(GENERATORS)), row)
            gens = [GENERATORS[i] for i in idx]
            h = {c: [human[c][i] for i in idx] for c in CRITERIA}
            j = {c: [judge[c][i] for i in idx] for c in CRITERIA}
            naive["overall"].append(naive_system(h, j, gens))
            for c in CRITERIA:
                naive[c].append(naive_system(h, j, gens, c))
    assert np.isfinite(naive["overall"]).sum() > 50
    expected = percentile_ci(np.array(naive["overall"]))
    assert out["overall"]["ci"] == pytest.approx(expected, abs=1e-12)
    for c in CRITERIA:
        expected = percentile_ci(np.array(naive[c], dtype=float))
        assert out["per_criterion"][c]["ci"] == pytest.approx(expected, abs=1e-12), c


def test_human_reference_intervals_equal_the_naive_bootstrap():
    rng = np.random.default_rng(2)
    items = [f"v{i}" for i in range(25)]
    ratings = {r: {} for r in ("r1", "r2", "r3", "r4")}
    for i, item in enumerate(items):
        base = 1 + i % 5
        for r in rng.choice(list(ratings), size=3, replace=False):  # 3 of 4 raters per video
            v = int(np.clip(base + rng.integers(-1, 2), 1, 5))
            ratings[r][item] = None if rng.random() < 0.05 else v
    loo = stats.leave_one_rater_out_bootstrap(ratings, items, n_boot=40, seed=0)
    units = [[ratings[r].get(item) for r in ratings] for item in items]
    alpha = stats.krippendorff_alpha_bootstrap(units, n_boot=40, seed=0)
    naive_tau, naive_rho, naive_alpha = [], [], []
    for _, w in stats.resample_weights(len(items), 40, 0):
        for row in w:
            idx = np.repeat(np.arange(len(items)), row)
            copies = {
                r: {(items[i], k): ratings[r][items[i]] for k, i in enumerate(idx) if items[i] in ratings[r]}
                for r in ratings
            }
            ref = stats.leave_one_rater_out(copies)
            naive_tau.append(np.nan if ref["loo_kendall_tau_b"] is None else ref["loo_kendall_tau_b"])
            naive_rho.append(np.nan if ref["loo_spearman_rho"] is None else ref["loo_spearman_rho"])
            a = stats.krippendorff_alpha([units[i] for i in idx])
            naive_alpha.append(np.nan if a.value is None else a.value)
    assert np.allclose(loo["loo_kendall_tau_b"], naive_tau, atol=1e-12, equal_nan=True)
    assert np.allclose(loo["loo_spearman_rho"], naive_rho, atol=1e-12, equal_nan=True)
    assert np.allclose(alpha, naive_alpha, atol=1e-12, equal_nan=True)
    assert np.isfinite(loo["loo_kendall_tau_b"]).all()
