"""What a leaderboard is ordered by: each protocol's headline metric, its tie-break, and the order
and ranks of a board's rows. The one definition the table, the chart, the API, the downloads and
the cached boards follow (they all read rows in the order ``order_and_rank`` leaves them). No Django.

The headline is the figure the protocol's source paper judges models by, with its reasons, in
each protocol's package (``Protocol.ranking``, protocols/<name>/__init__.py). Ties on the headline
go to the following keys in turn (the paper's next summary figures, in its column order), then to
the model name; a missing value sorts below every number.

A researcher may pick another ranking where the protocol offers one (``Protocol.alternative_rankings``;
the ``rank_by`` parameter of the page, its downloads, the API and the command), named by its
headline metric.
Every ranking reads the same row values: only the order and the ranks differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from protocols import registry

from .tables import row_value


def interval_ranks(values: Sequence[float | None], cis: Sequence[Sequence[float] | None]) -> list[int | None]:
    """Rank 1 = best, respecting the intervals and never inverting the values.

    First, rank = 1 + number of rows whose interval lies wholly above this row's (their lower
    bound exceeds its upper bound): a row only drops below rows it is separated from. Then, going
    down the values, a row takes at least the rank of every row with a higher value (a running
    max), so a lower-valued row never ranks above a higher-valued one. The second step can put a
    row below an overlapping one only when a row valued between them is separated from the
    higher one (60 [55, 65] > 40 [35, 45] > 10 [5, 54]: 10 cannot rank above 40). Rows without a
    value or interval get None.
    """
    ranked = [i for i, (v, ci) in enumerate(zip(values, cis)) if v is not None and ci is not None]
    base = {
        i: 1 + sum(1 for j in ranked if j != i and cis[j][0] > cis[i][1])  # type: ignore[index]
        for i in ranked
    }
    out: list[int | None] = [None] * len(values)
    running = 0
    order = sorted(ranked, key=lambda i: -values[i])  # type: ignore[operator]
    k = 0
    while k < len(order):
        group = [i for i in order[k:] if values[i] == values[order[k]]]
        for i in group:
            out[i] = max(base[i], running)
        running = max(running, *(out[i] for i in group))  # type: ignore[type-var]
        k += len(group)
    return out


# protocol name -> its default ranking (headline first, then its tie-breaks), and name -> keys of
# the other rankings it offers: each protocol's ``ranking`` / ``alternative_rankings`` (protocols/base.py).
RANKING: Mapping[str, tuple[str, ...]] = registry.Attribute("ranking")
ALTERNATIVES: Mapping[str, dict[str, tuple[str, ...]]] = registry.Attribute("alternative_rankings")
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
        raise UnknownRanking(
            f"{PARAMETER}: {choice!r} is not a ranking of {protocol} leaderboards; allowed values: {', '.join(allowed)}"
        )
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

    Rank: interval-respecting (interval_ranks above): a row ranks above another only when
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
    return {
        **board,
        "rows": rows,
        "rank_by": resolve(protocol, choice),
        "ranked_by": list(ranking_keys(protocol, choice)) + ["model"],
    }
