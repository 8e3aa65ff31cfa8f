"""Scoring throughput on the leaderboard's own path: 1,000,000 STATUS items (6M predictions) and
100,000 rated videos.

Run: .venv/bin/python bench/bench_scoring.py [--status-items N] [--videos N] [--boot B]

STATUS: the inputs are what ``evaluation.selectors`` hands the leaderboard for one model's answer set:
``ScoringItem``s with their resolved queries (options, correct letter) and a dict
``(item, query) -> ModelAnswer(answer, options seen, logprobs)`` with the stored canonical answers
(letters as import/inference parsed them; 1 % failed predictions with value None; 10 % of items
seen with the OSI options in the other order, so answers are mapped back by option text; OSI/IR
first-token log-probs on every item). Timed: ``answer_sets.score("status", ...)``, i.e. answer
normalization and remapping, the correctness matrix with category and difference breakdowns, the
exact printed row, probability reassignment, same-letter bias and the 95 % bootstrap intervals of
all 48 columns. Building the inputs (the database read) is not timed. Separately timed: parsing
raw model outputs into canonical answers (done once, at import or inference time).

OSCBench: ``selectors.ratings_by_item``-shaped input (item -> [(rater, {criterion: 1..5 or
None})], 3 raters, N/A for subject on 30 % of videos, 2 % missing scores), 12 generators. Timed:
what the leaderboard does for the human-rated table (per generator ``score_oscbench_ratings`` and
``finish`` with intervals), plus the Random row. Synthetic, seeded data; no database.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from evaluation.scoring import answer_sets  # noqa: E402
from protocols.kit.answers import answer_parser  # noqa: E402
from protocols.oscbench import scoring as oscbench  # noqa: E402
from protocols.status import scoring as status  # noqa: E402


def timed(label, fn):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    print(f"{label:<62} {dt:8.3f} s wall {dc:8.3f} s CPU", flush=True)
    return out, dt, dc


def status_inputs(n_items: int):
    rng = np.random.default_rng(0)
    letters = "ABCD"
    items, answers = [], {}
    cats = rng.integers(0, 3, n_items)
    diffs = rng.integers(0, 2, n_items)
    sci2_ans = rng.integers(0, 2, n_items)
    sci4_ans = rng.integers(0, 4, n_items)
    wrong = rng.random((n_items, 6)) < 0.35
    failed = rng.random((n_items, 6)) < 0.01
    swapped = rng.random(n_items) < 0.10
    lp = np.log(rng.uniform(0.05, 0.95, size=(n_items, 4)))
    for i in range(n_items):
        states = [f"a closed box {i}", f"an open box {i}"]
        changes = [f"open box {i}", f"close box {i}", f"shake box {i}", f"lift box {i}"]
        resolved = {
            "osi_a": {"options": states, "answer": "A"},
            "osi_b": {"options": states, "answer": "B"},
            "ir_a": {"options": ["image A", "image B"], "answer": "A"},
            "ir_b": {"options": ["image A", "image B"], "answer": "B"},
            "sci2": {"options": changes[:2], "answer": letters[sci2_ans[i]]},
            "sci4": {"options": changes, "answer": letters[sci4_ans[i]]},
        }
        items.append(
            answer_sets.ScoringItem(
                key=i,
                external_id=f"it{i}",
                payload={"category": status.CATEGORIES[cats[i]], "difference": status.DIFFERENCES[diffs[i]]},
                resolved=resolved,
            )
        )
        for j, q in enumerate(status.QUERIES):
            spec = resolved[q]
            k = len(spec["options"])
            truth = letters.index(spec["answer"])
            pick = (truth + 1) % k if wrong[i, j] else truth
            seen = list(spec["options"])  # a stored copy, as read from the database
            logprobs = None
            if j < 4:
                logprobs = {"A": float(lp[i, j]), "B": float(np.log1p(-np.exp(lp[i, j])))}
            if j < 2 and swapped[i]:
                seen = seen[::-1]
                pick = 1 - pick
            answers[(i, q)] = answer_sets.ModelAnswer(None if failed[i, j] else letters[pick], seen, logprobs)
    return items, answers


def score_status(n_items: int, n_boot: int) -> float:
    """Build the STATUS inputs and time one model's row; the inputs are freed when it returns."""
    (items, answers), _, _ = timed("  build inputs (not part of the figure)", lambda: status_inputs(n_items))
    scored, dt, _ = timed(
        f"  answer_sets.score('status'): row + reassignment + CIs ({n_boot} resamples)",
        lambda: answer_sets.score("status", items, answers, n_boot=n_boot),
    )
    row = scored.printed
    print(
        "  row: " + " ".join(str(row[k]) for k in status.KEYS) + f"   parse failures {scored.matrix.parse_failures:,}"
    )
    reassigned = scored.matrix.diagnostics["reassigned"]
    print(f"  reassigned: {reassigned['racc_osi']} / {reassigned['racc_ir']}")
    return dt


