"""OSCBench video-rating scoring (docs/protocols/oscbench.md). Plain numpy, no Django.

Item score per criterion = mean of the raters who gave a number (N/A is missing, never 0);
normalized = (mean - 1) / 4, printed 0-1 with three decimals. The state-change score of an item
is the mean of its normalized osc_accuracy and osc_consistency; it is broken down per scenario
and per action category. The mean of criteria of an answer set is the mean over the eight criteria of
their means (the paper's Figure 3 score). A judge is one "rater" per item.

Arrays: ``sums`` and ``counts`` are (N, 8) integers in ``CRITERIA`` order: the sum of the given
scores and how many were given. An aggregated rating (a published mean of several raters,
annotation.models.Annotation ``aggregate_raters``) gives fractional scores: such a score m enters as
MEAN_SCALE parts (sum round(m * MEAN_SCALE), count MEAN_SCALE), so the item's mean is m to four
decimals and everything after stays in whole numbers. It is its item's only rating (the ratings
import sees to that), so its weight never meets a rater's.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Mapping, Sequence
from decimal import Decimal

import numpy as np

from protocols.kit.bootstrap import N_BOOT, percentile_ci
from protocols.kit.items import ModelAnswer, ScoringItem
from protocols.kit.matrix import (  # noqa: F401 (criteria_mean: the mean of criteria this module prints)
    COMPRESS_FROM,
    ItemMatrix,
    bootstrap_cis,
    criteria_mean,
    nanmean_rows,
    printed_bound,
    to_decimal,
)
from protocols.oscbench import CRITERIA, SCENARIOS

# The main table: the paper's eight criteria in its column order, their mean (Figure 3's overall
# score), then the state-change score the generator leaderboard is ranked by unless the
# researcher picks the mean (evaluation/ranking.py).
KEYS = CRITERIA + ("criteria_mean", "state_change")
PLACES = 3
_ACC, _CONS = CRITERIA.index("osc_accuracy"), CRITERIA.index("osc_consistency")
MEAN_SCALE = 10_000


def ratings_to_arrays(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, R, 8) scores with NaN for missing / N/A -> (sums, counts), each (N, 8) int64."""
    scores = np.asarray(scores, dtype=np.float64)
    given = np.isfinite(scores)
    sums = np.where(given, scores, 0).sum(axis=1).astype(np.int64)
    return sums, given.sum(axis=1).astype(np.int64)


def score_dicts_to_arrays(per_item: Sequence[Sequence[Mapping[str, int | None]]]) -> tuple[np.ndarray, np.ndarray]:
    """Per item a list of {criterion: 1..5 | None} (one per rater; or one aggregated rating's means,
    see the module) -> (sums, counts).

    The eight scores of every rating are read in one C-level pass (operator.itemgetter; a rating
    that lacks a criterion sends the whole list through dict.get instead), then bincount by item.
    """
    n = len(per_item)
    sums = np.zeros((n, len(CRITERIA)), dtype=np.int64)
    counts = np.zeros((n, len(CRITERIA)), dtype=np.int64)
    flat = [rating or {} for ratings in per_item for rating in ratings]
    if not flat:
        return sums, counts
    owner = np.repeat(np.arange(n), [len(ratings) for ratings in per_item])
    try:
        rows = list(map(_SCORES_OF, flat))
    except KeyError:  # some rating leaves a criterion out (missing, as None is)
        rows = [tuple(rating.get(c) for c in CRITERIA) for rating in flat]
    values = np.array(rows, dtype=np.float64).reshape(len(flat), len(CRITERIA))  # None -> NaN
    given = np.isfinite(values)
    parts = np.where(given, np.where(values == np.rint(values), 1.0, float(MEAN_SCALE)), 0.0)
    scaled = np.rint(np.where(given, values, 0.0) * parts)
    for j in range(len(CRITERIA)):
        sums[:, j] = np.rint(np.bincount(owner, weights=scaled[:, j], minlength=n))
        counts[:, j] = np.rint(np.bincount(owner, weights=parts[:, j], minlength=n))
    return sums, counts


_SCORES_OF = operator.itemgetter(*CRITERIA)


