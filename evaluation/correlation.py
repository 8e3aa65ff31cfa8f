"""Human-MLLM agreement for rating projects, whose boards rank generators (``Protocol.board ==
"generators"``; the protocol's spec page, "Human–judge agreement").

JSON: {"criteria": [...], "judges": [{"judge", "per_criterion": {criterion: {"kendall_tau_b",
"spearman_rho", "n", "ci"}}, "system_kendall_tau_b"}], "human": {criterion: {"loo_kendall_tau_b",
"loo_spearman_rho", "krippendorff_alpha"}}}. Judges are ordered by mean instance-level tau-b
(the judge leaderboard). A statistic that cannot be computed is null with a "note" beside it.

System level. ``system_kendall_tau_b`` (the judge's headline system figure) is Kendall tau-b between the generators
ranked by humans and by the judge, where a generator's score is the mean over the criteria of its
per-criterion mean score (criteria it has values for; N/A never counts as 0); n = generators.
With details, each judge also has ``system`` = {"kendall_tau_b" (the same value), "n", "ci"} and
``system_per_criterion`` = {criterion: {"kendall_tau_b", "n", "ci"}} (generators ranked by that
criterion's mean alone), and each human entry has "n" (items rated by at least two raters) and a
"ci" for its three statistics. Every interval is a 95 % percentile bootstrap resampling items
(videos): generator means, leave-one-rater-out averages and alpha are recomputed per resample.
The system-level entries also carry "ci_two_way", a two-way bootstrap that resamples items and
systems (generators drawn with replacement, as a study of other generators would), which is the
honest interval when few systems are ranked, and a "warning" (with details; ``system_warning``
beside the headline figure) when fewer than MIN_SYSTEMS (10) generators are ranked.

Aggregated ratings (annotation.models.Annotation ``aggregate_raters``: a study's published means
of several raters, an item's only human rating) are the Human score of their items like any
consensus, so judges are compared with them. Krippendorff's alpha and leave-one-rater-out need
each rater's own scores: they leave those items out, and say so in their "note"; each human entry
counts them under "aggregated" (null statistics with that note when no item has per-rater ratings).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from annotation.models import Project
from protocols import registry
from protocols.kit.bootstrap import N_BOOT, percentile_ci
from protocols.kit.matrix import criteria_mean

from . import selectors, stats


class CorrelationError(ValueError):
    pass


def _human_means(
    consensus: dict[int, list[dict]], keys: list, *, criteria: Sequence[str]
) -> dict[str, list[float | None]]:
    """Per criterion, each item's Human score: the mean of its consensus score dicts
    (selectors.consensus_ratings: a reviewer's adjudicated scores where there are some)."""
    out: dict[str, list[float | None]] = {c: [] for c in criteria}
    for key in keys:
        entries = consensus.get(key, [])
        for c in criteria:
            vals = [s.get(c) for s in entries if s.get(c) is not None]
            out[c].append(float(np.mean(vals)) if vals else None)
    return out


def aggregated_raters(items: list) -> dict[int, set[str]]:
    """item pk -> the rater keys (selectors.rater_key) of its aggregated ratings."""
    out: dict[int, set[str]] = defaultdict(set)
    rows = selectors.annotations_for(items).filter(aggregate_raters__isnull=False)
    for row in rows.values("item_id", "annotator_id", "external_rater"):
        out[row["item_id"]].add(selectors.rater_key(row))
    return dict(out)


def _aggregated_note(n_aggregated: int, per_rater_units: int) -> str | None:
    if not n_aggregated:
        return None
    if not per_rater_units:
        return (
            f"needs per-rater ratings: the human scores of all {n_aggregated} items are aggregated ratings "
            "(the means of their raters), which Krippendorff's alpha and leave-one-rater-out cannot use"
        )
    return (
        f"{n_aggregated} items whose human score is an aggregated rating (the means of their raters) are left "
        "out: Krippendorff's alpha and leave-one-rater-out need per-rater ratings"
    )


def _generator_means(values: list[float | None], generators: list[str]) -> dict[str, float | None]:
    acc: dict[str, list[float]] = defaultdict(list)
    for v, g in zip(values, generators):
        if v is not None:
            acc[g].append(v)
    return {g: (float(np.mean(acc[g])) if acc[g] else None) for g in sorted(set(generators))}


def _system_score(per_criterion: dict[str, list[float | None]], generators: list[str]) -> dict[str, float | None]:
    """Per generator: the mean over criteria (``per_criterion``'s keys) of its per-criterion mean
    (criteria it has values for)."""
    per_gen = {c: _generator_means(values, generators) for c, values in per_criterion.items()}
    return {g: criteria_mean(per_gen[c][g] for c in per_gen) for g in sorted(set(generators))}


def _resampled_generator_means(
    values: list[float | None], gen_codes: np.ndarray, n_gen: int, w: np.ndarray
) -> np.ndarray:
    """(b, G) generator means of one criterion under item weights w (NaN where a generator has none)."""
    v = stats.as_float_array(values)
    have = np.isfinite(v)
    onehot = np.zeros((v.size, n_gen))
    onehot[np.arange(v.size), gen_codes] = 1.0
    wf = w.astype(np.float64)
    sums = (wf * np.where(have, v, 0.0)) @ onehot
    cnts = (wf * have) @ onehot
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnts > 0, sums / np.where(cnts > 0, cnts, 1), np.nan)


