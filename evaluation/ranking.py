"""What a leaderboard is ordered by: each protocol's headline metric, its tie-break, and the order
and ranks of a board's rows. The one definition the table, the chart, the API, the downloads and
the cached boards follow (they all read rows in the order ``order_and_rank`` leaves them). No Django.

The headline is the figure the protocol's source paper judges models by (PROTOCOLS.md names the
papers in ../shared/seeds/):
- status: ROA. The paper measures VLMs "in terms of the proposed ROA metric"; its breakdown
  tables print only rigorous accuracies, and its "highest among open-weight VLMs" (Qwen2.5-VL,
  5.45) holds for ROA, not for OA (LLaVA-OneVision has the higher OA).
- changeit: state accuracy, standard candidates, whole image (the first column of its Table 4).
- visualtrans: overall accuracy (the last column of its Table 2, the figure its text compares).
- m3verse: overall (the first column of its Table 2).
- oscbench: the state-change score, the mean of state-change accuracy and consistency (the
  benchmark's subject; its Table 4; PROTOCOLS.md §5's generator score).
Ties on the headline go to the following keys in turn (the paper's next summary figures, in its
column order), then to the model name; a missing value sorts below every number.

A researcher may pick another ranking where the protocol offers one (the ``rank_by`` parameter of
the page, its downloads, the API and the command), named by its headline metric:
- oscbench ``criteria_mean``: the mean of the eight criteria, as the paper's Figure 3 ranks
  generators ("averaging the scores of all evaluation dimensions") and as the correlation page's
  system-level tau-b ranks them; ties to the state-change score, then as the default.
Every ranking reads the same row values: only the order and the ranks differ.
"""
from __future__ import annotations

from typing import Any, Sequence

from .scoring.common import interval_ranks
from .tables import row_value

RANKING: dict[str, tuple[str, ...]] = {
    "status": ("roa", "oa"),
    "changeit": ("state_acc_standard_full", "state_acc_standard_crop", "state_acc_distractor_full",
                 "state_acc_distractor_crop"),
    "visualtrans": ("overall", "spatial_mean", "procedural_mean", "quantitative"),
    "m3verse": ("overall", "intra", "inter"),
    "oscbench": ("state_change", "osc_accuracy", "osc_consistency"),
}


# The rankings a researcher may pick instead of the default, by name (their headline metric).
ALTERNATIVES: dict[str, dict[str, tuple[str, ...]]] = {
    "oscbench": {"criteria_mean": ("criteria_mean", "state_change", "osc_accuracy", "osc_consistency")},
}
PARAMETER = "rank_by"  # the query parameter (and the command's --rank-by) that picks one


class UnknownRanking(ValueError):
    """A ``rank_by`` value the protocol has no ranking for; the message names the allowed values."""


def choices(protocol: str) -> dict[str, tuple[str, ...]]:
    """Name -> keys of every ranking of a protocol's boards, the default first."""
    default = RANKING[protocol]
    return {default[0]: default, **ALTERNATIVES.get(protocol, {})}


def default_choice(protocol: str) -> str:
    return RANKING[protocol][0]


def resolve(protocol: str, choice: str | None) -> str:
    """The ranking's name: the default for None or "", else ``choice`` if the protocol has it."""
    if choice is None or choice == "":
        return default_choice(protocol)
    allowed = choices(protocol)
    if choice not in allowed:
        raise UnknownRanking(f"{PARAMETER}: {choice!r} is not a ranking of {protocol} leaderboards; "
                             f"allowed values: {', '.join(allowed)}")
    return choice


def ranking_keys(protocol: str, choice: str | None = None) -> tuple[str, ...]:
    """The headline first, then its tie-breaks (before the model name)."""
    return choices(protocol)[resolve(protocol, choice)]


def headline(protocol: str, choice: str | None = None) -> str:
    """The metric a protocol's leaderboard is ranked by and its chart shows."""
    return ranking_keys(protocol, choice)[0]


def signature(protocol: str, choice: str | None = None) -> str:
    """Names the ordering, for cache keys: a board cached under another ordering is never served."""
    return "order:" + ",".join(ranking_keys(protocol, choice)) + ",model"


def _sort_key(row: dict[str, Any], keys: Sequence[str]) -> tuple:
    # Headline descending, then its rank, then the tie-break keys descending, then the name; a
    # missing value sorts after every number.
    def descending(value: float | None) -> tuple:
        return (1, 0.0) if value is None else (0, -value)

    head, *ties = (row_value(row, key)[0] for key in keys)
    rank = row.get("rank")
    return (descending(head), (1, 0) if rank is None else (0, rank), *(descending(v) for v in ties), str(row["model"]))


def order_and_rank(rows: list[dict[str, Any]], protocol: str, choice: str | None = None) -> list[dict[str, Any]]:
    """Set each row's "rank" on the headline and return the rows in leaderboard order.

    Rank: interval-respecting (scoring.common.interval_ranks): a row ranks above another only when
    their 95 % intervals separate, so several rows can share a rank. Order: headline descending;
    equal headline values by rank, then the tie-break keys descending, then the model name.
    """
    keys = ranking_keys(protocol, choice)
    cells = [row_value(row, keys[0]) for row in rows]
    for row, rank in zip(rows, interval_ranks([v for v, _ in cells], [ci for _, ci in cells])):
        row["rank"] = rank
    return sorted(rows, key=lambda row: _sort_key(row, keys))


def reordered(board: dict[str, Any], choice: str | None) -> dict[str, Any]:
    """A copy of a board in another ranking's order: the very rows and values, other ranks."""
    protocol = board["protocol"]
    rows = order_and_rank([dict(row) for row in board["rows"]], protocol, choice)
    return {**board, "rows": rows, "rank_by": resolve(protocol, choice),
            "ranked_by": list(ranking_keys(protocol, choice)) + ["model"]}
