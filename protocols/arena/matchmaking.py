"""Matchmaking: which pair of models the next arena votes should compare. Plain Python + numpy.

Uniform pairing spends votes on pairs whose winner is already clear (a vote between models 600
points apart carries an eighth of the information of one between equals), leaves the models at the
ends of the board with the widest intervals, and gives a model that joins a board late only 2 / K
of the votes (bench/README.md, "Arena matchmaking", has what that costs). Active sampling (Chiang et al. 2024, "Chatbot
Arena", arXiv 2403.04132, eq. 9) instead draws a pair with probability proportional to how much one
more vote on it would narrow an interval, mixed with a uniform share so that every pair keeps being
seen (exposure stays even and a wrong early fit is corrected).

Three rules for that gain, both from the current Bradley–Terry–Davidson fit (protocols/kit/pairwise/):
- ``"rating"`` (default): the summed narrowing of the models' rating intervals, sum over models of
  sd_k - sd_k' where sd_k' is the standard error after one more expected vote on the pair (the
  information of one vote added by a rank-two update of the parameters' covariance). This aims at
  the board's intervals themselves.
- ``"widest"``: the same narrowing of sum over models of sd_k**8, dominated by the widest
  intervals: aims at the largest interval rather than the mean one.
- ``"pair"``: eq. 9 as the paper writes it, on the pair's own comparison: sqrt(s²/n) - sqrt(s²/(n+1)),
  s² the variance of one vote's score (win 1, tie 1/2, loss 0) under the fit and n the pair's votes.

The fit for matchmaking carries ``prior_votes`` pseudo-votes on every pair of models (a third each a
win, a loss and a tie), a weak prior that gives a finite fit from the very first vote (the board's
own fit, protocols/kit/pairwise/ratings.py, has none and refuses votes without a finite estimate).

The queue hands out items, not pairs: ``item_order`` turns the pair weights into an order of the
open items (a weighted draw without replacement, each item carrying its pair's weight shared among
the pair's open items), and ``item_priorities`` does the whole thing from the arena's items and
votes, as the queue's refresh job calls it: {item key: rank}, 0 first. Within the queue's rules
(depth first, one vote per annotator and item) the rank only orders items of one level.
Spec: docs/protocols/arena.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from protocols.kit.pairwise import OUTCOMES, PairCounts, likelihood
from protocols.kit.pairwise.intervals import centring

from .fields import HEADLINE_CRITERION
from .scoring import battles

RULES = ("rating", "widest", "pair")
WIDEST_POWER = 8  # "widest": the gain in the sum of sd**8, which the largest intervals dominate
UNIFORM_SHARE = 0.2  # the share of votes drawn uniformly over the candidate pairs
PRIOR_VOTES = 1.0  # pseudo-votes per pair of models in the matchmaking fit (see the module)


def pair_key(model_a: str, model_b: str) -> tuple[str, str]:
    """A pair of models in name order: the pair is the same whichever side each was shown on."""
    a, b = str(model_a), str(model_b)
    if a == b:
        raise ValueError(f"a pair compares two different models; got {a!r} twice")
    return (a, b) if a < b else (b, a)


@dataclass(frozen=True)
class PairWeights:
    """Per candidate pair (in the order given): the chance the next vote goes to it, the active
    rule's gain before mixing, and the votes it has had."""

    pairs: tuple[tuple[str, str], ...]  # each in name order (pair_key)
    weight: np.ndarray  # (P,) sums to 1
    gain: np.ndarray  # (P,) >= 0
    votes: np.ndarray  # (P,) real votes so far
    rule: str
    uniform_share: float

    def as_dict(self) -> dict[tuple[str, str], float]:
        return {pair: float(w) for pair, w in zip(self.pairs, self.weight, strict=True)}

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Indices into ``pairs`` for ``size`` votes, drawn with replacement by weight."""
        return rng.choice(len(self.pairs), size=size, p=self.weight)


def tally(
    pairs: Sequence[tuple[str, str]], model_a: Sequence[str], model_b: Sequence[str], outcome: Sequence[str]
) -> tuple[tuple[str, ...], list[tuple[str, str]], np.ndarray]:
    """(models in name order, every pair that is a candidate or has votes, counts (rows, 3): votes
    for the pair's first model, for its second, ties with both bad). The candidates come first."""
    if not (len(model_a) == len(model_b) == len(outcome)):
        raise ValueError(
            f"model_a, model_b and outcome differ in length ({len(model_a)}, {len(model_b)}, {len(outcome)})"
        )
    rows: dict[tuple[str, str], int] = {}
    for a, b in pairs:
        rows.setdefault(pair_key(a, b), len(rows))
    counts: dict[tuple[str, str], list[int]] = {}
    for pos, (a, b, won) in enumerate(zip(model_a, model_b, outcome, strict=True)):
        if won not in OUTCOMES:
            raise ValueError(f"outcome[{pos}] is {won!r}; expected one of {', '.join(OUTCOMES)}")
        key = pair_key(a, b)
        row = counts.setdefault(key, [0, 0, 0])
        if won in ("tie", "both_bad"):
            row[2] += 1
        else:
            # "a" is a win of model_a, which is the pair's first model when it sorts first.
            row[0 if (won == "a") == (str(a) == key[0]) else 1] += 1
    for key in counts:
        rows.setdefault(key, len(rows))
    table = np.zeros((len(rows), 3))
    for key, row in counts.items():
        table[rows[key]] = row
    models = tuple(sorted({m for key in rows for m in key}))
    return models, list(rows), table


@dataclass(frozen=True)
class _Fit:
    models: tuple[str, ...]
    first: np.ndarray  # (R,) model index per row
    second: np.ndarray
    theta: np.ndarray  # (K,)
    eta: float
    cov: np.ndarray  # (K+1, K+1) of (theta, eta), zero on the pinned model


def _fit(models: tuple[str, ...], rows: list[tuple[str, str]], table: np.ndarray, prior_votes: float) -> _Fit:
    """The matchmaking fit: the votes plus ``prior_votes`` pseudo-votes on every pair of models."""
    k = len(models)
    index = {m: i for i, m in enumerate(models)}
    first, second = np.triu_indices(k, 1)
    full = np.zeros((first.size, 3))
    at = {(int(i), int(j)): r for r, (i, j) in enumerate(zip(first, second, strict=True))}
    for key, counts in zip(rows, table, strict=True):
        full[at[(index[key[0]], index[key[1]])]] += counts
    full += prior_votes / 3.0
    table_counts = PairCounts(models, first, second, full[:, 0], full[:, 1], full[:, 2], np.zeros(first.size))
    fit = likelihood.fit(table_counts, full[:, 0], full[:, 1], full[:, 2], ref=0)
    if not fit.converged[0]:
        raise ValueError(f"the matchmaking fit did not converge in {likelihood.MAX_ITER} Newton steps")
    theta, eta = fit.theta[0], float(fit.eta[0])
    design = likelihood.Design.of(table_counts)
    terms = likelihood.pair_terms(
        design, theta[None, :], np.array([eta]), full[None, :, 0], full[None, :, 1], full[None, :, 2]
    )
    info = likelihood.assemble(design, terms.info_aa, terms.info_ae, terms.info_ee)[0]
    free = np.arange(1, k + 1)  # theta_0 pinned; eta is free (the pseudo-votes hold ties)
    cov = np.zeros((k + 1, k + 1))
    cov[np.ix_(free, free)] = np.linalg.inv(info[np.ix_(free, free)])
    return _Fit(models, first, second, theta, eta, cov)


def _one_vote(fit: _Fit, i: np.ndarray, j: np.ndarray):
    """Per pair (i, j) under the fit: P(i wins), P(j wins), P(tie) and one vote's information in
    the coordinates (a, eta), a = (theta_i - theta_j) / 2, as (P, 2, 2)."""
    a = 0.5 * (fit.theta[i] - fit.theta[j])
    den = np.exp(a) + np.exp(-a) + np.exp(fit.eta)
    p_win, p_loss, p_tie = np.exp(a) / den, np.exp(-a) / den, np.exp(fit.eta) / den
    margin = p_win - p_loss
    info = np.empty((i.size, 2, 2))
    info[:, 0, 0] = p_win + p_loss - margin**2
    info[:, 0, 1] = info[:, 1, 0] = -margin * p_tie
    info[:, 1, 1] = p_tie * (1.0 - p_tie)
    return p_win, p_loss, p_tie, info


def _sqrtm_psd(m: np.ndarray) -> np.ndarray:
    """Symmetric square roots of (P, 2, 2) positive semi-definite matrices."""
    values, vectors = np.linalg.eigh(m)
    return (vectors * np.sqrt(np.clip(values, 0.0, None))[:, None, :]) @ np.swapaxes(vectors, 1, 2)


def rating_gain(fit: _Fit, i: np.ndarray, j: np.ndarray, *, power: float = 1.0) -> np.ndarray:
    """Per pair: the summed narrowing of the rating standard errors (Elo points) from one more vote,
    sum over models of sd_k**power - sd_k'**power (power 1: the mean width; higher: the widest).

    One vote on (i, j) adds G' M G to the information, G (2, K+1) the map from (theta, eta) to
    (a, eta) and M its information in (a, eta); by Woodbury the covariance loses
    S G' R (I + R G S G' R)^-1 R G S with R = M^1/2. The ratings are the centred log-strengths
    (times 400 / ln 10), so their variances lose the diagonal of C (that) C'."""
    k = len(fit.models)
    _, _, _, info = _one_vote(fit, i, j)
    g = np.zeros((i.size, 2, k + 1))
    rows = np.arange(i.size)
    g[rows, 0, i] += 0.5
    g[rows, 0, j] -= 0.5
    g[:, 1, k] = 1.0
    u = fit.cov @ np.swapaxes(g, 1, 2)  # (P, K+1, 2)
    s = g @ u  # (P, 2, 2)
    r = _sqrtm_psd(info)
    inner = np.linalg.inv(np.eye(2)[None] + r @ s @ r)
    q = r @ inner @ r  # (P, 2, 2)
    d = centring(k)[None] @ u[:, :k, :]  # (P, K, 2): the ratings' part of U
    drop = np.einsum("pka,pab,pkb->pk", d, q, d)
    var = np.diag(centring(k) @ fit.cov[:k, :k] @ centring(k).T)
    before = np.sqrt(np.clip(var, 0.0, None))[None, :]
    after = np.sqrt(np.clip(var[None, :] - drop, 0.0, None))
    return (before**power - after**power).sum(axis=1)


def pair_gain(fit: _Fit, i: np.ndarray, j: np.ndarray, votes: np.ndarray, prior_votes: float) -> np.ndarray:
    """Eq. 9 of the paper per pair: sqrt(s²/n) - sqrt(s²/(n+1)), s² one vote's score variance
    (win 1, tie 1/2, loss 0) under the fit, n the pair's votes plus the pseudo-votes."""
    p_win, _, p_tie, _ = _one_vote(fit, i, j)
    mean = p_win + 0.5 * p_tie
    variance = p_win + 0.25 * p_tie - mean**2
    n = votes + prior_votes
    return np.sqrt(variance / n) - np.sqrt(variance / (n + 1.0))


def pair_weights(
    pairs: Sequence[tuple[str, str]],
    model_a: Sequence[str] = (),
    model_b: Sequence[str] = (),
    outcome: Sequence[str] = (),
    *,
    rule: str = "rating",
    uniform_share: float = UNIFORM_SHARE,
    prior_votes: float = PRIOR_VOTES,
) -> PairWeights:
    """The chance the next vote should go to each candidate pair (``pairs``, either order within a
    pair), from the votes so far (one row per vote: ``model_a``, ``model_b``, ``outcome`` one of
    a, b, tie, both_bad; votes on pairs that are no candidate still inform the fit).

    weight = (1 - uniform_share) * gain / sum(gain) + uniform_share / P; uniform when every gain is 0.
    A pair listed twice is one candidate (its first place)."""
    _check_options(rule, uniform_share, prior_votes)
    if not pairs:
        raise ValueError("matchmaking needs at least one candidate pair; got none")
    candidates = list(dict.fromkeys(pair_key(a, b) for a, b in pairs))
    models, rows, table = tally(candidates, model_a, model_b, outcome)
    return _weights(candidates, models, rows, table, rule, uniform_share, prior_votes)


def pair_weights_from_counts(
    pairs: Sequence[tuple[str, str]],
    counts: PairCounts,
    *,
    rule: str = "rating",
    uniform_share: float = UNIFORM_SHARE,
    prior_votes: float = PRIOR_VOTES,
) -> PairWeights:
    """``pair_weights`` from the votes already counted per pair (protocols/kit/pairwise/counts.py;
    rows with no vote are fine): what a caller that keeps counts (the simulator) passes."""
    _check_options(rule, uniform_share, prior_votes)
    if not pairs:
        raise ValueError("matchmaking needs at least one candidate pair; got none")
    candidates = list(dict.fromkeys(pair_key(a, b) for a, b in pairs))
    rows: dict[tuple[str, str], int] = {pair: n for n, pair in enumerate(candidates)}
    voted = np.stack([counts.wins, counts.losses, counts.fit_ties], axis=1).astype(float)
    names = counts.models
    keyed = [(names[int(f)], names[int(s)]) for f, s in zip(counts.first, counts.second, strict=True)]
    for key in keyed:
        rows.setdefault(pair_key(*key), len(rows))
    table = np.zeros((len(rows), 3))
    for (f, s), row in zip(keyed, voted, strict=True):
        # counts' pairs are in model-index order; ours in name order.
        table[rows[pair_key(f, s)]] += row if f < s else row[[1, 0, 2]]
    models = tuple(sorted({m for key in rows for m in key}))
    return _weights(candidates, models, list(rows), table, rule, uniform_share, prior_votes)


def _check_options(rule: str, uniform_share: float, prior_votes: float) -> None:
    if rule not in RULES:
        raise ValueError(f"matchmaking rule {rule!r} is not one of {', '.join(RULES)}")
    if not 0.0 <= uniform_share <= 1.0:
        raise ValueError(f"uniform_share must be between 0 and 1; got {uniform_share}")
    if not prior_votes > 0:
        raise ValueError(f"prior_votes must be above 0 (the fit needs them before the first votes); got {prior_votes}")


def _weights(candidates, models, rows, table, rule, uniform_share, prior_votes) -> PairWeights:
    fit = _fit(models, rows, table, prior_votes)
    index = {m: n for n, m in enumerate(models)}
    i = np.array([index[a] for a, _ in candidates])
    j = np.array([index[b] for _, b in candidates])
    votes = table[: len(candidates)].sum(axis=1)
    if rule == "pair":
        gain = pair_gain(fit, i, j, votes, prior_votes)
    else:
        gain = rating_gain(fit, i, j, power=WIDEST_POWER if rule == "widest" else 1.0)
    gain = np.clip(gain, 0.0, None)
    uniform = np.full(len(candidates), 1.0 / len(candidates))
    total = gain.sum()
    weight = uniform if total <= 0 else (1.0 - uniform_share) * gain / total + uniform_share * uniform
    return PairWeights(tuple(candidates), weight / weight.sum(), gain, votes, rule, uniform_share)


def item_order(items: Sequence[tuple[Any, str, str]], weights: PairWeights, *, seed: int) -> list[Any]:
    """The keys of ``items`` ((key, model_a, model_b) each) in the order to hand them out: a draw
    without replacement where an item's weight is its pair's weight shared among the pair's items
    here (so the first item is of a pair with the pair's weight; Efraimidis–Spirakis keys). An item
    whose pair is no candidate of ``weights`` is refused."""
    lookup = weights.as_dict()
    keys = [pair_key(a, b) for _, a, b in items]
    for (key, a, b), pair in zip(items, keys, strict=True):
        if pair not in lookup:
            raise ValueError(f"item {key!r} compares {a!r} with {b!r}, which is not one of the candidate pairs")
    share: dict[tuple[str, str], int] = {}
    for pair in keys:
        share[pair] = share.get(pair, 0) + 1
    w = np.array([lookup[pair] / share[pair] for pair in keys])
    rng = np.random.default_rng(seed)
    u = rng.random(len(items))
    with np.errstate(divide="ignore"):
        score = np.where(w > 0, np.log(u) / np.where(w > 0, w, 1.0), -np.inf)
    # Larger score first; ties (weight 0 items) keep the given order.
    order = sorted(range(len(items)), key=lambda n: (-score[n], n))
    return [items[n][0] for n in order]


def item_priorities(
    items: Iterable[Any],
    votes: Mapping[Any, Sequence[tuple[str, Mapping[str, Any]]]],
    *,
    open_keys: Iterable[Any] | None = None,
    seed: int = 0,
    rule: str = "rating",
    uniform_share: float = UNIFORM_SHARE,
    prior_votes: float = PRIOR_VOTES,
) -> dict[Any, int]:
    """{item key: rank} for the open items, 0 to be handed out first (see the module).

    ``items``: the project's arena items (``.key`` and ``.payload`` with ``model_a`` / ``model_b``);
    ``votes``: item key -> [(rater, stored answer)] as the board reads them (scoring.py), every vote
    informing the fit; ``open_keys``: the items still to be handed out (default: all). The refresh
    job passes a new ``seed`` each time (e.g. the number of votes), so that successive orders differ."""
    items = list(items)
    wanted = None if open_keys is None else set(open_keys)
    open_items = [
        (item.key, str(item.payload["model_a"]), str(item.payload["model_b"]))
        for item in items
        if wanted is None or item.key in wanted
    ]
    if not open_items:
        return {}
    a, b, outcome = battles(items, votes, HEADLINE_CRITERION)
    weights = pair_weights(
        [(ma, mb) for _, ma, mb in open_items],
        a,
        b,
        outcome,
        rule=rule,
        uniform_share=uniform_share,
        prior_votes=prior_votes,
    )
    return {key: rank for rank, key in enumerate(item_order(open_items, weights, seed=seed))}