def _tau_over_generators(h: np.ndarray, j: np.ndarray) -> np.ndarray:
    """tau-b per resample between (b, G) human and judge generator scores; generators missing on
    either side drop out (their pairs count nowhere); NaN when fewer than MIN_PAIRS remain."""
    ok = np.isfinite(h) & np.isfinite(j)
    h0, j0 = np.where(ok, h, 0.0), np.where(ok, j, 0.0)
    pair_ok = ok[:, :, None] & ok[:, None, :]
    sx = np.where(pair_ok, np.sign(h0[:, :, None] - h0[:, None, :]), 0.0)
    sy = np.where(pair_ok, np.sign(j0[:, :, None] - j0[:, None, :]), 0.0)
    tau = stats.tau_b_from_signs(sx, sy)
    return np.where(ok.sum(axis=1) >= stats.MIN_PAIRS, tau, np.nan)


def _mean_over_criteria(per_criterion: list[np.ndarray]) -> np.ndarray:
    """Element-wise mean of the defined values (NaN where a generator has none), as _system_score."""
    stacked = np.stack(per_criterion)
    have = np.isfinite(stacked)
    cnt = have.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(cnt > 0, np.where(have, stacked, 0.0).sum(axis=0) / np.maximum(cnt, 1), np.nan)


MIN_SYSTEMS = 10  # fewer generators ranked: the system-level figure carries a warning


def few_systems_warning(n: int) -> str:
    return (
        f"only {n} systems ranked: a rank correlation over fewer than {MIN_SYSTEMS} systems moves a lot with one "
        "system more or less; read it with its two-way interval (items and systems resampled)"
    )


