"""Intervals on the ratings: sandwich (robust; cluster-robust when the votes come with clusters) by
default, the multinomial bootstrap on request, and the rank read from how the intervals overlap.
Definitions: docs/statistics.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..bootstrap import percentile_ci
from . import likelihood
from .clusters import VoteClusters
from .counts import PairCounts

ELO = 400.0 / np.log(10.0)  # rating points per unit of log-strength
CENTRE = 1000.0  # the models' mean rating
CHUNK = 256  # bootstrap rounds fitted in one batch (bounds memory at (CHUNK, K+1, K+1) matrices)


def to_ratings(theta: np.ndarray) -> np.ndarray:
    """Log-strengths (..., K) -> Elo-scale ratings whose mean over the models is 1000."""
    return CENTRE + ELO * (theta - theta.mean(axis=-1, keepdims=True))


def centring(k: int) -> np.ndarray:
    """The linear map from log-strengths to centred ratings (without the constant 1000)."""
    return ELO * (np.eye(k) - np.full((k, k), 1.0 / k))


@dataclass(frozen=True)
class Sandwich:
    rating_cov: np.ndarray  # (K, K) on the centred Elo scale
    eta_se: float | None  # standard error of log(nu); None when the data hold no tie (nu = 0)
    # The cluster-robust sandwich (votes summed per cluster first), when clusters were given:
    rating_cov_clustered: np.ndarray | None = None
    eta_se_clustered: float | None = None
    clusters: int | None = None


def sandwich(
    counts: PairCounts, theta: np.ndarray, eta: float, *, ref: int, clusters: VoteClusters | None = None
) -> Sandwich:
    """H^-1 B H^-1 on the free parameters (theta without ``ref``'s, and log nu when there are ties),
    H the information and B the sum over votes of the score's outer product; then mapped to the
    centred ratings by the delta method (the centring is linear, so the map is exact).

    With ``clusters`` (clusters.py) also the cluster-robust sandwich: B_c = C / (C - 1) times the sum
    over the C clusters of (the cluster's summed vote scores)(the same)^T, on the same bread."""
    k = counts.n_models
    w, lo, t = (x[None, :].astype(float) for x in (counts.wins, counts.losses, counts.fit_ties))
    design = likelihood.Design.of(counts)
    terms = likelihood.pair_terms(design, theta[None, :], np.array([eta]), w, lo, t)
    m, pt = terms.p_win[0] - terms.p_loss[0], terms.p_tie[0]
    # One vote's score in (a, eta) for each outcome: the observed indicators minus their expectations.
    a_win, a_loss, a_tie = 1.0 - m, -1.0 - m, -m
    e_win = e_loss = -pt
    e_tie = 1.0 - pt
    meat = likelihood.assemble(
        design,
        w * a_win**2 + lo * a_loss**2 + t * a_tie**2,
        w * a_win * e_win + lo * a_loss * e_loss + t * a_tie * e_tie,
        w * e_win**2 + lo * e_loss**2 + t * e_tie**2,
    )[0]
    info = likelihood.assemble(design, terms.info_aa, terms.info_ae, terms.info_ee)[0]
    has_ties = bool(np.isfinite(eta))
    free = np.array([i for i in range(k) if i != ref] + ([k] if has_ties else []))
    bread = np.linalg.inv(info[np.ix_(free, free)])
    c = centring(k)

    def carried(b: np.ndarray) -> tuple[np.ndarray, float | None]:
        cov = np.zeros((k + 1, k + 1))
        cov[np.ix_(free, free)] = bread @ b[np.ix_(free, free)] @ bread
        return c @ cov[:k, :k] @ c.T, float(np.sqrt(cov[k, k])) if has_ties else None

    rating_cov, eta_se = carried(meat)
    if clusters is None:
        return Sandwich(rating_cov=rating_cov, eta_se=eta_se)
    n_c = clusters.n_clusters
    if n_c < 2:
        return Sandwich(rating_cov=rating_cov, eta_se=eta_se, clusters=n_c)
    p = clusters.pair
    # Each (cluster, pair) row's summed score in (a, eta), then on (theta_first, theta_second, eta).
    s_a = clusters.wins * a_win[p] + clusters.losses * a_loss[p] + clusters.ties * a_tie[p]
    s_e = clusters.wins * e_win[p] + clusters.losses * e_loss[p] + clusters.ties * e_tie[p]
    width = k + 1
    base = clusters.cluster * width
    scores = np.bincount(
        np.concatenate([base + counts.first[p], base + counts.second[p], base + k]),
        weights=np.concatenate([0.5 * s_a, -0.5 * s_a, s_e]),
        minlength=n_c * width,
    ).reshape(n_c, width)
    meat_clustered = n_c / (n_c - 1) * (scores.T @ scores)
    rating_cov_c, eta_se_c = carried(meat_clustered)
    return Sandwich(
        rating_cov=rating_cov,
        eta_se=eta_se,
        rating_cov_clustered=rating_cov_c,
        eta_se_clustered=eta_se_c,
        clusters=n_c,
    )


@dataclass(frozen=True)
class Bootstrap:
    ratings: np.ndarray  # (rounds, K); NaN rows for rounds without a finite estimate
    nu: np.ndarray  # (rounds,)
    unbounded: int  # rounds whose redrawn votes have no finite estimate (left out of the intervals)


def bootstrap(counts: PairCounts, theta: np.ndarray, eta: float, *, ref: int, rounds: int, seed: int) -> Bootstrap:
    """Redraw every pair's votes from a multinomial with its observed outcome shares (the pair's
    number of votes kept), refit each round (warm-started at the estimate), and return the rounds."""
    if rounds < 1:
        raise ValueError(f"bootstrap rounds must be at least 1; got {rounds}")
    rng = np.random.default_rng(seed)
    n = counts.wins + counts.losses + counts.fit_ties
    shares = np.stack([counts.wins, counts.losses, counts.fit_ties], axis=1) / n[:, None]
    draws = rng.multinomial(n, shares, size=(rounds, n.shape[0]))
    wins, losses, ties = draws[..., 0], draws[..., 1], draws[..., 2]
    # A redraw can only lose outcomes a pair had, so a round whose (pair, won / lost-or-tied) pattern
    # is the observed one is estimable like the data; only the others are checked one by one.
    fwd, back = (wins > 0) | (ties > 0), (losses > 0) | (ties > 0)
    fwd0, back0 = (counts.wins > 0) | (counts.fit_ties > 0), (counts.losses > 0) | (counts.fit_ties > 0)
    changed = np.flatnonzero(np.any(fwd != fwd0, axis=1) | np.any(back != back0, axis=1))
    ok = np.ones(rounds, dtype=bool)
    for r in changed:
        ok[r] = likelihood.estimable_problem(counts, wins[r], losses[r], ties[r]) is None
    ok &= (wins + losses).sum(axis=1) > 0
    theta_all = np.full((rounds, counts.n_models), np.nan)
    eta_all = np.full(rounds, np.nan)
    good = np.flatnonzero(ok)
    for start in range(0, good.size, CHUNK):
        rows = good[start : start + CHUNK]
        fit = likelihood.fit(counts, wins[rows], losses[rows], ties[rows], ref=ref, theta0=theta, eta0=eta)
        theta_all[rows] = np.where(fit.converged[:, None], fit.theta, np.nan)
        eta_all[rows] = np.where(fit.converged, fit.eta, np.nan)
    finite = ~np.isnan(eta_all)
    return Bootstrap(ratings=to_ratings(theta_all), nu=np.exp(eta_all), unbounded=int(rounds - finite.sum()))


def bootstrap_cis(samples: Bootstrap, level: float) -> tuple[np.ndarray, list[float] | None]:
    """Percentile intervals: (K, 2) for the ratings, [lo, hi] for nu."""
    cis = np.array(
        [percentile_ci(samples.ratings[:, m], level) or [np.nan, np.nan] for m in range(samples.ratings.shape[1])]
    )
    return cis, percentile_ci(samples.nu, level)


def overlap_ranks(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """rank = 1 + the number of models whose lower bound is above this model's upper bound."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    return 1 + (lo[None, :] > hi[:, None]).sum(axis=1)
