"""A board's rows compared with one of them, the baseline, item by item on the board's ranking metric
(the statistics: protocols/kit/paired.py; docs/statistics.md, "Clustered errors and paired comparisons").

The units compared are the items both rows scored; on a board of generators (each generator has
its own videos) they are the clusters both generators have, i.e. the prompts, a generator's
score on a prompt being the mean over its videos of that prompt. The bootstrap resamples whole
clusters where the protocol names a cluster key.

The comparisons are computed from the rows' item scores, once per state of the data (board_cache).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from annotation.models import Project
from protocols import registry
from protocols.kit import clustered
from protocols.kit import paired as paired_stats
from protocols.kit.bootstrap import N_BOOT

from . import board_cache, leaderboard, ranking, selectors
from .scoring import answer_sets

PARAMETER = "baseline"  # the query parameter (and the command's --baseline)


class UnknownBaseline(ValueError):
    """A baseline that is no row of the board; the message names the rows there are."""


def unit_scores(
    protocol: str, row: leaderboard.RowScores, column: int, by_cluster: bool
) -> dict[Hashable, tuple[float, Hashable]]:
    """unit id -> (the row's score there, the unit's cluster), counted cells only."""
    values, counted = row.matrix.float_values()
    labels = leaderboard.unit_clusters(protocol, row.units)
    sums: dict[Hashable, list] = {}
    for i, unit in enumerate(row.units):
        if not counted[i, column]:
            continue
        uid = labels[i] if by_cluster else unit.key
        entry = sums.setdefault(uid, [0.0, 0, labels[i]])
        entry[0] += float(values[i, column])
        entry[1] += 1
    return {uid: (total / count, label) for uid, (total, count, label) in sums.items()}


def compare_rows(
    protocol: str, rows: list[leaderboard.RowScores], *, baseline: str, metric: str, n_boot: int = N_BOOT
) -> dict[str, Any]:
    """{"baseline", "metric", "level", "resampled", "comparisons": [...]} (protocols/kit/paired.py
    ``compare`` per other row, then Holm across them); differences on the board's printed scale."""
    names = [r.name for r in rows]
    if baseline not in names:
        raise UnknownBaseline(
            f"{PARAMETER}: {baseline!r} is not a row of this board; its rows: {', '.join(names) or 'none'}"
        )
    key = leaderboard.cluster_key(protocol)
    out: dict[str, Any] = {
        "baseline": baseline,
        "metric": metric,
        "level": paired_stats.LEVEL,
        "resampled": "clusters" if key else "items",
        "comparisons": [],
    }
    base_row = rows[names.index(baseline)]
    if metric not in base_row.matrix.keys:
        out["note"] = f"{metric} is not a mean of item scores: it has no paired comparison"
        return out
    column = base_row.matrix.column(metric)
    by_cluster = registry.get(protocol).board == "generators"
    scale = 100.0 if answer_sets.is_percent(protocol) else 1.0
    places = registry.get(protocol).places
    base = unit_scores(protocol, base_row, column, by_cluster)
    for row in rows:
        if row.name == baseline:
            continue
        own = unit_scores(protocol, row, column, by_cluster)
        shared = [uid for uid in own if uid in base]
        codes, _ = clustered.cluster_codes([base[uid][1] for uid in shared])
        result = paired_stats.compare(
            [own[uid][0] for uid in shared], [base[uid][0] for uid in shared], codes, n_boot=n_boot
        )
        if result["difference"] is not None:
            result["difference"] = round(result["difference"] * scale, places)
        if result["ci"] is not None:
            result["ci"] = [round(bound * scale, places) for bound in result["ci"]]
        out["comparisons"].append({"model": row.name, **result})
    paired_stats.adjust(out["comparisons"])
    return out


def comparisons(
    project: Project,
    *,
    release_version: str | None = None,
    judge: str | None = None,
    rank_by: str | None = None,
    baseline: str,
    n_boot: int = N_BOOT,
) -> dict[str, Any]:
    """The paired comparisons of a board against ``baseline`` on its ranking's headline metric
    (UnknownBaseline for a name that is no row; leaderboard.LeaderboardError as ``build``)."""
    release = selectors.release_for(project, release_version)
    items = selectors.scoring_items(project, release)
    rows, _ = leaderboard.row_scores(project, release, items, judge=judge)
    metric = ranking.headline(project.protocol, rank_by)
    return compare_rows(project.protocol, rows, baseline=baseline, metric=metric, n_boot=n_boot)


def in_board_order(result: dict[str, Any], board: dict[str, Any]) -> dict[str, Any]:
    position = {row["model"]: i for i, row in enumerate(board["rows"])}
    ordered = sorted(result["comparisons"], key=lambda c: position.get(c["model"], len(position)))
    return {**result, "comparisons": ordered}


def with_comparisons(project: Project, board: dict[str, Any], *, judge: str | None, baseline: str) -> dict[str, Any]:
    """The board (as board_cache serves it) with "paired" added, computed once per state of the data."""
    names = [row["model"] for row in board["rows"]]
    if registry.get(project.protocol).board == "votes":  # ratings fitted from votes: no item scores to pair
        raise UnknownBaseline(f"{PARAMETER}: a board rated from pairwise votes has no paired comparisons")
    if baseline not in names:  # refused before any scoring
        raise UnknownBaseline(
            f"{PARAMETER}: {baseline!r} is not a row of this board; its rows: {', '.join(names) or 'none'}"
        )
    rank_by = board.get("rank_by")
    extra = f"{judge}:{ranking.signature(project.protocol, rank_by)}:{baseline}"
    result = board_cache.cached(
        "paired",
        project,
        board["release"],
        extra,
        lambda: comparisons(project, release_version=board["release"], judge=judge, rank_by=rank_by, baseline=baseline),
    )
    return {**board, "paired": in_board_order(result, board)}
