"""Bradley–Terry with Davidson ties: its log-likelihood on pair counts, the maximum-likelihood fit, and
when a finite maximum exists.

Model (Davidson 1970), with log-strengths theta and the tie parameter nu = exp(eta):
P(i beats j) = pi_i / D, P(j beats i) = pi_j / D, P(tie) = nu sqrt(pi_i pi_j) / D, D = pi_i + pi_j +
nu sqrt(pi_i pi_j). Dividing through by sqrt(pi_i pi_j), with a = (theta_i - theta_j) / 2, the three
log-probabilities are a, -a and eta minus log(e^a + e^-a + e^eta): a three-way multinomial logit whose
natural parameters are linear in (theta, eta). So the log-likelihood is concave, its Hessian does not
depend on the votes (observed information = expected information), and Newton's method with a
backtracking step is globally convergent. Without any tie the tie parameter's estimate is nu = 0
(eta = -inf): the model is then plain Bradley–Terry, and eta is held there.

Everything is batched: R count tables over the same pairs (the bootstrap's rounds) are fitted at
once, arrays (R, P). Definitions: docs/statistics.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .counts import PairCounts

MAX_ITER = 100
STEP_TOL = 1e-10  # largest change of a log-strength at which the fit has converged (1e-8 Elo points)


A_MAX = 350.0  # |a| is clipped here so exp(a) stays finite on a wild trial step (the fit never gets near it)


@dataclass(frozen=True)
class Design:
    """The pairs' incidence: (P, K) matrices with +1 / -1 (``diff``) or +1 / +1 (``both``) at the
    pair's first and second model; gradients and information matrices are products with them."""

    first: np.ndarray
    second: np.ndarray
    k: int
    diff: np.ndarray
    both: np.ndarray

    @classmethod
    def of(cls, counts: PairCounts) -> Design:
        p, k = counts.first.shape[0], counts.n_models
        rows = np.arange(p)
        first, second = np.zeros((p, k)), np.zeros((p, k))
        first[rows, counts.first] = 1.0
        second[rows, counts.second] = 1.0
        return cls(counts.first, counts.second, k, first - second, first + second)


@dataclass(frozen=True)
class PairTerms:
    """Per pair (R, P): probabilities at the current parameters and the log-likelihood's pieces in
    the coordinates (a, eta)."""

    p_win: np.ndarray
    p_loss: np.ndarray
    p_tie: np.ndarray
    score_a: np.ndarray  # d loglik / d a
    score_eta: np.ndarray
    info_aa: np.ndarray  # minus the second derivatives
    info_ae: np.ndarray
    info_ee: np.ndarray


def _half_diff_and_denominator(design: Design, theta, eta):
    """a = (theta_i - theta_j) / 2 and the common denominator e^a + e^-a + nu, per pair (R, P)."""
    a = np.clip(0.5 * (theta @ design.diff.T), -A_MAX, A_MAX)
    ea = np.exp(a)
    return a, ea, ea + 1.0 / ea + np.exp(eta)[:, None]


def loglik(design: Design, theta, eta, wins, losses, ties) -> np.ndarray:
    """(R,) log-likelihood (without the multinomial constant). eta may be -inf where ties are 0."""
    a, _, den = _half_diff_and_denominator(design, theta, eta)
    eta_term = np.where(np.isfinite(eta), eta, 0.0)[:, None]
    return ((wins - losses) * a + ties * eta_term - (wins + losses + ties) * np.log(den)).sum(axis=1)


def pair_terms(design: Design, theta, eta, wins, losses, ties) -> PairTerms:
    """theta (R, K), eta (R,) (may be -inf), counts (R, P) or (P,)."""
    _, ea, den = _half_diff_and_denominator(design, theta, eta)
    p_win, p_loss, p_tie = ea / den, 1.0 / (ea * den), np.exp(eta)[:, None] / den
    n = wins + losses + ties
    margin = p_win - p_loss
    return PairTerms(
        p_win=p_win,
        p_loss=p_loss,
        p_tie=p_tie,
        score_a=(wins - losses) - n * margin,
        score_eta=ties - n * p_tie,
        info_aa=n * (p_win + p_loss - margin**2),
        info_ae=-n * margin * p_tie,
        info_ee=n * p_tie * (1.0 - p_tie),
    )


