"""Leaderboard rows per project and release: models, Random, Human (or generators for ratings).

Row JSON: {"model", "n", "parse_failures", "metrics": {key: value}, "ci": {key: [lo, hi]}, "se", "se_clustered",
"design_effect": {key: value}} plus "rank" (interval-respecting, on the ranking's headline metric: ranking.py)
and "breakdowns" (per category /
difference / scenario ... as {key: {"value", "ci"}}). Values are JSON numbers printed from exact
decimals: percent with two decimals, or as the protocol says (``places``, ``percent``: ratings 0-1 with three).
Standard errors (protocols/kit/clustered.py) exist for the metrics that are means of item scores, on the
printed scale with one decimal more; the board's "cluster_key" names what their clusters are.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from annotation.models import Project
from inference.selectors import job_cost, job_cost_per_correct
from protocols import registry
from protocols.kit import clustered
from protocols.kit.bootstrap import N_BOOT
from protocols.kit.matrix import ItemMatrix

from . import ranking, rater_exclusion, selectors, vote_intervals
from .scoring import answer_sets, choice_arrays

RANDOM_SEED_OFFSET = (
    7919  # Random rows: seeded from the release's option seed, offset so they differ from option orders
)


class LeaderboardError(ValueError):
    pass


def _num(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


@dataclass
class RowScores:
    """One board row before its figures: the name, the item matrix and the items behind its rows
    (in the matrix's order; the Human row's are the items with blind answers)."""

    name: str
    matrix: ItemMatrix
    units: Sequence[answer_sets.ScoringItem]
    job: Any = None  # the inference job of a model's row (its tokens and cost); None for Random and Human


def correct_count(protocol: str, matrix: ItemMatrix) -> int | None:
    """How many answers the protocol scores correct: the numerator of its headline metric (the
    first of its ranking) summed over the counted rows; None where its figures are not proportions
    of right answers (ratings) or the headline is not a matrix column."""
    head = (registry.get(protocol).ranking or (None,))[0]
    if not registry.get(protocol).percent or head not in matrix.keys:
        return None
    j = matrix.column(head)
    return int(matrix.num[matrix.den[:, j] > 0, j].sum())


def usage_of(protocol: str, job, matrix: ItemMatrix) -> dict[str, Any]:
    """A model row's tokens, cost and cost per correct answer (inference.selectors)."""
    cost = job_cost(job)
    correct = correct_count(protocol, matrix)
    return {
        "prompt_tokens": job.prompt_tokens,
        "completion_tokens": job.completion_tokens,
        "cost_usd": cost,
        "correct": correct,
        "cost_per_correct_usd": job_cost_per_correct(cost, correct),
    }


def cluster_key(protocol: str) -> clustered.ClusterKey:
    return registry.get(protocol).cluster_key


def unit_clusters(protocol: str, units: Sequence[answer_sets.ScoringItem]) -> list[Hashable]:
    """Each unit's cluster label under the protocol's cluster key (an item without one: its own)."""
    return clustered.cluster_labels([u.payload for u in units], [u.key for u in units], cluster_key(protocol))


def _standard_errors(
    protocol: str, matrix: ItemMatrix, units: Sequence[answer_sets.ScoringItem], keys, codes=None
) -> dict:
    if codes is None:
        codes, _ = clustered.cluster_codes(unit_clusters(protocol, units))
    scale = 100.0 if answer_sets.is_percent(protocol) else 1.0
    # Only the columns asked for (not every breakdown's): the same figures, a fraction of the memory.
    cols = [matrix.column(k) for k in keys if k in matrix.keys]
    main = ItemMatrix(keys=tuple(matrix.keys[j] for j in cols), num=matrix.num[:, cols], den=matrix.den[:, cols])
    return clustered.matrix_standard_errors(main, codes, keys, scale=scale)


def _rounded(value: float | None, places: int) -> float | None:
    return None if value is None else round(value, places)


