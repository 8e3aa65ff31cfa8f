"""How many items (and raters) a study needs, from a pilot's scores (docs/statistics.md, "Planning a
study: items and raters needed"). Plain Python + numpy, no Django.

A pilot release measures, per model and metric, the spread of the item scores and how much the
items of one cluster move together (the design effect, protocols/kit/clustered.py). A mean over n
items in clusters of the pilot's size has the standard error √(DE · sd² / n), so:

- **Half-width.** The 95 % interval's half-width is z · √(DE · sd² / n), z = 1.96. For a target
  half-width h: n = (z · sd / h)² · DE items, rounded up; clusters = n / (the pilot's mean
  cluster size), rounded up. At the pilot's own n this is the same as
  n_pilot · (half-width now / h)², half-width now = z · se_clustered.
- **Raters.** Where an item's score is the mean of k raters' scores, its variance is
  σ²_item + σ²_rater / k: σ²_rater, the raters' spread on one item (pooled within items rated
  at least twice), and σ²_item, the spread of the items' true scores (the variance of the item
  means less σ²_rater times the mean of 1/k). With k raters: n = (z / h)² · DE ·
  (σ²_item + σ²_rater / k) items and n · k ratings.
- **Paired difference.** Two models scored on the same units differ by d_u per unit; to detect
  a true difference D with a two-sided test at level α and power 1 − β:
  n = ((z_{1−α/2} + z_{1−β}) · sd_d / D)² · DE_d units (1.96 + 0.84 at α = 0.05 and 80 % power),
  sd_d and DE_d the spread and design effect of the pilot's differences. The same normal
  approximation covers right/wrong scores (McNemar: d_u is −1, 0 or 1).

The design effect is taken at least 1: a pilot's estimate below 1 is chance (clusters cannot make
a mean more precise than independent items under the model), and assuming less than 1 would
promise a precision the study will not reach. Where a pilot has fewer than two clusters, the
design effect cannot be measured and is taken as 1 (the result says so).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

from . import clustered

LEVEL = 0.95  # the interval whose half-width is planned
ALPHA = 0.05  # two-sided level of the paired test
POWER = 0.80  # the chance of detecting the difference when it is there
RATERS = (1, 2, 3, 4, 5)  # raters per item the rater plan lists


def z_two_sided(level: float) -> float:
    """The normal quantile z with P(|Z| ≤ z) = level (1.959964 for 0.95)."""
    return NormalDist().inv_cdf(0.5 + level / 2)


def z_power(power: float) -> float:
    """The normal quantile of ``power`` (0.841621 for 0.80)."""
    return NormalDist().inv_cdf(power)


def _ceil(value: float) -> int:
    # 1e-9 of slack: (z·sd/h)² computed as 16.000000000000004 needs 16 items, not 17.
    return max(1, math.ceil(value - 1e-9))


def items_for_half_width(*, sd: float, half_width: float, design_effect: float = 1.0, level: float = LEVEL) -> int:
    """n = ⌈(z · sd / h)² · max(DE, 1)⌉: items for a ``level`` interval of half-width ``half_width``."""
    _check_positive(half_width=half_width)
    z = z_two_sided(level)
    return _ceil((z * sd / half_width) ** 2 * max(design_effect, 1.0))


def items_for_difference(
    *, sd_difference: float, difference: float, design_effect: float = 1.0, alpha: float = ALPHA, power: float = POWER
) -> int:
    """n = ⌈((z_{1−α/2} + z_power) · sd_d / D)² · max(DE, 1)⌉: units to detect ``difference``."""
    _check_positive(difference=difference)
    z = z_two_sided(1 - alpha) + z_power(power)
    return _ceil((z * sd_difference / difference) ** 2 * max(design_effect, 1.0))


def detectable_difference(
    *, sd_difference: float, n: int, design_effect: float = 1.0, alpha: float = ALPHA, power: float = POWER
) -> float:
    """The difference the pilot's n units detect with that power: (z_{1−α/2} + z_power) · sd_d · √(DE / n)."""
    z = z_two_sided(1 - alpha) + z_power(power)
    return z * sd_difference * math.sqrt(max(design_effect, 1.0) / n)


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name}: expected a number above 0, found {value!r}")


def _design_effect(errors: dict[str, Any]) -> tuple[float, str | None]:
    """The design effect the plan uses, with a note where it is not the measured one."""
    measured = errors["design_effect"]
    if measured is None:
        return 1.0, "fewer than two clusters: the design effect cannot be measured and is taken as 1"
    if measured < 1:
        return 1.0, f"the measured design effect {measured:.3f} is below 1 and is taken as 1"
    return measured, None


def _spread(errors: dict[str, Any], out: dict[str, Any], *, unit: str, constant: str) -> float | None:
    """The pilot's sd (0 when every value is equal), or None below two values; where the pilot cannot
    tell, ``out["note"]`` says why (fewer than two ``unit``s, or ``constant``)."""
    n = errors["n"]
    if errors["se"] is None:
        out["note"] = f"{n} {unit}{'s' if n != 1 else ''}: at least two are needed to measure the spread"
        return None
    sd = errors["se"] * math.sqrt(n)
    if sd == 0:
        out["note"] = constant
    return sd