def assemble(design: Design, w_aa, w_ae, w_ee) -> np.ndarray:
    """(R, K+1, K+1) matrix in (theta_1..theta_K, eta) from per-pair weights in (a, eta), a being
    (theta_i - theta_j) / 2: the chain rule puts w_aa/4 on (i,i), (j,j), -w_aa/4 on (i,j), (j,i), and
    +-w_ae/2 on (i, eta), (j, eta). Used for the information and for the sandwich's meat."""
    r, k = w_aa.shape[0], design.k
    out = np.zeros((r, k + 1, k + 1))
    quarter = 0.25 * w_aa
    out[:, design.first, design.second] = -quarter  # each pair occurs once, so plain assignment is enough
    out[:, design.second, design.first] = -quarter
    out[:, np.arange(k), np.arange(k)] = quarter @ design.both
    cross = 0.5 * w_ae @ design.diff
    out[:, :k, k] = cross
    out[:, k, :k] = cross
    out[:, k, k] = w_ee.sum(axis=1)
    return out


def gradient(design: Design, terms: PairTerms) -> np.ndarray:
    """(R, K+1): d loglik / d (theta, eta)."""
    return np.concatenate([0.5 * terms.score_a @ design.diff, terms.score_eta.sum(axis=1, keepdims=True)], axis=1)


@dataclass(frozen=True)
class Fit:
    theta: np.ndarray  # (R, K), theta[:, ref] == 0
    eta: np.ndarray  # (R,), -inf where a table has no tie
    loglik: np.ndarray  # (R,)
    steps: int  # Newton steps taken (by the slowest table)
    converged: np.ndarray  # (R,) bool


def fit(counts: PairCounts, wins, losses, ties, *, ref: int, theta0=None, eta0=None) -> Fit:
    """Maximum likelihood for R count tables (arrays (R, P)) over ``counts``' pairs, by Newton's
    method on the free parameters (every theta but ``ref``'s, and eta where a table has ties).
    The tables must be estimable (``check_estimable``); a table that is not fails to converge."""
    design, k = Design.of(counts), counts.n_models
    wins, losses, ties = (np.atleast_2d(np.asarray(x, dtype=float)) for x in (wins, losses, ties))
    r = wins.shape[0]
    has_ties = ties.sum(axis=1) > 0
    theta = np.zeros((r, k)) if theta0 is None else np.array(np.broadcast_to(theta0, (r, k)), dtype=float)
    if eta0 is None:
        tie_share = ties.sum(axis=1) / (wins + losses + ties).sum(axis=1)
        with np.errstate(divide="ignore"):
            eta = np.log(2 * tie_share / np.maximum(1 - tie_share, 1e-12))  # P(tie) between equals is nu / (2 + nu)
    else:
        eta = np.array(np.broadcast_to(eta0, (r,)), dtype=float)
    eta = np.where(has_ties, np.where(np.isfinite(eta), eta, 0.0), -np.inf)
    free = np.array([m for m in range(k) if m != ref] + [k])
    ll = loglik(design, theta, eta, wins, losses, ties)
    converged = np.zeros(r, dtype=bool)
    steps = 0
    for _ in range(MAX_ITER):
        act = np.flatnonzero(~converged)
        if act.size == 0:
            break
        steps += 1
        w, lo, t = wins[act], losses[act], ties[act]
        terms = pair_terms(design, theta[act], eta[act], w, lo, t)
        info = assemble(design, terms.info_aa, terms.info_ae, terms.info_ee)
        grad = gradient(design, terms)
        # eta stays at -inf in a table without ties: its row becomes the identity and its score 0.
        plain = ~has_ties[act]
        info[plain, k, :] = 0.0
        info[plain, :, k] = 0.0
        info[plain, k, k] = 1.0
        grad[plain, k] = 0.0
        step = np.zeros((act.size, k + 1))
        step[:, free] = np.linalg.solve(info[:, free[:, None], free[None, :]], grad[:, free, None])[..., 0]
        scale = np.ones(act.size)
        for _ in range(60):  # halve the step until the log-likelihood does not fall
            new_theta = theta[act] + scale[:, None] * step[:, :k]
            new_eta = eta[act] + scale * step[:, k]
            new_ll = loglik(design, new_theta, new_eta, w, lo, t)
            worse = new_ll < ll[act] - 1e-12 * np.abs(ll[act])
            if not worse.any():
                break
            scale = np.where(worse, scale / 2, scale)
        theta[act], eta[act], ll[act] = new_theta, new_eta, new_ll
        converged[act] = np.max(np.abs(scale[:, None] * step), axis=1) < STEP_TOL
    return Fit(theta=theta, eta=eta, loglik=ll, steps=steps, converged=converged)


