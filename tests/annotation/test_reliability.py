"""Krippendorff's alpha (annotation.reliability) against the `krippendorff` package as an oracle.

The oracle takes coders x units reliability data with NaN for a missing value; ours takes units
(one sequence of coders' values each) with None. Both are fed the same data, on random and
edge-case reliability data, for every metric the agreement page and the correlation report use.
"""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pytest

from annotation import reliability
from annotation.agreement import ProjectAgreement
from evaluation import stats

METRICS = ("nominal", "ordinal", "interval", "ratio")
SCALE = (1, 2, 3, 4, 5)
N = None


def oracle(units, metric, domain=None):
    """krippendorff.alpha on the same data (units -> coders x units, None -> NaN)."""
    coders = max(len(u) for u in units)
    data = np.full((coders, len(units)), np.nan)
    for j, unit in enumerate(units):
        for i, v in enumerate(unit):
            if v is not None:
                data[i, j] = v
    return krippendorff.alpha(reliability_data=data, level_of_measurement=metric, value_domain=domain)


def random_units(rng, *, n_units, coders, missing, scale=SCALE):
    return [
        [None if rng.random() < missing else scale[int(rng.integers(len(scale)))] for _ in range(coders)]
        for _ in range(n_units)
    ]


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("seed", range(12))
def test_random_data_with_missing_values_match_the_oracle(metric, seed):
    rng = np.random.default_rng(seed)
    units = random_units(
        rng,
        n_units=int(rng.integers(5, 60)),
        coders=int(rng.integers(2, 6)),
        missing=float(rng.choice([0.0, 0.2, 0.5])),
    )
    expected = oracle(units, metric, SCALE)
    # Our scale from the data, or the fixed 1-5 scale: unseen values add nothing either way.
    assert reliability.krippendorff_alpha(units, metric) == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert reliability.krippendorff_alpha(units, metric, values=SCALE) == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("metric", METRICS)
def test_krippendorffs_published_example_matches_the_oracle(metric):
    # Krippendorff (2011): 4 observers, 12 units, values 1-5, with missing data.
    units = list(
        zip(
            [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
            [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
            [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
            [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
        )
    )
    assert reliability.krippendorff_alpha(units, metric) == pytest.approx(oracle(units, metric), rel=1e-12)


@pytest.mark.parametrize("metric", ["interval", "ratio"])
def test_non_integer_scales_match_the_oracle(metric):
    rng = np.random.default_rng(5)
    scale = (0.5, 1.25, 2.0, 3.5, 7.0)
    units = random_units(rng, n_units=40, coders=3, missing=0.3, scale=scale)
    assert reliability.krippendorff_alpha(units, metric) == pytest.approx(oracle(units, metric, scale), rel=1e-9)


@pytest.mark.parametrize("metric", METRICS)
def test_units_with_one_value_drop_out_as_in_the_oracle(metric):
    units = [(1, N, N), (N, 4, N), (2, 3, N), (3, 3, 4), (5, N, 4), (N, N, N), (1, 2, 1)]
    expected = oracle(units, metric, SCALE)
    assert reliability.krippendorff_alpha(units, metric) == pytest.approx(expected, rel=1e-12)
    pairable = [u for u in units if sum(v is not None for v in u) >= 2]
    assert reliability.krippendorff_alpha(pairable, metric) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("metric", METRICS)
def test_perfect_agreement_is_one_and_all_identical_is_undefined(metric):
    agree = [(1, 1, N), (3, 3, 3), (5, 5), (2, 2)]
    assert reliability.krippendorff_alpha(agree, metric) == pytest.approx(oracle(agree, metric, SCALE)) == 1.0
    # One value everywhere: no expected disagreement. The oracle answers NaN; we answer None.
    same = [(4, 4), (4, 4, 4), (4, N)]
    with np.errstate(invalid="ignore"):
        assert math.isnan(oracle(same, metric, SCALE))
    assert reliability.krippendorff_alpha(same, metric) is None
    assert stats.krippendorff_alpha(same, metric=metric).value is None


def test_no_pairable_unit_is_undefined_where_the_oracle_refuses():
    units = [(1, N), (N, 4), (N, N)]
    with pytest.raises(ValueError, match="at least two coders"):
        oracle(units, "ordinal", SCALE)
    assert reliability.krippendorff_alpha(units, "ordinal") is None
    alpha = stats.krippendorff_alpha(units)
    assert (alpha.value, alpha.n, alpha.note) == (None, 0, "too few pairable values")


@pytest.mark.parametrize("metric", ["nominal", "ordinal", "interval"])
def test_the_correlation_reports_alpha_is_the_same_alpha(metric):
    rng = np.random.default_rng(11)
    units = random_units(rng, n_units=30, coders=3, missing=0.25)
    alpha = stats.krippendorff_alpha(units, metric=metric)
    assert alpha.value == reliability.krippendorff_alpha(units, metric, values=SCALE)
    assert alpha.value == pytest.approx(oracle(units, metric, SCALE), rel=1e-9)
    assert alpha.n == sum(len([v for v in u if v is not None]) for u in units if sum(v is not None for v in u) >= 2)


def test_the_agreement_pages_streamed_alpha_matches_the_oracle():
    rng = np.random.default_rng(2)
    units = random_units(rng, n_units=50, coders=4, missing=0.4)
    stream = ProjectAgreement("rating", criteria=("object",))
    for unit in units:
        stream.add_item([(f"r{i}", {"scores": {"object": v}}) for i, v in enumerate(unit)])
    assert stream.summary()["criteria"]["object"]["alpha"] == round(oracle(units, "ordinal", SCALE), 4)


def test_a_fixed_scale_refuses_a_value_outside_it():
    with pytest.raises(ValueError, match="not on the scale"):
        reliability.krippendorff_alpha([(1, 7)], values=SCALE)


def test_the_matrix_grows_in_order_and_is_additive_over_units():
    streamed = reliability.CoincidenceMatrix()
    for unit in [(5, 3), (1, 3, 3), (2, N)]:
        streamed.add_unit(unit)
    assert streamed.values == [1, 3, 5]  # 2 sits in an unpairable unit: not on the scale
    fixed = reliability.coincidence_matrix([(5, 3), (1, 3, 3)], SCALE)
    assert streamed[(3, 3)] == fixed[(3, 3)] == 1.0 and streamed[(1, 3)] == fixed[(1, 3)] == 1.0
    assert streamed[(3, 5)] == 1.0 and streamed[(2, 2)] == 0.0
    assert streamed.pairable_values == fixed.pairable_values == 5.0