def plan_mean(
    scores: Sequence[float] | np.ndarray,
    codes: Sequence[int] | np.ndarray,
    *,
    half_width: float,
    level: float = LEVEL,
) -> dict[str, Any]:
    """The plan for one mean of item scores (on the scale ``half_width`` is given in), grouped by
    cluster ``codes``: {"n", "clusters", "cluster_size", "sd", "design_effect", "design_effect_used",
    "half_width_now", "items_needed", "clusters_needed", "note"?}. Where the pilot cannot say
    (fewer than two scores, or no spread), "items_needed" is None and "note" says why."""
    _check_positive(half_width=half_width)
    errors = clustered.standard_errors(scores, codes)
    n, clusters = errors["n"], errors["clusters"]
    out: dict[str, Any] = {
        "n": n,
        "clusters": clusters,
        "cluster_size": n / clusters if clusters else None,
        "sd": None,
        "design_effect": errors["design_effect"],
        "design_effect_used": None,
        "half_width_now": None,
        "items_needed": None,
        "clusters_needed": None,
    }
    sd = _spread(
        errors,
        out,
        unit="score",
        constant="every pilot score is the same: the spread cannot be measured from this pilot",
    )
    out["sd"] = sd
    if not sd:
        return out
    used, note = _design_effect(errors)
    out["design_effect_used"] = used
    out["half_width_now"] = z_two_sided(level) * math.sqrt(used * sd * sd / n)
    out["items_needed"] = items_for_half_width(sd=sd, half_width=half_width, design_effect=used, level=level)
    out["clusters_needed"] = math.ceil(out["items_needed"] / out["cluster_size"] - 1e-9)
    if note:
        out["note"] = note
    return out


def variance_components(rater_scores: Sequence[Sequence[float]]) -> dict[str, Any]:
    """Per item, its raters' scores -> {"items", "rated_twice", "mean_raters", "rater_variance",
    "item_variance"} (one-way random effects by moments): rater_variance = Σ_i Σ_j (y_ij − ȳ_i)² /
    Σ_i (k_i − 1) over items rated at least twice; item_variance = max(0, var(ȳ_i) − rater_variance ·
    mean(1 / k_i)), var with n − 1. A variance that cannot be measured is None."""
    groups = [np.asarray(s, dtype=np.float64) for s in rater_scores if len(s)]
    out: dict[str, Any] = {
        "items": len(groups),
        "rated_twice": sum(1 for g in groups if g.size >= 2),
        "mean_raters": float(np.mean([g.size for g in groups])) if groups else None,
        "rater_variance": None,
        "item_variance": None,
    }
    dof = sum(g.size - 1 for g in groups)
    if dof == 0 or len(groups) < 2:
        return out
    within = sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / dof
    means = np.array([g.mean() for g in groups])
    between = float(means.var(ddof=1)) - within * float(np.mean([1.0 / g.size for g in groups]))
    out["rater_variance"] = within
    out["item_variance"] = max(0.0, between)
    return out


def plan_raters(
    components: dict[str, Any],
    *,
    half_width: float,
    design_effect: float = 1.0,
    raters: Sequence[int] = RATERS,
    level: float = LEVEL,
) -> list[dict[str, Any]]:
    """[{"raters": k, "items_needed", "ratings_needed"}] for each k of ``raters`` (empty when the
    components are unknown): n = ⌈(z / h)² · max(DE, 1) · (σ²_item + σ²_rater / k)⌉."""
    _check_positive(half_width=half_width)
    if components["rater_variance"] is None:
        return []
    z = z_two_sided(level)
    plan = []
    for k in raters:
        variance = components["item_variance"] + components["rater_variance"] / k
        n = _ceil((z / half_width) ** 2 * max(design_effect, 1.0) * variance) if variance > 0 else 1
        plan.append({"raters": k, "items_needed": n, "ratings_needed": n * k})
    return plan


def plan_difference(
    model: Sequence[float] | np.ndarray,
    baseline: Sequence[float] | np.ndarray,
    codes: Sequence[int] | np.ndarray,
    *,
    difference: float,
    alpha: float = ALPHA,
    power: float = POWER,
) -> dict[str, Any]:
    """The paired plan for one model against the baseline on the same units (same order, each
    unit's cluster in ``codes``): {"n", "clusters", "difference_now", "sd_difference",
    "design_effect", "design_effect_used", "detectable_now", "units_needed", "note"?}."""
    _check_positive(difference=difference)
    d = np.asarray(model, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
    errors = clustered.standard_errors(d, codes)
    n = errors["n"]
    out: dict[str, Any] = {
        "n": n,
        "clusters": errors["clusters"],
        "difference_now": float(d.mean()) if n else None,
        "sd_difference": None,
        "design_effect": errors["design_effect"],
        "design_effect_used": None,
        "detectable_now": None,
        "units_needed": None,
    }
    sd = _spread(
        errors, out, unit="shared unit", constant="the two rows differ by the same amount on every unit: no spread"
    )
    out["sd_difference"] = sd
    if not sd:
        return out
    used, note = _design_effect(errors)
    out["design_effect_used"] = used
    out["detectable_now"] = detectable_difference(sd_difference=sd, n=n, design_effect=used, alpha=alpha, power=power)
    out["units_needed"] = items_for_difference(
        sd_difference=sd, difference=difference, design_effect=used, alpha=alpha, power=power
    )
    if note:
        out["note"] = note
    return out