def _row(
    name: str,
    protocol: str,
    scored: answer_sets.ScoredAnswers,
    units: Sequence[answer_sets.ScoringItem],
    codes=None,
) -> dict[str, Any]:
    """``codes``: the units' cluster codes where known already (the array form), else from ``units``."""
    keys = answer_sets.main_keys(protocol)
    errors = _standard_errors(protocol, scored.matrix, units, keys, codes)
    places = registry.get(protocol).places + 1
    row = {
        "model": name,
        "n": scored.matrix.n,
        "parse_failures": scored.matrix.parse_failures,
        "metrics": {k: _num(scored.printed.get(k)) for k in keys},
        "ci": {k: scored.cis.get(k) for k in keys},
        "se": {k: _rounded(errors[k]["se"], places) for k in keys if k in errors},
        "se_clustered": {k: _rounded(errors[k]["se_clustered"], places) for k in keys if k in errors},
        "design_effect": {k: _rounded(errors[k]["design_effect"], 3) for k in keys if k in errors},
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


def random_seed(project: Project, release) -> int:
    return (release.option_seed if release is not None else project.option_seed) + RANDOM_SEED_OFFSET


def row_scores(
    project: Project, release, items: Sequence[answer_sets.ScoringItem], *, judge: str | None
) -> tuple[list[RowScores], dict[str, int] | None]:
    """The scored rows of a board (models, Random, Human; generators and Random for a rating protocol)
    and the Human row's counts (None where the protocol has no Human row): what ``build`` prints and
    the paired comparisons (evaluation/paired.py) compare."""
    protocol = project.protocol
    seed = random_seed(project, release)
    if registry.get(protocol).board == "votes":
        raise LeaderboardError("a board rated from pairwise votes has no item scores to compare row by row")
    if registry.get(protocol).board == "generators":
        return _generator_rows(protocol, project, release, items, judge=judge, seed=seed), None
    if judge is not None:
        raise LeaderboardError("--judge applies to video-rating projects only")
    scoring = registry.get(protocol).scoring
    rows = [
        RowScores(selectors.job_name(job), scoring.score(items, selectors.job_answers(job)), items, job)
        for job in selectors.latest_finished_jobs(project, release)
    ]
    if items:
        rows.append(
            RowScores("Random", scoring.score(items, answer_sets.random_answers(protocol, items, seed=seed)), items)
        )
    human: dict[str, int] | None = None
    if answer_sets.protocol_has_human_row(protocol):
        blind, with_suggestion = selectors.blind_answers(items)
        # Answers given with a model suggestion on the form are not blind: never in the Human row.
        human = {
            "blind_answers": sum(len(v) for v in blind.values()),
            "items": len(blind),
            "left_out_with_suggestion": with_suggestion,
        }
        if blind:
            answered = [item for item in items if blind.get(item.key)]  # the Human matrix's rows, in order
            rows.append(RowScores("Human", answer_sets.score_blind_answers(protocol, items, blind), answered))
    return rows, human


def build(
    project: Project,
    *,
    release_version: str | None = None,
    judge: str | None = None,
    n_boot: int = N_BOOT,
    rank_by: str | None = None,
    intervals: vote_intervals.IntervalChoice = vote_intervals.DEFAULT,
) -> dict[str, Any]:
    """``rank_by``: one of ranking.choices(protocol) (ranking.UnknownRanking otherwise); the default's when None.
    ``intervals``: a votes board's interval (vote_intervals.py); other boards take the default only."""
    rank_by = ranking.resolve(project.protocol, rank_by)
    release = selectors.release_for(project, release_version)
    protocol = project.protocol
    if registry.get(protocol).board == "votes":
        return _vote_board(project, release, judge=judge, rank_by=rank_by, intervals=intervals)
    # A frozen release of a protocol with an array form is read as arrays (evaluation/scoring/
    # choice_arrays.py), the same scores as the records below without an object per answer.
    arrays = None
    if judge is None and choice_arrays.array_form(protocol):
        jobs = [(selectors.job_name(job), job) for job in selectors.latest_finished_jobs(project, release)]
        arrays = choice_arrays.board_rows(protocol, release, jobs, seed=random_seed(project, release))
    if arrays is not None:
        scored, human, codes = [RowScores(name, m, (), job) for name, m, job in arrays[0]], None, arrays[1]
    else:
        items = selectors.scoring_items(project, release)
        (scored, human), codes = row_scores(project, release, items, judge=judge), None
    rows = [
        _row(r.name, protocol, answer_sets.finish(protocol, r.matrix, n_boot=n_boot), r.units, codes) for r in scored
    ]
    for row, r in zip(rows, scored):
        if r.job is not None:
            row["usage"] = usage_of(protocol, r.job, r.matrix)
    key = cluster_key(protocol)
    board = {
        "project": project.slug,
        "release": release.version if release is not None else None,
        "protocol": protocol,
        "cluster_key": list(key) if isinstance(key, tuple) else key,
        "rows": rows,
    }
    if human is not None:
        board["human"] = human
    # Leaderboard order (ranking.py): every page, chart, API answer and download keeps it.
    return ranking.reordered(board, rank_by)


def _vote_board(
    project: Project, release, *, judge: str | None, rank_by: str, intervals: vote_intervals.IntervalChoice
) -> dict[str, Any]:
    """A board whose rows are rated from the human votes of a pairwise form (``Protocol.board ==
    "votes"``): the protocol's scoring module's ``vote_board`` over the votes on the release's
    items (or, live, the verified and annotated items'). No model answers, no Random row."""
    if judge is not None:
        raise LeaderboardError("--judge applies to video-rating projects only")
    protocol = project.protocol
    items = selectors.vote_items(project, release)
    # The rater screen, and the votes less those of the raters a researcher excluded (rater_exclusion.py).
    votes, screen = rater_exclusion.screened(project, items, selectors.votes_by_item(items))
    found = registry.get(protocol).scoring.vote_board(items, votes, **intervals.options())
    key = cluster_key(protocol)
    board = {
        "project": project.slug,
        "release": release.version if release is not None else None,
        "protocol": protocol,
        "cluster_key": list(key) if isinstance(key, tuple) else key,
        "rows": found["rows"],
        "pairwise": found["pairwise"],
    }
    notes = found["notes"] + screen.pop("screen_notes", [])
    if notes:
        board["notes"] = notes
    board.update(screen)
    return ranking.reordered(board, rank_by)


def _generator_rows(protocol, project, release, items, *, judge: str | None, seed: int) -> list[RowScores]:
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
            rows.append(
                RowScores(generator, scoring.score_ratings(by_generator[generator], per_item), by_generator[generator])
            )
    else:
        jobs = selectors.judge_jobs(project, release, judge)
        if not jobs:
            raise LeaderboardError(f"no finished judge named {judge!r} on this release")
        answers = selectors.job_answers(jobs[0])
        for generator in sorted(by_generator):
            rows.append(RowScores(generator, scoring.score(by_generator[generator], answers), by_generator[generator]))
    if items:
        rows.append(RowScores("Random", scoring.random_matrix(items, seed=seed), items))
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
    row = _jsonable(_row(selectors.job_name(job), job.protocol, scored, items))
    # The job's count of correct answers: inference keeps it for the job page's cost per correct answer.
    row["correct"] = correct_count(job.protocol, scored.matrix)
    return row


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
