"""Integrity of arena votes: a per-rater consistency screen. Plain Python + numpy/SciPy.

A rater who clicks at random, or always the same side, disagrees with the board far more often than
the other raters do. For each decisive vote (a or b) there is an expected winner: the item's
``gold_winner`` ("a" or "b", a gold pair whose better side is known) where the payload carries one,
else the model the current fit rates higher. A rater's misses are their decisive votes for the
other side (on a gold pair a tie or "both bad" is a miss too: its better side is known). The screen
compares the rater's miss count with the rate of all the other raters by a one-sided exact binomial
test (is this rater's miss rate above theirs?), adjusts the p values across raters by Holm
(protocols/kit/paired.py) and flags the raters whose adjusted p is below ``level``. Votes on pairs
between equally rated models carry no expected winner and are left out.

The fit is the board's (protocols/kit/pairwise/), from every rater's votes (one rater among many
moves it little); votes that admit no finite fit screen gold pairs only. Spec: docs/protocols/arena.md.

A researcher may exclude raters from the board (evaluation/rater_exclusion.py, which reaches this
module as the protocol's ``rater_screen_module``): their keys are kept in the project's settings
under ``EXCLUDED_SETTING`` (checked by project_settings.py), and ``without_raters`` leaves their
votes out of what the board is fitted on. The screen itself is
always of every rater's votes, so an excluded rater's figures stay in view.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from protocols.kit.paired import holm

from .fields import HEADLINE_CRITERION, SIDES, WINNERS
from .project_settings import EXCLUDED_SETTING, excluded_raters_clean, rater_key_valid  # noqa: F401 (the hook's names)
from .scoring import battles, ratings

LEVEL = 0.05  # Holm-adjusted p below which a rater is flagged
MIN_VOTES = 10  # raters with fewer screened votes are listed but never flagged


@dataclass(frozen=True)
class RaterScreen:
    rater: str
    votes: int  # screened votes: decisive votes with an expected winner, and every gold vote
    misses: int
    gold_votes: int
    gold_misses: int
    miss_rate: float | None
    others_rate: float | None  # the miss rate of every other rater's screened votes
    p: float | None  # one-sided exact binomial p; None when not tested
    p_holm: float | None
    flagged: bool

    def to_json(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "rater": self.rater,
            "votes": self.votes,
            "misses": self.misses,
            "gold_votes": self.gold_votes,
            "gold_misses": self.gold_misses,
            "miss_rate": r(self.miss_rate),
            "others_rate": r(self.others_rate),
            "p": None if self.p is None else float(f"{self.p:.4g}"),
            "p_holm": None if self.p_holm is None else float(f"{self.p_holm:.4g}"),
            "flagged": self.flagged,
        }


def expected_winners(items: Sequence[Any], rating: Mapping[str, float] | None) -> dict[Any, tuple[str, bool]]:
    """item key -> (the side expected to win, whether it is a gold pair), for the items that have
    one: ``gold_winner`` first, else the higher rating (none between equal ratings, or no fit)."""
    out: dict[Any, tuple[str, bool]] = {}
    for item in items:
        payload = item.payload
        gold = payload.get("gold_winner")
        if gold is not None:
            if gold not in SIDES:
                raise ValueError(f"item {item.key!r}: gold_winner is {gold!r}; expected one of {', '.join(SIDES)}")
            out[item.key] = (gold, True)
            continue
        if rating is None:
            continue
        ra, rb = rating.get(str(payload["model_a"])), rating.get(str(payload["model_b"]))
        if ra is None or rb is None or ra == rb:
            continue
        out[item.key] = ("a" if ra > rb else "b", False)
    return out


def screen(
    items: Iterable[Any],
    votes: Mapping[Any, Sequence[tuple[str, Mapping[str, Any]]]],
    *,
    level: float = LEVEL,
    min_votes: int = MIN_VOTES,
) -> list[RaterScreen]:
    """The screen of every rater with a screened vote, most suspicious first (see the module).

    ``items``: the arena items (``.key``, ``.payload``); ``votes``: item key -> [(rater, stored
    answer)], as the board reads them (scoring.py)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1; got {level}")
    items = list(items)
    rating = _fit_ratings(items, votes)
    expected = expected_winners(items, rating)
    tally: dict[str, list[int]] = {}  # rater -> [votes, misses, gold votes, gold misses]
    for item in items:
        if item.key not in expected:
            continue
        side, gold = expected[item.key]
        for rater, result in votes.get(item.key, ()):
            winner = result.get("winner")
            if winner not in WINNERS or (not gold and winner not in SIDES):
                continue
            miss = int(winner != side)
            row = tally.setdefault(str(rater), [0, 0, 0, 0])
            row[0] += 1
            row[1] += miss
            if gold:
                row[2] += 1
                row[3] += miss
    total_votes = sum(row[0] for row in tally.values())
    total_misses = sum(row[1] for row in tally.values())
    partial: list[tuple[str, list[int], float | None, float | None]] = []
    for rater, (n, miss, _gv, _gm) in tally.items():
        others_n, others_miss = total_votes - n, total_misses - miss
        others_rate = others_miss / others_n if others_n else None
        p = None
        if n >= min_votes and others_rate is not None:
            # A reference rate of 0 would make any miss infinitely unlikely; keep it off the edges.
            p0 = min(max(others_rate, 0.5 / others_n), 1.0 - 0.5 / others_n)
            p = float(stats.binomtest(miss, n, p0, alternative="greater").pvalue)
        partial.append((rater, tally[rater], others_rate, p))
    adjusted = holm([p for *_, p in partial])
    out = [
        RaterScreen(
            rater=rater,
            votes=row[0],
            misses=row[1],
            gold_votes=row[2],
            gold_misses=row[3],
            miss_rate=row[1] / row[0],
            others_rate=others_rate,
            p=p,
            p_holm=p_adj,
            flagged=p_adj is not None and p_adj < level,
        )
        for (rater, row, others_rate, p), p_adj in zip(partial, adjusted, strict=True)
    ]
    return sorted(out, key=lambda s: (s.p_holm if s.p_holm is not None else 2.0, s.rater))


def _fit_ratings(items: Sequence[Any], votes) -> dict[str, float] | None:
    """The board's ratings by model from the headline votes, or None without a finite fit."""
    a, b, outcome = battles(items, votes, HEADLINE_CRITERION)
    if len(set(a) | set(b)) < 2:
        return None
    try:
        fitted = ratings(a, b, outcome)
    except ValueError:
        return None
    return {model: float(r) for model, r in zip(fitted.models, np.asarray(fitted.rating), strict=True)}


def without_raters(
    votes: Mapping[Any, Sequence[tuple[str, Mapping[str, Any]]]], excluded: Iterable[str]
) -> tuple[dict[Any, list[tuple[str, Mapping[str, Any]]]], int]:
    """The votes less those of the ``excluded`` raters, and how many were left out."""
    gone = set(excluded)
    kept: dict[Any, list[tuple[str, Mapping[str, Any]]]] = {}
    dropped = 0
    for key, rows in votes.items():
        left = [(rater, result) for rater, result in rows if str(rater) not in gone]
        dropped += len(rows) - len(left)
        if left:
            kept[key] = left
    return kept, dropped
