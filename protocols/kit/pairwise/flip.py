"""How many votes would have to change for another model to be rated above the current #1.

Found greedily, so the count is an upper bound on the true minimum: for each challenger c, change one
kind of vote at a time among those that lower #1 or raise c — a vote #1 won or tied becomes a vote
#1 lost, a vote c lost or tied becomes a vote c won (a "both bad" counts as a tie) — choosing the
kind that the linearised fit says closes the gap (rating of #1 minus rating of c) most per vote,
then refit exactly; stop when c is rated strictly above #1. While the linearised estimate says many
votes are still needed, up to half of that many votes of the chosen kind change in one step; near
the end one vote at a time. Votes between two other models are never changed. The answer is the
smallest count over the challengers. Definitions: docs/statistics.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import likelihood
from .counts import PairCounts
from .intervals import ELO, to_ratings

MAX_STEPS = 10_000  # changes of one kind per step; bounds the search on any input


@dataclass(frozen=True)
class Flip:
    votes: int | None  # None when no challenger could be lifted above #1 by these changes
    top: str
    challenger: str | None
    changes: list[dict] = field(default_factory=list)  # {"between": [m1, m2], "from", "to", "votes"}

    def to_json(self) -> dict:
        return {"votes": self.votes, "top": self.top, "challenger": self.challenger, "changes": self.changes}


def votes_to_flip_top(counts: PairCounts, theta: np.ndarray, eta: float, *, ref: int) -> Flip:
    ratings = to_ratings(theta)
    top = int(np.argmax(ratings))
    best: tuple[int, int, list[dict]] | None = None
    for challenger in np.argsort(-ratings, kind="stable"):
        if challenger == top:
            continue
        found = _flip_one(
            counts, theta, eta, ref=ref, top=top, challenger=int(challenger), limit=None if best is None else best[0]
        )
        if found is not None and (best is None or found[0] < best[0]):
            best = (found[0], int(challenger), found[1])
    names = counts.models
    if best is None:
        return Flip(votes=None, top=names[top], challenger=None)
    return Flip(votes=best[0], top=names[top], challenger=names[best[1]], changes=best[2])


def _moves(counts: PairCounts, top: int, challenger: int) -> list[tuple[int, int, int]]:
    """(pair, from column, to column) for every kind of change that lowers top or raises challenger."""
    moves = []
    for p, (i, j) in enumerate(zip(counts.first.tolist(), counts.second.tolist(), strict=True)):
        for side, other_col, own_col in ((i, 1, 0), (j, 0, 1)):  # own_col: this side won; other_col: it lost
            if side == top:  # top's wins and ties become top's losses
                moves += [(p, own_col, other_col), (p, 2, other_col), (p, 3, other_col)]
            elif side == challenger:  # the challenger's losses and ties become its wins
                moves += [(p, other_col, own_col), (p, 2, own_col), (p, 3, own_col)]
    return sorted(set(moves))


def _flip_one(counts, theta, eta, *, ref: int, top: int, challenger: int, limit: int | None):
    k, design = counts.n_models, likelihood.Design.of(counts)
    table = np.stack([counts.wins, counts.losses, counts.ties, counts.both_bad]).astype(np.int64)
    moves = _moves(counts, top, challenger)
    blocked: set[tuple[int, int, int]] = set()
    changed: dict[tuple[int, int, int], int] = {}
    spent = 0
    for _ in range(MAX_STEPS):
        ratings = to_ratings(theta)
        gap = ratings[top] - ratings[challenger]
        if gap < 0:
            return spent, _describe(counts, changed)
        if limit is not None and spent >= limit:
            return None  # already no better than a challenger found before
        # Linearised effect on the gap of moving one vote: the score's change is the change of the
        # vote's indicators, so d(params) = H^-1 d(score) and d(gap) = ELO * (e_top - e_c) . d(params).
        w, lo, t = table[0], table[1], table[2] + table[3]
        terms = likelihood.pair_terms(design, theta[None], np.array([eta]), w, lo, t)
        info = likelihood.assemble(design, terms.info_aa, terms.info_ae, terms.info_ee)[0]
        free = [m for m in range(k) if m != ref] + ([k] if np.isfinite(eta) else [])
        target = np.zeros(k + 1)
        target[top], target[challenger] = 1.0, -1.0
        u = np.zeros(k + 1)
        u[free] = np.linalg.solve(info[np.ix_(free, free)], target[free])
        best_move, best_effect = None, 0.0
        for move in moves:
            p, src, dst = move
            if table[src, p] == 0 or move in blocked:
                continue
            effect = ELO * _score_change(u, counts.first[p], counts.second[p], src, dst, k)
            if effect < best_effect:
                best_move, best_effect = move, effect
        if best_move is None:
            return None
        p, src, dst = best_move
        want = int(np.floor(0.5 * gap / -best_effect))
        size = max(1, min(int(table[src, p]), want))
        while True:
            trial = table.copy()
            trial[src, p] -= size
            trial[dst, p] += size
            w, lo, t = trial[0], trial[1], trial[2] + trial[3]
            if likelihood.estimable_problem(counts, w, lo, t) is None:
                break
            if size == 1:
                blocked.add(best_move)  # this change would leave no finite rating: not used
                trial = None
                break
            size = max(1, size // 2)
        if trial is None:
            continue
        fit = likelihood.fit(counts, trial[0], trial[1], trial[2] + trial[3], ref=ref, theta0=theta, eta0=eta)
        table, theta, eta = trial, fit.theta[0], float(fit.eta[0])
        changed[best_move] = changed.get(best_move, 0) + size
        spent += size
    return None


def _score_change(u: np.ndarray, i: int, j: int, src: int, dst: int, k: int) -> float:
    """u . (change of the log-likelihood's gradient when one vote moves from column src to dst)."""
    margin = {0: 1.0, 1: -1.0, 2: 0.0, 3: 0.0}  # wins - losses of a vote in each column
    tie = {0: 0.0, 1: 0.0, 2: 1.0, 3: 1.0}
    d_margin = margin[dst] - margin[src]
    d_tie = tie[dst] - tie[src]
    return 0.5 * d_margin * (u[i] - u[j]) + d_tie * u[k]


def _describe(counts: PairCounts, changed: dict[tuple[int, int, int], int]) -> list[dict]:
    names = counts.models
    out = []
    for (p, src, dst), votes in sorted(changed.items()):
        i, j = int(counts.first[p]), int(counts.second[p])
        word = {0: f"{names[i]} won", 1: f"{names[j]} won", 2: "tie", 3: "both bad"}
        out.append({"between": [names[i], names[j]], "from": word[src], "to": word[dst], "votes": votes})
    return out