def system_draws(n_gen: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_gen) times each generator is drawn in the systems half of the two-way bootstrap:
    n_gen draws with replacement per resample (a stream of its own, independent of the items')."""
    rng = np.random.default_rng([seed, 1])
    if n_gen == 0:
        return np.zeros((n_boot, 0), dtype=np.int64)
    return rng.multinomial(n_gen, np.full(n_gen, 1.0 / n_gen), size=n_boot)


def _tau_over_drawn_generators(h: np.ndarray, j: np.ndarray, m: np.ndarray) -> np.ndarray:
    """tau-b per resample over a sample holding m[r, g] copies of generator g: pairs of distinct
    generators count m_g · m_h times; two copies of one generator tie on both sides, so they drop out
    of tau-b's numerator and both halves of its denominator (as SciPy counts a repeated vector).
    NaN when fewer than MIN_PAIRS distinct generators with values on both sides are drawn."""
    ok = np.isfinite(h) & np.isfinite(j) & (m > 0)
    h0, j0 = np.where(ok, h, 0.0), np.where(ok, j, 0.0)
    weight = np.where(ok, m, 0).astype(np.float64)
    pair = weight[:, :, None] * weight[:, None, :]
    sx = np.sign(h0[:, :, None] - h0[:, None, :])
    sy = np.sign(j0[:, :, None] - j0[:, None, :])
    num = (pair * sx * sy).sum(axis=(1, 2))
    den = (pair * sx * sx).sum(axis=(1, 2)) * (pair * sy * sy).sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        tau = np.where(den > 0, num / np.sqrt(np.where(den > 0, den, 1.0)), np.nan)
    return np.where(ok.sum(axis=1) >= stats.MIN_PAIRS, tau, np.nan)


def _system_entry(point: stats.Correlation, samples: np.ndarray, two_way: np.ndarray) -> dict[str, Any]:
    entry: dict[str, Any] = {"kendall_tau_b": point.value, "n": point.n, "ci": None, "ci_two_way": None}
    if point.value is not None:
        entry["ci"] = percentile_ci(samples)
        entry["ci_two_way"] = percentile_ci(two_way)
        if point.n < MIN_SYSTEMS:
            entry["warning"] = few_systems_warning(point.n)
    if point.note:
        entry["note"] = f"{point.note} (generators)"
    return entry


def system_agreement(
    human: dict[str, list[float | None]],
    judge: dict[str, list[float | None]],
    generators: list[str],
    *,
    n_boot: int,
    seed: int = 0,
) -> dict[str, Any]:
    """System-level tau-b overall and per criterion (``human``'s keys), each with n (generators), a
    bootstrap CI over items ("ci") and a two-way one over items and systems ("ci_two_way": each
    resample reweights the items as "ci" does and draws the generators with replacement,
    ``system_draws``), and a "warning" when fewer than MIN_SYSTEMS generators are ranked."""
    criteria = tuple(human)
    names = sorted(set(generators))
    codes = np.array([names.index(g) for g in generators], dtype=np.int64)
    point_h, point_j = _system_score(human, generators), _system_score(judge, generators)
    overall = stats.kendall_tau_b([point_h[g] for g in names], [point_j[g] for g in names])
    per_point = {}
    for c in criteria:
        gh, gj = _generator_means(human[c], generators), _generator_means(judge[c], generators)
        per_point[c] = stats.kendall_tau_b([gh[g] for g in names], [gj[g] for g in names])
    overall_s, overall_2 = np.full(n_boot, np.nan), np.full(n_boot, np.nan)
    per_s = {c: np.full(n_boot, np.nan) for c in criteria}
    per_2 = {c: np.full(n_boot, np.nan) for c in criteria}
    drawn = system_draws(len(names), n_boot, seed)
    if generators:
        for start, w in stats.resample_weights(len(generators), n_boot, seed):
            b = w.shape[0]
            m = drawn[start : start + b]
            hs, js = [], []
            for c in criteria:
                h = _resampled_generator_means(human[c], codes, len(names), w)
                j = _resampled_generator_means(judge[c], codes, len(names), w)
                per_s[c][start : start + b] = _tau_over_generators(h, j)
                per_2[c][start : start + b] = _tau_over_drawn_generators(h, j, m)
                hs.append(h)
                js.append(j)
            mh, mj = _mean_over_criteria(hs), _mean_over_criteria(js)
            overall_s[start : start + b] = _tau_over_generators(mh, mj)
            overall_2[start : start + b] = _tau_over_drawn_generators(mh, mj, m)
    return {
        "overall": _system_entry(overall, overall_s, overall_2),
        "per_criterion": {c: _system_entry(per_point[c], per_s[c], per_2[c]) for c in criteria},
    }


def build(project: Project, *, release_version: str | None = None, n_boot: int = N_BOOT) -> dict[str, Any]:
    found = registry.get(project.protocol)
    if found.board != "generators":
        raise CorrelationError("human-judge correlation applies to video-rating projects")
    criteria = found.criteria
    release = selectors.release_for(project, release_version)
    items = selectors.scoring_items(project, release)
    keys = [it.key for it in items]
    generators = [str(it.payload.get("generator") or "unknown") for it in items]
    ratings = selectors.ratings_by_item(items)
    # Judges are compared with the Human score, adjudicated where a reviewer edited the ratings;
    # the raters' own agreement (leave-one-rater-out, alpha) below uses the raw ratings.
    human = _human_means(selectors.consensus_ratings(items, ratings), keys, criteria=criteria)

    judges = []
    for job in selectors.judge_jobs(project, release):
        answers = selectors.job_answers(job)
        judge_scores: dict[str, list[float | None]] = {c: [] for c in criteria}
        for key in keys:
            ans = answers.get((key, "judge"))
            value = ans.value if ans is not None and isinstance(ans.value, dict) else {}
            for c in criteria:
                v = value.get(c)
                judge_scores[c].append(None if v is None else float(v))
        per_criterion = {}
        for c in criteria:
            result = stats.correlation_with_ci(judge_scores[c], human[c], n_boot=n_boot)
            entry = {k: result[k] for k in ("kendall_tau_b", "spearman_rho", "n", "ci")}
            if "note" in result:
                entry["note"] = result["note"]
            per_criterion[c] = entry
        system = system_agreement(human, judge_scores, generators, n_boot=n_boot)
        entry = {
            "judge": selectors.job_name(job),
            "per_criterion": per_criterion,
            "system_kendall_tau_b": system["overall"]["kendall_tau_b"],
        }
        if system["overall"].get("note"):
            entry["system_note"] = system["overall"]["note"]
        if system["overall"].get("warning"):
            entry["system_warning"] = system["overall"]["warning"]
        entry["system"] = {k: v for k, v in system["overall"].items() if k not in ("note", "warning")}
        entry["system_per_criterion"] = system["per_criterion"]
        judges.append(entry)
    judges.sort(key=lambda j: (-(mean_tau(j) if mean_tau(j) is not None else -2.0), j["judge"]))

    # Per-rater statistics: each rater's own scores only, never a study's published means.
    aggregated = aggregated_raters(items)
    n_aggregated = sum(1 for key in keys if key in aggregated)
    own = {key: [(r, s) for r, s in entries if r not in aggregated.get(key, ())] for key, entries in ratings.items()}
    per_rater_units = sum(1 for key in keys if own.get(key))
    human_ref: dict[str, Any] = {}
    for c in criteria:
        by_rater: dict[str, dict[int, float | None]] = defaultdict(dict)
        units = []
        for key in keys:
            entries = own.get(key, [])
            units.append([s.get(c) for _, s in entries])
            for rater, s in entries:
                by_rater[rater][key] = s.get(c)
        loo = stats.leave_one_rater_out(by_rater)
        alpha = stats.krippendorff_alpha(units, metric="ordinal")
        entry = {
            "loo_kendall_tau_b": loo["loo_kendall_tau_b"],
            "loo_spearman_rho": loo["loo_spearman_rho"],
            "krippendorff_alpha": alpha.value,
            "n": sum(1 for unit in units if sum(v is not None for v in unit) >= 2),
            "aggregated": n_aggregated,
        }
        loo_samples = stats.leave_one_rater_out_bootstrap(by_rater, keys, n_boot=n_boot)
        alpha_samples = stats.krippendorff_alpha_bootstrap(units, metric="ordinal", n_boot=n_boot)
        entry["ci"] = {
            "loo_kendall_tau_b": percentile_ci(loo_samples["loo_kendall_tau_b"])
            if entry["loo_kendall_tau_b"] is not None
            else None,
            "loo_spearman_rho": percentile_ci(loo_samples["loo_spearman_rho"])
            if entry["loo_spearman_rho"] is not None
            else None,
            "krippendorff_alpha": percentile_ci(alpha_samples) if alpha.value is not None else None,
        }
        own_notes = (loo.get("note"), alpha.note) if per_rater_units else ()
        notes = [n for n in (_aggregated_note(n_aggregated, per_rater_units), *own_notes) if n]
        if notes:
            entry["note"] = "; ".join(notes)
        human_ref[c] = entry
    return {
        "project": project.slug,
        "release": release.version if release is not None else None,
        "criteria": list(criteria),
        "judges": judges,
        "human": human_ref,
    }


def mean_tau(judge: dict[str, Any]) -> float | None:
    vals = [v["kendall_tau_b"] for v in judge["per_criterion"].values() if v["kendall_tau_b"] is not None]
    return float(np.mean(vals)) if vals else None


def scatter_points(
    project: Project, *, judge: str, criterion: str, release_version: str | None = None
) -> tuple[list, list]:
    """(judge scores, human means) per item for one judge and criterion, None where missing."""
    criteria = registry.get(project.protocol).criteria
    if criterion not in criteria:
        raise CorrelationError(f"unknown criterion {criterion!r}")
    release = selectors.release_for(project, release_version)
    items = selectors.scoring_items(project, release)
    keys = [it.key for it in items]
    jobs = selectors.judge_jobs(project, release, judge)
    if not jobs:
        raise CorrelationError(f"no finished judge named {judge!r}")
    answers = selectors.job_answers(jobs[0])
    human = _human_means(selectors.consensus_ratings(items, selectors.ratings_by_item(items)), keys, criteria=criteria)[
        criterion
    ]
    judged = []
    for key in keys:
        ans = answers.get((key, "judge"))
        v = ans.value.get(criterion) if ans is not None and isinstance(ans.value, dict) else None
        judged.append(None if v is None else float(v))
    return judged, human