def bench_status(n_items: int, n_boot: int) -> float:
    print(f"STATUS: {n_items:,} items, {6 * n_items:,} predictions", flush=True)
    dt = score_status(n_items, n_boot)
    # Parsing raw outputs happens once per prediction at import / inference time, not per board.
    raws = [
        "B",
        "Answer: (B)",
        "an open box 7",
        "The answer is a.",
        "**A**",
        "I think it is option B because the lid is up",
    ]
    sample = [raws[k % len(raws)] for k in range(300_000)]
    opts = ["a closed box 7", "an open box 7"]
    # As an import of predictions parses them: the protocol looked up once (answer_parser).
    parse = answer_parser("status")
    _, dp, _ = timed(
        "  parse_answer on 300,000 raw outputs (import-time work)",
        lambda: [parse("osi_b", r, opts) for r in sample],
    )
    print(f"  -> {dp / 300_000 * 1e6:.2f} us per raw output")
    return dt


def video_inputs(n_videos: int):
    rng = np.random.default_rng(1)
    scores = rng.integers(1, 6, size=(n_videos, 3, 8))
    missing = rng.random((n_videos, 3, 8)) < 0.02
    missing[:, :, 0] |= (rng.random(n_videos) < 0.3)[:, None]  # subject N/A
    generators = rng.integers(0, 12, n_videos)
    scenarios = rng.integers(0, 3, n_videos)
    actions = rng.integers(0, 10, n_videos)
    items, ratings = [], {}
    for i in range(n_videos):
        items.append(
            answer_sets.ScoringItem(
                key=i,
                external_id=f"v{i}",
                payload={
                    "generator": f"gen{generators[i]}",
                    "scenario": oscbench.SCENARIOS[scenarios[i]],
                    "action_category": f"cat{actions[i]}",
                },
                resolved={"judge": {}},
            )
        )
        ratings[i] = [
            (
                f"r{k}",
                {c: (None if missing[i, k, j] else int(scores[i, k, j])) for j, c in enumerate(oscbench.CRITERIA)},
            )
            for k in range(3)
        ]
    return items, ratings


def bench_videos(n_videos: int, n_boot: int) -> float:
    print(f"OSCBench: {n_videos:,} videos x 3 raters x 8 criteria, 12 generators", flush=True)
    (items, ratings), _, _ = timed("  build inputs (not part of the figure)", lambda: video_inputs(n_videos))

    def leaderboard():
        # evaluation.leaderboard._generator_rows without the database.
        by_generator: dict[str, list] = {}
        for item in items:
            by_generator.setdefault(item.payload["generator"], []).append(item)
        per_item = {key: [scores for _, scores in entries] for key, entries in ratings.items()}
        rows = {}
        for g in sorted(by_generator):
            matrix = oscbench.score_ratings(by_generator[g], per_item)
            rows[g] = answer_sets.finish("oscbench", matrix, n_boot=n_boot)
        rows["Random"] = answer_sets.finish("oscbench", oscbench.random_matrix(items, seed=7919), n_boot=n_boot)
        return rows

    rows, dt, _ = timed(f"  generator leaderboard + Random, CIs ({n_boot} resamples)", leaderboard)
    gen0 = rows["gen0"]
    print(
        f"  gen0 object = {gen0.printed['object']}, osc_accuracy = {gen0.printed['osc_accuracy']}, ci "
        f"{gen0.cis['object']}"
    )
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--status-items", type=int, default=1_000_000)
    ap.add_argument("--videos", type=int, default=100_000)
    ap.add_argument("--boot", type=int, default=1000)
    a = ap.parse_args()
    print(f"numpy {np.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    v = bench_videos(a.videos, a.boot)
    s = bench_status(a.status_items, a.boot)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"targets: STATUS < 10 s -> {s:.2f} s; video rating < 2 s -> {v:.2f} s; peak RSS {rss:.0f} MiB; "
        f"load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
