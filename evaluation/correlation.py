"""Human-MLLM agreement for video-rating projects (PROTOCOLS.md §5).

JSON: {"criteria": [...], "judges": [{"judge", "per_criterion": {criterion: {"kendall_tau_b",
"spearman_rho", "n", "ci"}}, "system_kendall_tau_b"}], "human": {criterion: {"loo_kendall_tau_b",
"loo_spearman_rho", "krippendorff_alpha"}}}. Judges are ordered by mean instance-level tau-b
(the judge leaderboard). A statistic that cannot be computed is null with a "note" beside it.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from annotation.models import Project

from . import selectors, stats
from .scoring.oscbench import CRITERIA

N_BOOT = 1000


class CorrelationError(ValueError):
    pass


def _human_means(ratings: dict[int, list[tuple[str, dict]]], keys: list) -> dict[str, list[float | None]]:
    out: dict[str, list[float | None]] = {c: [] for c in CRITERIA}
    for key in keys:
        entries = ratings.get(key, [])
        for c in CRITERIA:
            vals = [s.get(c) for _, s in entries if s.get(c) is not None]
            out[c].append(float(np.mean(vals)) if vals else None)
    return out


def _generator_means(values: list[float | None], generators: list[str]) -> dict[str, float | None]:
    acc: dict[str, list[float]] = defaultdict(list)
    for v, g in zip(values, generators):
        if v is not None:
            acc[g].append(v)
    return {g: (float(np.mean(acc[g])) if acc[g] else None) for g in sorted(set(generators))}


def _system_score(per_criterion: dict[str, list[float | None]], generators: list[str]) -> dict[str, float | None]:
    """Per generator: the mean over criteria of its per-criterion mean (criteria it has values for)."""
    per_gen = {c: _generator_means(per_criterion[c], generators) for c in CRITERIA}
    out = {}
    for g in sorted(set(generators)):
        vals = [per_gen[c][g] for c in CRITERIA if per_gen[c][g] is not None]
        out[g] = float(np.mean(vals)) if vals else None
    return out


def build(project: Project, *, release_version: str | None = None, n_boot: int = N_BOOT) -> dict[str, Any]:
    if project.protocol != "oscbench":
        raise CorrelationError("human-judge correlation applies to video-rating projects")
    release = selectors.release_for(project, release_version)
    items = selectors.scoring_items(project, release)
    keys = [it.key for it in items]
    generators = [str(it.payload.get("generator") or "unknown") for it in items]
    ratings = selectors.ratings_by_item(items)
    human = _human_means(ratings, keys)
    human_system = _system_score(human, generators)

    judges = []
    for job in selectors.judge_jobs(project, release):
        answers = selectors.job_answers(job)
        judge_scores: dict[str, list[float | None]] = {c: [] for c in CRITERIA}
        for key in keys:
            ans = answers.get((key, "judge"))
            value = ans.value if ans is not None and isinstance(ans.value, dict) else {}
            for c in CRITERIA:
                v = value.get(c)
                judge_scores[c].append(None if v is None else float(v))
        per_criterion = {}
        for c in CRITERIA:
            result = stats.correlation_with_ci(judge_scores[c], human[c], n_boot=n_boot)
            entry = {k: result[k] for k in ("kendall_tau_b", "spearman_rho", "n", "ci")}
            if "note" in result:
                entry["note"] = result["note"]
            per_criterion[c] = entry
        judge_system = _system_score(judge_scores, generators)
        gens = sorted(human_system)
        system = stats.kendall_tau_b([human_system[g] for g in gens], [judge_system[g] for g in gens])
        entry = {"judge": selectors.job_name(job), "per_criterion": per_criterion, "system_kendall_tau_b": system.value}
        if system.note:
            entry["system_note"] = f"{system.note} (generators)"
        judges.append(entry)
    judges.sort(key=lambda j: (-(mean_tau(j) if mean_tau(j) is not None else -2.0), j["judge"]))

    human_ref: dict[str, Any] = {}
    for c in CRITERIA:
        by_rater: dict[str, dict[int, float | None]] = defaultdict(dict)
        units = []
        for key in keys:
            entries = ratings.get(key, [])
            units.append([s.get(c) for _, s in entries])
            for rater, s in entries:
                by_rater[rater][key] = s.get(c)
        loo = stats.leave_one_rater_out(by_rater)
        alpha = stats.krippendorff_alpha(units, metric="ordinal")
        entry = {
            "loo_kendall_tau_b": loo["loo_kendall_tau_b"],
            "loo_spearman_rho": loo["loo_spearman_rho"],
            "krippendorff_alpha": alpha.value,
        }
        notes = [n for n in (loo.get("note"), alpha.note) if n]
        if notes:
            entry["note"] = "; ".join(notes)
        human_ref[c] = entry
    return {
        "project": project.slug,
        "release": release.version if release is not None else None,
        "criteria": list(CRITERIA),
        "judges": judges,
        "human": human_ref,
    }


def mean_tau(judge: dict[str, Any]) -> float | None:
    vals = [v["kendall_tau_b"] for v in judge["per_criterion"].values() if v["kendall_tau_b"] is not None]
    return float(np.mean(vals)) if vals else None


def scatter_points(project: Project, *, judge: str, criterion: str, release_version: str | None = None) -> tuple[list, list]:
    """(judge scores, human means) per item for one judge and criterion, None where missing."""
    if criterion not in CRITERIA:
        raise CorrelationError(f"unknown criterion {criterion!r}")
    release = selectors.release_for(project, release_version)
    items = selectors.scoring_items(project, release)
    keys = [it.key for it in items]
    jobs = selectors.judge_jobs(project, release, judge)
    if not jobs:
        raise CorrelationError(f"no finished judge named {judge!r}")
    answers = selectors.job_answers(jobs[0])
    human = _human_means(selectors.ratings_by_item(items), keys)[criterion]
    judged = []
    for key in keys:
        ans = answers.get((key, "judge"))
        v = ans.value.get(criterion) if ans is not None and isinstance(ans.value, dict) else None
        judged.append(None if v is None else float(v))
    return judged, human
