"""Leaderboard rows per project and release: models, Random, Human (or generators for ratings).

Row JSON: {"model", "n", "parse_failures", "metrics": {key: value}, "ci": {key: [lo, hi]}} plus
"rank" (interval-respecting, on the ranking's headline metric: ranking.py) and "breakdowns" (per category /
difference / scenario ... as {key: {"value", "ci"}}). Values are JSON numbers printed from exact
decimals: percent with two decimals, or as the protocol says (``places``, ``percent``: ratings 0-1 with three).
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from annotation.models import Project
from protocols import registry
from protocols.kit.bootstrap import N_BOOT

from . import ranking, selectors
from .scoring import answer_sets

RANDOM_SEED_OFFSET = (
    7919  # Random rows: seeded from the release's option seed, offset so they differ from option orders
)


class LeaderboardError(ValueError):
    pass


def _num(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def _row(name: str, protocol: str, scored: answer_sets.ScoredAnswers) -> dict[str, Any]:
    keys = answer_sets.main_keys(protocol)
    row = {
        "model": name,
        "n": scored.matrix.n,
        "parse_failures": scored.matrix.parse_failures,
        "metrics": {k: _num(scored.printed.get(k)) for k in keys},
        "ci": {k: scored.cis.get(k) for k in keys},
    }
    row["breakdowns"] = {
        k: {"value": _num(v), "ci": scored.cis.get(k)} for k, v in scored.printed.items() if k not in keys
    }
    diagnostics = {k: v for k, v in scored.matrix.diagnostics.items() if v}
    if diagnostics:
        row["diagnostics"] = _jsonable(diagnostics)
    return row


def _jsonable(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def build(
    project: Project,
    *,
    release_version: str | None = None,
    judge: str | None = None,
    n_boot: int = N_BOOT,
    rank_by: str | None = None,
) -> dict[str, Any]:
    """``rank_by``: one of ranking.choices(protocol) (ranking.UnknownRanking otherwise); the default's when None."""
    rank_by = ranking.resolve(project.protocol, rank_by)
    release = selectors.release_for(project, release_version)
    items = selectors.scoring_items(project, release)
    protocol = project.protocol
    seed = (release.option_seed if release is not None else project.option_seed) + RANDOM_SEED_OFFSET
    rows: list[dict[str, Any]] = []
    human: dict[str, int] | None = None
    if registry.get(protocol).board == "generators":
        rows = _generator_rows(protocol, project, release, items, judge=judge, n_boot=n_boot, seed=seed)
    else:
        if judge is not None:
            raise LeaderboardError("--judge applies to video-rating projects only")
        for job in selectors.latest_finished_jobs(project, release):
            scored = answer_sets.score(protocol, items, selectors.job_answers(job), n_boot=n_boot)
            rows.append(_row(selectors.job_name(job), protocol, scored))
        if items:
            rows.append(
                _row(
                    "Random",
                    protocol,
                    answer_sets.score(
                        protocol, items, answer_sets.random_answers(protocol, items, seed=seed), n_boot=n_boot
                    ),
                )
            )
        if answer_sets.protocol_has_human_row(protocol):
            blind, with_suggestion = selectors.blind_answers(items)
            # Answers given with a model suggestion on the form are not blind: never in the Human row.
            human = {
                "blind_answers": sum(len(v) for v in blind.values()),
                "items": len(blind),
                "left_out_with_suggestion": with_suggestion,
            }
            if blind:
                matrix = answer_sets.score_blind_answers(protocol, items, blind)
                rows.append(_row("Human", protocol, answer_sets.finish(protocol, matrix, n_boot=n_boot)))
    board = {
        "project": project.slug,
        "release": release.version if release is not None else None,
        "protocol": protocol,
        "rows": rows,
    }
    if human is not None:
        board["human"] = human
    # Leaderboard order (ranking.py): every page, chart, API answer and download keeps it.
    return ranking.reordered(board, rank_by)


