"""Pairwise ratings (protocols.kit.pairwise) on an arena-sized vote set, beside a plain implementation.

Run: .venv/bin/python bench/bench_pairwise.py [--battles 140000] [--models 25] [--rounds 1000]
                                              [--plain-rounds 100] [--prompts 2000] [--seed 0]

Data: seeded, simulated from the model itself: log-strengths drawn from N(0, 0.7²) (about ±250 Elo
points between the extremes), Davidson's tie parameter 0.5 (a fifth of the votes between equals are
ties), 30 % of ties recorded as "both bad", pairs drawn uniformly, sides at random. One row per
vote, as an arena's votes table would hand them over.

Timed, ours: counting the votes per (pair, outcome); the fit with its sandwich intervals
(``rate(method="sandwich")``, ranks, win-rate matrix included); the same with the votes clustered by
prompt (``--prompts`` prompts, each vote's drawn uniformly; grouping the votes per (prompt, pair)
included) against the plain sandwich measured in the same run; ``rounds`` multinomial bootstrap
rounds (``rate(method="bootstrap")``); the flip count (``votes_to_flip_top``).

Timed, plain (the FastChat shape): plain Bradley–Terry by logistic regression over the expanded
votes — one row per vote, a tie counted as half a win for each side — fitted by SciPy's L-BFGS-B
with an analytic gradient, and a bootstrap that resamples the votes with replacement and refits
each round. The plain bootstrap runs ``--plain-rounds`` rounds and its time for ``--rounds`` is
extrapolated linearly (each round costs the same); say ``--plain-rounds 1000`` to run them all.
The two models differ (ties), so only times are compared, plus the interval widths of our two
methods.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from protocols.kit import pairwise  # noqa: E402


def timed(label, fn):
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    print(f"{label:<58} {dt:9.3f} s", flush=True)
    return out, dt


def simulate(n_battles: int, n_models: int, seed: int):
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 0.7, n_models)
    nu = 0.5
    a = rng.integers(0, n_models, n_battles)
    b = (a + rng.integers(1, n_models, n_battles)) % n_models  # any other model, uniformly
    sa, sb = np.exp(theta[a]), np.exp(theta[b])
    tie = nu * np.sqrt(sa * sb)
    u = rng.random(n_battles) * (sa + sb + tie)
    outcome = np.where(u < sa, "a", np.where(u < sa + sb, "b", "tie")).astype(object)
    ties = np.flatnonzero(outcome == "tie")
    outcome[ties[rng.random(ties.size) < 0.3]] = "both_bad"
    names = [f"model-{m:02d}" for m in range(n_models)]
    return names, a, b, outcome.astype(str)


def plain_fit(k: int, a: np.ndarray, b: np.ndarray, score_a: np.ndarray) -> np.ndarray:
    """Plain BT over one row per vote: maximise sum s log sigma(t_a - t_b) + (1 - s) log sigma(t_b - t_a),
    s = 1, 0 or 1/2 for a tie; the first model pinned at 0."""

    def loss(free):
        t = np.concatenate([[0.0], free])
        d = t[a] - t[b]
        value = np.sum(np.logaddexp(0.0, -d) + (1.0 - score_a) * d)
        resid = 1.0 / (1.0 + np.exp(-d)) - score_a  # d loss / d d
        grad = np.bincount(a, resid, k) - np.bincount(b, resid, k)
        return value, grad[1:]

    result = minimize(loss, np.zeros(k - 1), jac=True, method="L-BFGS-B", options={"gtol": 1e-8, "maxiter": 1000})
    return pairwise.to_ratings(np.concatenate([[0.0], result.x]))


def plain_bootstrap(k: int, a, b, score_a, rounds: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((rounds, k))
    for r in range(rounds):
        idx = rng.integers(0, a.shape[0], a.shape[0])
        out[r] = plain_fit(k, a[idx], b[idx], score_a[idx])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--battles", type=int, default=140_000)
    parser.add_argument("--models", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--plain-rounds", type=int, default=100)
    parser.add_argument("--prompts", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    names, a, b, outcome = simulate(args.battles, args.models, args.seed)
    print(f"{args.battles:,} votes, {args.models} models, load average {os.getloadavg()[0]:.2f}")
    counts, t_count = timed(
        "ours: count votes per (pair, outcome)", lambda: pairwise.from_battles(names, a, b, outcome)
    )
    print(f"  {counts.first.size} pairs")
    board, t_sandwich = timed("ours: fit + sandwich intervals + ranks + matrix", lambda: pairwise.rate(counts))
    prompt = np.random.default_rng([args.seed, 5]).integers(0, args.prompts, a.shape[0])
    clustered, t_clustered = timed(
        f"ours: the same, clustered by prompt ({args.prompts} prompts)",
        lambda: pairwise.rate(counts, clusters=pairwise.vote_clusters(counts, a, b, outcome, prompt.tolist())),
    )
    boot, t_boot = timed(
        f"ours: fit + {args.rounds} bootstrap rounds",
        lambda: pairwise.rate(counts, method="bootstrap", rounds=args.rounds, seed=args.seed),
    )
    flip, t_flip = timed(
        "ours: votes to flip #1 (greedy, every challenger)", lambda: pairwise.rate(counts, flip=True).flip
    )

    score_a = np.select([outcome == "a", outcome == "b"], [1.0, 0.0], 0.5)
    k = args.models
    _, t_plain = timed("plain: logistic regression over the votes (one fit)", lambda: plain_fit(k, a, b, score_a))
    _, t_plain_boot = timed(
        f"plain: {args.plain_rounds} bootstrap rounds (votes resampled, refit)",
        lambda: plain_bootstrap(k, a, b, score_a, args.plain_rounds, args.seed),
    )
    t_plain_full = t_plain + t_plain_boot * args.rounds / args.plain_rounds

    half_s = (board.ci[:, 1] - board.ci[:, 0]) / 2
    half_b = (boot.ci[:, 1] - boot.ci[:, 0]) / 2
    print()
    print(f"95 % half-width, median: sandwich {np.median(half_s):.2f} points, bootstrap {np.median(half_b):.2f}")
    print(f"  ratio bootstrap / sandwich per model: {np.min(half_b / half_s):.3f} to {np.max(half_b / half_s):.3f}")
    nu_s, nu_b = (", ".join(f"{x:.4f}" for x in ci) for ci in (board.nu_ci, boot.nu_ci))
    print(f"tie parameter nu {board.nu:.4f} (simulated 0.5): sandwich [{nu_s}], bootstrap [{nu_b}]")
    print(f"flip #1: {flip.votes} votes ({flip.top} -> {flip.challenger}); unbounded rounds {boot.unbounded_rounds}")
    print()
    print(f"clustered sandwich / plain sandwich time:   {t_clustered / t_sandwich:8.2f}x")
    ratio = clustered.se_clustered / clustered.se
    print(f"  se_clustered / se per model (prompts drawn at random, so near 1): {ratio.min():.3f} to {ratio.max():.3f}")
    print(f"sandwich board vs one plain fit:            {t_plain / t_sandwich:8.1f}x faster")
    extrapolated = "" if args.plain_rounds == args.rounds else f" (plain extrapolated from {args.plain_rounds} rounds)"
    print(f"{args.rounds} bootstrap rounds vs plain:          {t_plain_full / t_boot:8.1f}x faster{extrapolated}")
    print(f"plain bootstrap, {args.rounds} rounds: {t_plain_full:.1f} s")


if __name__ == "__main__":
    main()
