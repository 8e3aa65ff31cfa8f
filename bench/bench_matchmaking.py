"""Arena matchmaking (protocols/arena/matchmaking.py): votes needed for a target interval width,
active sampling against uniform pairing, on simulated votes.

Run: .venv/bin/python bench/bench_matchmaking.py [--models 20] [--sd 0.7] [--nu 0.5]
         [--target-mean 60] [--target-max 80] [--seeds 5] [--batch 20] [--check 100]
         [--votes-per-item 1] [--uniform-share 0.2] [--rules uniform,rating,pair]
         [--entrants 0] [--established-votes 10000] [--ceiling]

Simulation (seeded): K models with log-strengths drawn from N(0, sd²) (sd 0.7: about 120 Elo points
of spread, ±250 between the extremes, as bench_pairwise.py), Davidson's tie parameter nu (0.5: a
fifth of the votes between equals are ties; 30 % of ties recorded as "both bad"), sides at random.
Each run draws pairs by its rule, ``votes-per-item`` votes per drawn pair (an item's votes, which
the queue hands to that many annotators), and refreshes the matchmaking weights every ``batch``
votes (the refresh job runs after votes arrive, not after each one). Every ``check`` votes the
board's own fit (protocols/kit/pairwise, 95 % sandwich intervals) is computed; the run's figure is
the first check where the mean (resp. largest) full interval width over the models is at most the
target. Every rule of one seed sees the same true strengths.

Two scenarios: a cold start (every model starts with no vote), and with ``--entrants N`` new models
joining an established board (the other K - N models already have ``established-votes`` votes,
drawn uniformly among their pairs, the same for every rule), the votes counted from their entry.

Rules: ``uniform`` (every pair equally likely), ``rating`` and ``pair`` (matchmaking.RULES, mixed with
``uniform-share`` of uniform draws). Printed: votes needed per seed and rule, their mean, and the
ratio uniform / rule (goal: at least 2). ``--ceiling``: instead, per seed, the most any fixed
allocation of votes to pairs could save on a cold start with the true strengths known.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from protocols.arena import matchmaking  # noqa: E402
from protocols.kit import pairwise  # noqa: E402
from protocols.kit.pairwise.intervals import centring  # noqa: E402


def simulate_run(args, rule: str, seed: int) -> dict[str, int | None]:
    truth = np.random.default_rng(seed)
    k = args.models
    theta = truth.normal(0.0, args.sd, k)
    names = [f"model-{m:02d}" for m in range(k)]
    first, second = np.triu_indices(k, 1)
    pairs = [(names[i], names[j]) for i, j in zip(first, second, strict=True)]
    # Davidson probabilities per pair: first wins, second wins, tie.
    si, sj = np.exp(theta[first]), np.exp(theta[second])
    tie = args.nu * np.sqrt(si * sj)
    probs = np.stack([si, sj, tie], axis=1) / (si + sj + tie)[:, None]
    rng = np.random.default_rng(10_000 + seed)  # the same votes stream for the same draws
    table = np.zeros((first.size, 4), dtype=np.int64)  # wins, losses, ties, both bad
    if args.entrants:
        # An established board: the first K - entrants models already have votes, drawn uniformly
        # among their pairs (the same for every rule); the entrants join now with none.
        old = np.flatnonzero(second < k - args.entrants)
        history = np.random.default_rng(20_000 + seed)
        for p in history.choice(old, size=args.established_votes):
            table[p, _outcome(history, probs[p])] += 1
    weights = np.full(first.size, 1.0 / first.size)
    needed: dict[str, int | None] = {"mean": None, "max": None}
    votes = 0
    next_check = args.check
    while votes < args.max_votes and (needed["mean"] is None or needed["max"] is None):
        if rule != "uniform":
            counts = pairwise.PairCounts(
                tuple(names), first, second, table[:, 0], table[:, 1], table[:, 2], table[:, 3]
            )
            weights = matchmaking.pair_weights_from_counts(
                pairs, counts, rule=rule, uniform_share=args.uniform_share
            ).weight
        for _ in range(max(1, args.batch // args.votes_per_item)):
            p = rng.choice(first.size, p=weights)
            for _ in range(args.votes_per_item):
                table[p, _outcome(rng, probs[p])] += 1
            votes += args.votes_per_item
        if votes >= next_check:
            next_check += args.check
            seen = table.sum(axis=1) > 0
            try:
                counts = pairwise.from_counts(names, first[seen], second[seen], *(table[seen, c] for c in range(4)))
                board = pairwise.rate(counts)
            except ValueError:
                continue  # no finite fit yet
            width = board.ci[:, 1] - board.ci[:, 0]
            if needed["mean"] is None and width.mean() <= args.target_mean:
                needed["mean"] = votes
            if needed["max"] is None and width.max() <= args.target_max:
                needed["max"] = votes
    return needed


def ceiling(args, seed: int, power: float, steps: int = 3000) -> float:
    """The most any fixed allocation of votes to pairs could save over uniform pairing (votes ratio),
    with the true strengths known: minimise sum over models of sd_k**power (1: the mean width; 16:
    close to the largest) over the share of votes per pair, by exponentiated gradient on the
    expected information; sd scales as 1/sqrt(votes), so the votes ratio is the squared ratio of the
    mean (power 1) or largest (otherwise) sd, uniform over optimum."""
    k = args.models
    theta = np.random.default_rng(seed).normal(0.0, args.sd, k)
    first, second = np.triu_indices(k, 1)
    a = 0.5 * (theta[first] - theta[second])
    den = np.exp(a) + np.exp(-a) + args.nu
    p_win, p_loss, p_tie = np.exp(a) / den, np.exp(-a) / den, args.nu / den
    m = p_win - p_loss
    one = np.empty((first.size, 2, 2))  # one vote's information in (a, eta)
    one[:, 0, 0] = p_win + p_loss - m**2
    one[:, 0, 1] = one[:, 1, 0] = -m * p_tie
    one[:, 1, 1] = p_tie * (1 - p_tie)
    g = np.zeros((first.size, 2, k + 1))
    rows = np.arange(first.size)
    g[rows, 0, first] += 0.5
    g[rows, 0, second] -= 0.5
    g[:, 1, k] = 1.0
    per_pair = np.einsum("pai,pab,pbj->pij", g, one, g)
    c = centring(k)
    free = np.arange(1, k + 1)

    def objective(share):
        cov = np.zeros((k + 1, k + 1))
        cov[np.ix_(free, free)] = np.linalg.inv(np.einsum("p,pij->ij", share, per_pair)[np.ix_(free, free)])
        sd = np.sqrt(np.diag(c @ cov[:k, :k] @ c.T))
        weight = np.zeros((k + 1, k + 1))
        weight[:k, :k] = c.T @ np.diag(power * sd ** (power - 2) / 2) @ c
        return sd, -np.einsum("pij,ji->p", per_pair, cov @ weight @ cov)

    uniform = np.full(first.size, 1.0 / first.size)
    share = uniform.copy()
    for _ in range(steps):
        _, grad = objective(share)
        share = share * np.exp(-0.5 * grad / np.abs(grad).max())
        share /= share.sum()
    measure = np.sum if power == 1 else np.max
    return float((measure(objective(uniform)[0]) / measure(objective(share)[0])) ** 2)


def _outcome(rng: np.random.Generator, probs: np.ndarray) -> int:
    """0 first wins, 1 second wins, 2 tie, 3 both bad (30 % of ties)."""
    outcome = int(rng.choice(3, p=probs))
    return 3 if outcome == 2 and rng.random() < 0.3 else outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--sd", type=float, default=0.7, help="sd of the true log-strengths")
    parser.add_argument("--nu", type=float, default=0.5, help="Davidson's tie parameter")
    parser.add_argument("--target-mean", type=float, default=60.0, help="mean full 95%% width, Elo points")
    parser.add_argument("--target-max", type=float, default=80.0, help="largest full 95%% width, Elo points")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--batch", type=int, default=20, help="votes between two refreshes of the weights")
    parser.add_argument("--check", type=int, default=100, help="votes between two board fits")
    parser.add_argument("--votes-per-item", type=int, default=1)
    parser.add_argument("--uniform-share", type=float, default=matchmaking.UNIFORM_SHARE)
    parser.add_argument("--max-votes", type=int, default=200_000)
    parser.add_argument("--rules", default="uniform,rating,pair")
    parser.add_argument(
        "--ceiling", action="store_true", help="print the best any allocation could do (cold start) and stop"
    )
    parser.add_argument("--entrants", type=int, default=0, help="models joining an established board")
    parser.add_argument("--established-votes", type=int, default=10_000, help="the board's votes before they join")
    args = parser.parse_args()
    rules = args.rules.split(",")
    if args.ceiling:
        for seed in range(args.seeds):
            print(
                f"seed {seed}: best allocation / uniform, votes ratio: mean width {ceiling(args, seed, 1.0):.2f}x,"
                f" largest width {ceiling(args, seed, 16.0):.2f}x",
                flush=True,
            )
        return
    print(
        f"K={args.models} sd={args.sd} nu={args.nu} targets: mean width <= {args.target_mean}, "
        f"max width <= {args.target_max}; batch {args.batch}, check every {args.check}, "
        f"{args.votes_per_item} vote(s) per item, uniform share {args.uniform_share}, {args.seeds} seeds"
        + (
            f"; {args.entrants} entrants join {args.models - args.entrants} models"
            f" with {args.established_votes} votes (votes counted from their entry)"
            if args.entrants
            else ""
        ),
        flush=True,
    )
    results: dict[str, list[dict[str, int | None]]] = {rule: [] for rule in rules}
    for seed in range(args.seeds):
        line = [f"seed {seed}:"]
        for rule in rules:
            t0 = time.perf_counter()
            needed = simulate_run(args, rule, seed)
            results[rule].append(needed)
            line.append(f"{rule} mean {needed['mean']} max {needed['max']} ({time.perf_counter() - t0:.1f} s)")
        print("  ".join(line), flush=True)
    print()
    print(f"{'rule':<10} {'votes to mean width':>20} {'votes to max width':>20} {'ratio mean':>11} {'ratio max':>10}")
    base = {t: _mean([r[t] for r in results.get("uniform", [])]) for t in ("mean", "max")}
    for rule in rules:
        mean_votes = {t: _mean([r[t] for r in results[rule]]) for t in ("mean", "max")}
        ratios = {t: (base[t] / mean_votes[t] if base[t] and mean_votes[t] else float("nan")) for t in ("mean", "max")}
        print(
            f"{rule:<10} {mean_votes['mean']:>20,.0f} {mean_votes['max']:>20,.0f} "
            f"{ratios['mean']:>10.2f}x {ratios['max']:>9.2f}x"
        )


def _mean(values) -> float:
    if not values or any(v is None for v in values):
        return float("nan")  # a run never reached the target within --max-votes
    return float(np.mean(values))


if __name__ == "__main__":
    main()