def estimable_problem(counts: PairCounts, wins, losses, ties) -> str | None:
    """Why one count table has no finite maximum-likelihood estimate, or None when it has one.

    A finite estimate exists when (1) the pairs that met connect all models, (2) for every split of the
    models into two groups, each group has at least once beaten or tied the other (otherwise the
    winning group's strengths run off to infinity), and (3) not every vote is a tie (then nu runs off)."""
    k, names = counts.n_models, counts.models
    first, second = counts.first, counts.second
    met = (wins + losses + ties) > 0
    groups = _components(k, first[met], second[met], directed=False)
    if len(groups) > 1:
        parts = " and ".join("{" + ", ".join(repr(names[m]) for m in g) + "}" for g in groups)
        return f"the comparisons split the models into groups never compared with each other: {parts}"
    if (wins + losses).sum() == 0:
        return "every vote is a tie or both bad: the tie parameter has no finite estimate"
    # Edge x -> y when x beat or tied y at least once.
    fwd = (wins > 0) | (ties > 0)
    back = (losses > 0) | (ties > 0)
    src = np.concatenate([first[fwd], second[back]])
    dst = np.concatenate([second[fwd], first[back]])
    comps = _components(k, src, dst, directed=True)
    if len(comps) == 1:
        return None
    label = np.empty(k, dtype=np.int64)
    for c, members in enumerate(comps):
        label[members] = c
    crossing = [(int(label[s]), int(label[d])) for s, d in zip(src, dst, strict=True) if label[s] != label[d]]
    # A group nobody outside beat or tied runs off upwards, one that beat or tied nobody outside
    # runs off downwards; name the smaller of the first of each.
    top = next(c for c in range(len(comps)) if all(d != c for _, d in crossing))
    bottom = next(c for c in range(len(comps)) if all(s != c for s, _ in crossing))
    upwards = len(comps[top]) <= len(comps[bottom])
    members = comps[top] if upwards else comps[bottom]
    group = ", ".join(repr(names[m]) for m in members)
    verb = "never lost to or tied with" if upwards else "never beat or tied"
    if len(members) == 1:
        return (
            f"model {group} {verb} another model: its rating has no finite"
            " maximum-likelihood value (more votes are needed)"
        )
    return (
        f"models {{{group}}} {verb} a model outside them: their ratings have no finite"
        " maximum-likelihood value (more votes are needed)"
    )


def check_estimable(counts: PairCounts) -> None:
    problem = estimable_problem(counts, counts.wins, counts.losses, counts.fit_ties)
    if problem:
        raise ValueError(problem)


def _components(k: int, src, dst, *, directed: bool) -> list[list[int]]:
    graph = coo_matrix((np.ones(len(src)), (src, dst)), shape=(k, k))
    n, label = connected_components(graph, directed=directed, connection="strong")
    return [np.flatnonzero(label == c).tolist() for c in range(n)]