def _generator_rows(
    protocol, project, release, items, *, judge: str | None, n_boot: int, seed: int
) -> list[dict[str, Any]]:
    """Rows per generator of the items (a rating protocol's board), scored from the human ratings
    or from one judge's answers, then the Random row."""
    scoring = registry.get(protocol).scoring
    by_generator: dict[str, list[answer_sets.ScoringItem]] = defaultdict(list)
    for item in items:
        by_generator[str(item.payload.get("generator") or "unknown")].append(item)
    rows = []
    if judge is None:
        # A reviewer's adjudicated scores stand for the raters' of that item (selectors.consensus_ratings).
        per_item = selectors.consensus_ratings(items, selectors.ratings_by_item(items))
        for generator in sorted(by_generator):
            matrix = scoring.score_ratings(by_generator[generator], per_item)
            rows.append(_row(generator, protocol, answer_sets.finish(protocol, matrix, n_boot=n_boot)))
    else:
        jobs = selectors.judge_jobs(project, release, judge)
        if not jobs:
            raise LeaderboardError(f"no finished judge named {judge!r} on this release")
        answers = selectors.job_answers(jobs[0])
        for generator in sorted(by_generator):
            matrix = scoring.score(by_generator[generator], answers)
            rows.append(_row(generator, protocol, answer_sets.finish(protocol, matrix, n_boot=n_boot)))
    if items:
        rows.append(
            _row(
                "Random", protocol, answer_sets.finish(protocol, scoring.random_matrix(items, seed=seed), n_boot=n_boot)
            )
        )
    return rows


def breakdown_groups(board: dict[str, Any]) -> dict[str, list[str]]:
    """Tab name -> breakdown keys, e.g. "category:positional" -> ["category:positional:acc_osi", ...]."""
    groups: dict[str, list[str]] = {}
    for row in board["rows"]:
        for key in row.get("breakdowns", {}):
            group, _, _metric = key.rpartition(":")
            if not group:
                group = key
            groups.setdefault(group, [])
            if key not in groups[group]:
                groups[group].append(key)
    return groups


def row_for_job(job, *, n_boot: int = 200) -> dict[str, Any]:
    """One job's leaderboard row (details included) on its own release, JSON-ready.

    For callers outside this app (inference's results export); video-rating judges have no
    row of their own: they are scored by agreement with humans (see correlation.py).
    """
    items = selectors.scoring_items(job.project, job.release)
    scored = answer_sets.score(job.protocol, items, selectors.job_answers(job), n_boot=n_boot)
    return _jsonable(_row(selectors.job_name(job), job.protocol, scored))


def job_metrics(job) -> dict[str, Any]:
    """Scores of one evaluate job for its results.json (settings.STATELAB_JOB_METRICS points here).

    A model on a protocol whose board ranks models: its leaderboard row on its release.
    A judge on a rating protocol (board "generators"): per generator, the judge's mean scores per
    criterion (0-1) with bootstrap intervals; how far the judge agrees with human raters is the
    correlation page's business.
    """
    if registry.get(job.protocol).board != "generators":
        return row_for_job(job, n_boot=200)
    scoring = registry.get(job.protocol).scoring
    items = selectors.scoring_items(job.project, job.release)
    answers = selectors.job_answers(job)
    by_generator: dict[str, list[answer_sets.ScoringItem]] = defaultdict(list)
    for item in items:
        by_generator[str(item.payload.get("generator") or "unknown")].append(item)
    keys = answer_sets.main_keys(job.protocol)
    generators = []
    for generator in sorted(by_generator):
        scored = answer_sets.finish(job.protocol, scoring.score(by_generator[generator], answers), n_boot=200)
        generators.append(
            {
                "generator": generator,
                "n": scored.matrix.n,
                "parse_failures": scored.matrix.parse_failures,
                "metrics": {k: _num(scored.printed.get(k)) for k in keys},
                "ci": {k: _jsonable(scored.cis.get(k)) for k in keys},
            }
        )
    return {"judge": job.model_name, "generators": generators}