def state_change_cells(sums: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(num, den) per item of mean(normalized accuracy, normalized consistency); den 0 if either missing."""
    sa, ca = sums[:, _ACC], counts[:, _ACC]
    sc, cc = sums[:, _CONS], counts[:, _CONS]
    both = (ca > 0) & (cc > 0)
    num = np.where(both, (sa - ca) * cc + (sc - cc) * ca, 0)
    den = np.where(both, 8 * ca * cc, 0)
    return num, den


def item_matrix(
    sums: np.ndarray,
    counts: np.ndarray,
    *,
    scenarios: Sequence[str] | np.ndarray | None = None,
    action_categories: Sequence[str] | np.ndarray | None = None,
    parse_failures: int = 0,
) -> ItemMatrix:
    sums = np.asarray(sums, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    num = sums - counts
    den = 4 * counts  # 0 where nobody gave a number: not counted
    sc_num, sc_den = state_change_cells(sums, counts)
    nums, dens, keys = [num, sc_num[:, None]], [den, sc_den[:, None]], list(CRITERIA) + ["state_change"]
    for labels, prefix, names in (
        (scenarios, "scenario", SCENARIOS),
        (action_categories, "action_category", None),
    ):
        if labels is None:
            continue
        labels = np.asarray(labels, dtype=object)
        # A video without the (optional) label is in no group of that breakdown.
        for name in names or sorted({label for label in labels.tolist() if label not in (None, "")}, key=str):
            member = labels == name
            nums.append(np.where(member, sc_num, 0)[:, None])
            dens.append(np.where(member, sc_den, 0)[:, None])
            keys.append(f"state_change:{prefix}:{name}")
    num, den = np.hstack(nums), np.hstack(dens)
    # Each cell in lowest terms: a mean's MEAN_SCALE parts would otherwise make denominators of
    # 10^8 (the state-change cell), and the exact means count rows per distinct denominator.
    common = np.gcd(num, den)
    common = np.where(common > 0, common, 1)
    return ItemMatrix(
        keys=tuple(keys), num=num // common, den=den // common, parse_failures=parse_failures, n=sums.shape[0]
    )


def printed(matrix: ItemMatrix) -> dict[str, Decimal | None]:
    exact = matrix.exact_means()
    out = {key: None if exact[key] is None else to_decimal(exact[key], PLACES) for key in matrix.keys}
    mean = criteria_mean(exact[c] for c in CRITERIA)
    out["criteria_mean"] = None if mean is None else to_decimal(mean, PLACES)
    return out


def _derive(base: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"criteria_mean": nanmean_rows([base[c] for c in CRITERIA])}


def cis(matrix: ItemMatrix, *, n_boot: int = N_BOOT, seed: int = 0) -> dict[str, list[float] | None]:
    keys = matrix.keys + ("criteria_mean",)
    if matrix.num.shape[0] < COMPRESS_FROM:
        # Rows are resampled jointly at this size anyway: the mean of criteria from the same resamples.
        return bootstrap_cis(matrix, keys=keys, scale=1.0, places=PLACES, derive=_derive, n_boot=n_boot, seed=seed)
    out = bootstrap_cis(matrix, keys=keys, scale=1.0, places=PLACES, n_boot=n_boot, seed=seed)
    out["criteria_mean"] = _criteria_mean_ci_large(matrix, n_boot=n_boot, seed=seed)
    return out


def _criteria_mean_ci_large(matrix: ItemMatrix, *, n_boot: int, seed: int) -> list[float] | None:
    """The mean of criteria's interval for a large answer set (COMPRESS_FROM rows and more), where the
    columns are resampled one at a time and a joint row resample would cost n_boot x rows.

    What a row resample changes is the 16 column totals (per criterion: the sum of the counted
    values and the count); at this size those totals are close to normal with the rows' mean and
    covariance times the row count (central limit theorem), so each resample's totals are drawn
    from that normal, turned into per-criterion means and their mean, and the percentiles taken.
    """
    columns = [matrix.column(c) for c in CRITERIA]
    num, den = matrix.num[:, columns], matrix.den[:, columns]
    counted = den > 0
    rows = np.hstack([np.where(counted, num / np.where(counted, den, 1), 0.0), counted])
    n = rows.shape[0]
    rng = np.random.default_rng(seed)
    totals = rng.multivariate_normal(
        rows.mean(axis=0) * n,
        np.cov(rows, rowvar=False, bias=True) * n,
        size=n_boot,
        method="eigh",
        check_valid="ignore",
    )
    sums, counts = totals[:, : len(CRITERIA)], totals[:, len(CRITERIA) :]
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(counts > 0.5, sums / np.where(counts > 0.5, counts, 1.0), np.nan)  # < half a row: none counted
    ci = percentile_ci(nanmean_rows(list(means.T)))
    return None if ci is None else [printed_bound(ci[0], PLACES), printed_bound(ci[1], PLACES)]


# --- one answer set -> item matrix ---------------------------------------------------------


def score_ratings(
    items: Sequence[ScoringItem],
    ratings: Mapping[Hashable, Sequence[Mapping[str, int | None]]],
    *,
    parse_failures: int = 0,
) -> ItemMatrix:
    """``ratings``: item key -> list of {criterion: 1..5 | None} (human raters, or one judge answer)."""
    sums, counts = score_dicts_to_arrays([ratings.get(it.key, []) for it in items])
    return item_matrix(
        sums,
        counts,
        scenarios=[it.payload.get("scenario") for it in items],
        action_categories=[it.payload.get("action_category") for it in items],
        parse_failures=parse_failures,
    )


def score(items: Sequence[ScoringItem], answers: Mapping[tuple, ModelAnswer]) -> ItemMatrix:
    ratings, failures = {}, 0
    for item in items:
        ans = answers.get((item.key, "judge"))
        if ans is None or not isinstance(ans.value, dict):
            failures += 1
            continue
        ratings[item.key] = [ans.value]
    return score_ratings(items, ratings, parse_failures=failures)


def random_matrix(items: Sequence[ScoringItem], *, seed: int) -> ItemMatrix:
    """The Random judge's item matrix: the very draws of ``random_answer_set``
    (one 1-5 score per criterion and video), handed to the scoring as arrays instead of 100k
    answer dicts that would only be read back into the same arrays."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(1, 6, size=(len(items), len(CRITERIA))).astype(np.int64)
    return item_matrix(
        draws,
        np.ones_like(draws),
        scenarios=[it.payload.get("scenario") for it in items],
        action_categories=[it.payload.get("action_category") for it in items],
    )


def random_answer_set(items: Sequence[ScoringItem], *, rng: np.random.Generator) -> dict[tuple, ModelAnswer]:
    """Seeded random judge answers: one draw for all videos (the rating tables are large)."""
    out: dict[tuple, ModelAnswer] = {}
    draws = rng.integers(1, 6, size=(len(items), len(CRITERIA))).tolist()
    for item, row in zip(items, draws):
        out[(item.key, "judge")] = ModelAnswer(dict(zip(CRITERIA, row)), [])
    return out
