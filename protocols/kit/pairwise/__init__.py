"""Ratings from pairwise votes: Bradley–Terry with Davidson ties, on the Elo scale, with intervals.
Plain Python + numpy/scipy, no Django. Definitions: docs/statistics.md.

- ``counts``: votes (one row each, or counts per pair) -> ``PairCounts``, win rates and the matrices;
- ``likelihood``: the model's log-likelihood, the Newton fit (batched) and when a finite fit exists;
- ``clusters``: the votes grouped by cluster (prompt) for the cluster-robust sandwich;
- ``intervals``: sandwich (plain or clustered) and bootstrap intervals on the centred ratings, the rank by overlap;
- ``flip``: the votes that would have to change to flip #1;
- ``ratings``: ``rate`` puts the board together (``Ratings.rows()`` are leaderboard rows).
"""

from .clusters import VoteClusters, vote_clusters
from .counts import OUTCOMES, PairCounts, from_battles, from_counts
from .flip import Flip, votes_to_flip_top
from .intervals import ELO, overlap_ranks, to_ratings
from .ratings import METHODS, Ratings, rate

__all__ = [
    "ELO",
    "METHODS",
    "OUTCOMES",
    "Flip",
    "PairCounts",
    "Ratings",
    "VoteClusters",
    "from_battles",
    "from_counts",
    "overlap_ranks",
    "rate",
    "to_ratings",
    "vote_clusters",
    "votes_to_flip_top",
]
