"""The ratings board of a pairwise comparison: fit, intervals, ranks, win rates and the flip count,
as leaderboard rows. Definitions: docs/statistics.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

from ..bootstrap import CI_LEVEL, N_BOOT
from . import intervals, likelihood
from .clusters import VoteClusters
from .counts import PairCounts
from .flip import Flip, votes_to_flip_top

METHODS = ("sandwich", "bootstrap")


@dataclass(frozen=True)
class Ratings:
    models: tuple[str, ...]
    rating: np.ndarray  # (K,) Elo scale, mean 1000
    ci: np.ndarray  # (K, 2)
    se: np.ndarray | None  # (K,) sandwich standard errors, votes independent (whatever the method)
    rank: np.ndarray  # (K,) by interval overlap
    nu: float  # Davidson's tie parameter (0 when no vote is a tie)
    nu_ci: list[float] | None
    per_model: dict[str, np.ndarray]  # battles, wins, losses, ties, both_bad
    win_rate: np.ndarray  # (K,) ties (both bad included) as half
    win_rate_matrix: np.ndarray  # (K, K), NaN where a pair never met
    battle_matrix: np.ndarray  # (K, K)
    method: str
    level: float
    loglik: float
    rounds: int | None = None
    seed: int | None = None
    unbounded_rounds: int | None = None
    flip: Flip | None = None
    se_clustered: np.ndarray | None = None  # (K,) cluster-robust sandwich errors, when clusters were given
    clusters: int | None = None  # how many clusters the votes fell in (None: no clusters given)
    eta_se: float | None = None  # sandwich standard error of log(nu) (clustered when clustered)

    def order(self) -> list[int]:
        """Model indices by rating, best first (name breaks an exact tie)."""
        return sorted(range(len(self.models)), key=lambda m: (-self.rating[m], self.models[m]))

    def rows(self) -> list[dict[str, Any]]:
        """Leaderboard rows, best first: ratings to two decimals, win rates to four."""
        out = []
        for m in self.order():
            battles = int(self.per_model["battles"][m])
            out.append(
                {
                    "model": self.models[m],
                    "n": battles,
                    "rank": int(self.rank[m]),
                    "metrics": {
                        "rating": round(float(self.rating[m]), 2),
                        "win_rate": round(float(self.win_rate[m]), 4),
                        "battles": battles,
                        "ties": int(self.per_model["ties"][m]),
                        "both_bad": int(self.per_model["both_bad"][m]),
                    },
                    "ci": {"rating": _interval(self.ci[m])},
                }
            )
        return out

    def errors(self, model: str) -> dict[str, Any]:
        """The leaderboard row's standard errors of ``model``'s rating (three decimals): ``se`` (the
        plain sandwich, votes independent), and ``se_clustered`` and ``design_effect`` = (se_clustered
        / se)^2 when clusters were given; each as {"rating": value}."""
        m = self.models.index(model)
        if self.se is None:
            return {}
        se = float(self.se[m])
        out: dict[str, Any] = {"se": {"rating": round(se, 3)}, "se_clustered": {}, "design_effect": {}}
        if self.se_clustered is not None:
            clustered = float(self.se_clustered[m])
            out["se_clustered"]["rating"] = round(clustered, 3)
            out["design_effect"]["rating"] = round((clustered / se) ** 2, 3) if se > 0 else None
        return out

    def to_json(self) -> dict[str, Any]:
        order = self.order()
        rate = self.win_rate_matrix[np.ix_(order, order)]
        result: dict[str, Any] = {
            "method": self.method,
            "level": self.level,
            "rows": self.rows(),
            "tie": {
                "nu": round(self.nu, 4),
                "ci": None if self.nu_ci is None else [round(x, 4) for x in self.nu_ci],
                # Chance of a tie between two equally strong models: nu / (2 + nu).
                "p_tie_equal": round(self.nu / (2 + self.nu), 4),
            },
            "matrix": {
                "models": [self.models[m] for m in order],
                "win_rate": [[None if np.isnan(x) else round(float(x), 4) for x in row] for row in rate],
                "battles": self.battle_matrix[np.ix_(order, order)].tolist(),
            },
        }
        if self.clusters is not None:
            # Which errors the intervals are: clustered when two or more clusters hold the votes.
            result["clusters"] = self.clusters
            result["interval_errors"] = (
                "clustered" if self.method == "sandwich" and self.se_clustered is not None else "independent"
            )
        if self.method == "bootstrap":
            result["bootstrap"] = {"rounds": self.rounds, "seed": self.seed, "unbounded_rounds": self.unbounded_rounds}
        if self.flip is not None:
            result["flip"] = self.flip.to_json()
        return result


def _interval(ci) -> list[float] | None:
    if not np.all(np.isfinite(ci)):
        return None
    return [round(float(ci[0]), 2), round(float(ci[1]), 2)]


def rate(
    counts: PairCounts,
    *,
    method: str = "sandwich",
    rounds: int = N_BOOT,
    seed: int = 0,
    level: float = CI_LEVEL,
    flip: bool = False,
    clusters: VoteClusters | None = None,
) -> Ratings:
    """Fit Bradley–Terry with Davidson ties to ``counts`` and put the board together.

    ``method`` "sandwich" (default) or "bootstrap" (``rounds`` multinomial redraws from ``seed``);
    ``clusters`` (clusters.py: the votes by prompt, say) makes the sandwich interval the
    cluster-robust one and adds ``se_clustered`` (with fewer than two clusters it stays the plain
    one); the plain sandwich's ``se`` is computed whatever the method. ``flip`` also searches for the
    votes that would have to change to flip #1 (flip.py).
    Raises ValueError naming the models when the votes admit no finite rating."""
    if method not in METHODS:
        raise ValueError(f"interval method {method!r} is not one of {', '.join(METHODS)}")
    if not 0 < level < 1:
        raise ValueError(f"interval level must be between 0 and 1; got {level}")
    likelihood.check_estimable(counts)
    per_model = counts.per_model()
    ref = int(np.argmax(per_model["battles"]))  # pin the most compared model: the best-conditioned choice
    fit = likelihood.fit(counts, counts.wins, counts.losses, counts.fit_ties, ref=ref)
    if not fit.converged[0]:
        raise ValueError(f"the rating fit did not converge in {likelihood.MAX_ITER} Newton steps")
    theta, eta = fit.theta[0], float(fit.eta[0])
    rating = intervals.to_ratings(theta)
    extra: dict[str, Any] = {}
    robust = intervals.sandwich(counts, theta, eta, ref=ref, clusters=clusters)
    se = np.sqrt(np.clip(np.diag(robust.rating_cov), 0.0, None))
    se_clustered = None
    eta_se = robust.eta_se
    if robust.rating_cov_clustered is not None:
        se_clustered = np.sqrt(np.clip(np.diag(robust.rating_cov_clustered), 0.0, None))
        eta_se = robust.eta_se_clustered
    if method == "sandwich":
        shown = se if se_clustered is None else se_clustered
        z = float(norm.ppf(0.5 + level / 2))
        ci = np.stack([rating - z * shown, rating + z * shown], axis=1)
        nu_ci = None if eta_se is None else [float(np.exp(eta - z * eta_se)), float(np.exp(eta + z * eta_se))]
    else:
        samples = intervals.bootstrap(counts, theta, eta, ref=ref, rounds=rounds, seed=seed)
        ci, nu_ci = intervals.bootstrap_cis(samples, level)
        if not np.isfinite(eta):
            nu_ci = None
        extra = {"rounds": rounds, "seed": seed, "unbounded_rounds": samples.unbounded}
    win_rate_matrix, battle_matrix = counts.matrices()
    return Ratings(
        models=counts.models,
        rating=rating,
        ci=ci,
        se=se,
        rank=intervals.overlap_ranks(ci[:, 0], ci[:, 1]),
        nu=float(np.exp(eta)),
        nu_ci=nu_ci,
        per_model=per_model,
        win_rate=counts.win_rates(),
        win_rate_matrix=win_rate_matrix,
        battle_matrix=battle_matrix,
        method=method,
        level=level,
        loglik=float(fit.loglik[0]),
        flip=votes_to_flip_top(counts, theta, eta, ref=ref) if flip else None,
        se_clustered=se_clustered,
        clusters=None if clusters is None else clusters.n_clusters,
        eta_se=eta_se,
        **extra,
    )
