"""Scoring throughput: 1,000,000 STATUS items (6M predictions) and 100,000 rated videos.

Run: .venv/bin/python bench/bench_scoring.py [--status-items N] [--videos N] [--boot B]
Times the vectorized scoring (correctness matrix -> exact printed row, with category and
difference breakdowns), the bootstrap intervals, and the OSCBench generator leaderboard from
3 raters x 8 criteria per video (with N/A). Synthetic data; no database.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from evaluation.scoring import oscbench, status  # noqa: E402


def timed(label, fn):
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    print(f"{label:<58} {dt:8.3f} s")
    return out, dt


def bench_status(n_items: int, n_boot: int) -> float:
    rng = np.random.default_rng(0)
    truth = np.empty((n_items, 6), dtype=np.int8)
    truth[:, 0], truth[:, 1], truth[:, 2], truth[:, 3] = 0, 1, 0, 1
    truth[:, 4] = rng.integers(0, 2, n_items)
    truth[:, 5] = rng.integers(0, 4, n_items)
    pred = truth.copy()
    wrong = rng.random((n_items, 6)) < 0.35
    pred[wrong] = (pred[wrong] + 1) % np.array([2, 2, 2, 2, 2, 4], dtype=np.int8)[np.nonzero(wrong)[1]]
    pred[rng.random((n_items, 6)) < 0.01] = -1  # unparseable
    categories = np.array(status.CATEGORIES)[rng.integers(0, 3, n_items)]
    differences = np.array(status.DIFFERENCES)[rng.integers(0, 2, n_items)]
    print(f"STATUS: {n_items:,} items, {6 * n_items:,} predictions")
    total = 0.0
    matrix, dt = timed("  correctness + per-item metric cells (+ 5 breakdowns)", lambda: status.item_matrix(truth, pred, categories=categories, differences=differences))
    total += dt
    row, dt = timed("  exact printed row (48 columns, half-up decimals)", lambda: status.printed(matrix))
    total += dt
    print(f"  scoring total{'':<44} {total:8.3f} s   row: " + " ".join(str(row[k]) for k in status.KEYS))
    _, dt_ci = timed(f"  bootstrap 95 % CI, {n_boot} resamples, 48 columns", lambda: status.cis(matrix, n_boot=n_boot))
    print(f"  scoring + intervals{'':<38} {total + dt_ci:8.3f} s")
    return total


def bench_videos(n_videos: int, n_boot: int) -> float:
    rng = np.random.default_rng(1)
    scores = rng.integers(1, 6, size=(n_videos, 3, 8)).astype(np.float64)
    na = rng.random(n_videos) < 0.3
    scores[na, :, 0] = np.nan  # subject N/A
    scores[rng.random((n_videos, 3, 8)) < 0.02] = np.nan
    generators = rng.integers(0, 12, n_videos)
    scenarios = np.array(oscbench.SCENARIOS)[rng.integers(0, 3, n_videos)]
    actions = np.array([f"cat{i}" for i in range(10)])[rng.integers(0, 10, n_videos)]
    print(f"OSCBench: {n_videos:,} videos x 3 raters x 8 criteria, 12 generators")

    def leaderboard():
        sums, counts = oscbench.ratings_to_arrays(scores)
        rows = {}
        for g in range(12):
            mask = generators == g
            m = oscbench.item_matrix(sums[mask], counts[mask], scenarios=scenarios[mask], action_categories=actions[mask])
            rows[g] = oscbench.printed(m)
        return rows

    rows, dt = timed("  generator leaderboard (8 criteria + 14 state-change cols)", leaderboard)
    print(f"  generator 0 object = {rows[0]['object']}, osc_accuracy = {rows[0]['osc_accuracy']}")
    sums, counts = oscbench.ratings_to_arrays(scores)
    m = oscbench.item_matrix(sums, counts, scenarios=scenarios, action_categories=actions)
    timed(f"  bootstrap 95 % CI over all videos, {n_boot} resamples", lambda: oscbench.cis(m, n_boot=n_boot))
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--status-items", type=int, default=1_000_000)
    ap.add_argument("--videos", type=int, default=100_000)
    ap.add_argument("--boot", type=int, default=1000)
    a = ap.parse_args()
    print(f"numpy {np.__version__}, {os.cpu_count()} CPUs")
    s = bench_status(a.status_items, a.boot)
    v = bench_videos(a.videos, a.boot)
    print(f"targets: STATUS scoring < 10 s -> {s:.2f} s; video rating < 2 s -> {v:.2f} s")


if __name__ == "__main__":
    main()
