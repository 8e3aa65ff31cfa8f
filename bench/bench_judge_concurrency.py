"""API judges against an endpoint that rate-limits at a concurrency the client is not told (not a test).

The stand-in (tests/inference/ratelimited_standin.py, its own process) answers at most --limit
requests at once, each after --latency seconds, and refuses the rest at once with a 429 (with a
Retry-After of --retry-after seconds when given). N judge-shaped queries go through the
production OpenAIBackend, with its limiter in Redis (REDIS_URL, as the workers have it; a fresh
endpoint key per run), in three ways:

- fixed concurrency 1 (the careful baseline: never refused, one request at a time);
- a search over fixed concurrencies (1, 2, 4, 8, 12, 16, 24, 32: the endpoint's `adaptive: false`),
  each above the hidden limit paying for its 429s with retries and backoff;
- adaptive (the default: cap 32, starting at 4; inference/backends/limiter.py).

Prints each run's wall time, answers per second, 429s, and the ratios adaptive / c=1 (target
>= 5x) and adaptive / best fixed concurrency found by the search (target >= 0.9).

    REDIS_URL=redis://127.0.0.1:6379/0 .venv/bin/python bench/bench_judge_concurrency.py \\
        [--queries 600] [--c1-queries 60] [--limit 12] [--latency 0.2] [--retry-after 0.2] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from inference.backends.base import ModelQuery, Sampling  # noqa: E402
from inference.backends.openai_backend import OpenAIBackend  # noqa: E402
from protocols.oscbench.prompts import JUDGE_SCHEMA  # noqa: E402

FIXED = (1, 2, 4, 8, 12, 16, 24, 32)
CAP = 32


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_standin(limit: int, latency: float, retry_after: float | None) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "tests.inference.ratelimited_standin", "--port", str(free_port())]
    command += ["--limit", str(limit), "--latency", str(latency)]
    if retry_after is not None:
        command += ["--retry-after", str(retry_after)]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def queries(n: int, run: str) -> list[ModelQuery]:
    # Each run asks new questions (the text differs per run), as a new batch of items would.
    return [
        ModelQuery(
            key=f"{i}|judge",
            messages=[{"role": "user", "content": f"Judge answer {i} of {run}: is the end state reached?"}],
            json_schema=JUDGE_SCHEMA,
            max_tokens=800,
        )
        for i in range(n)
    ]


def run(base_url: str, redis_url: str, n: int, *, concurrency: int, adaptive: bool) -> dict:
    name = f"{'adaptive' if adaptive else 'fixed'}-{concurrency}-{uuid.uuid4().hex[:8]}"
    backend = OpenAIBackend(
        base_url=base_url,
        api_key=None,
        model="standin",
        concurrency=concurrency,
        options={"adaptive": adaptive, "max_retries": 20, "timeout": 30},
        limiter_key=f"bench:{name}",
        redis_url=redis_url,
    )
    started = time.perf_counter()
    replies = backend.complete(queries(n, name), Sampling())
    wall = time.perf_counter() - started
    failed = sum(1 for r in replies if r.error)
    return {
        "wall": wall,
        "rate": n / wall,
        "refused": sum(r.attempts for r in replies) - n,
        "failed": failed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--limit", type=int, default=12, help="the stand-in's hidden concurrency limit")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--c1-queries", type=int, default=60, help="queries of the c=1 run (its rate is per query)")
    parser.add_argument("--retry-after", type=float, default=None)
    parser.add_argument("--rounds", type=int, default=1, help="adaptive and the best fixed run again, alternated")
    args = parser.parse_args()
    redis_url = os.environ.get("REDIS_URL")
    if not redis_url:
        sys.exit("set REDIS_URL: the limiter keeps its window in Redis, as the workers do")

    proc, base_url = start_standin(args.limit, args.latency, args.retry_after)
    try:
        print(
            f"stand-in: limit {args.limit} (not told to the client), latency {args.latency * 1000:.0f} ms, "
            f"retry-after {args.retry_after if args.retry_after is not None else 'none'}; {args.queries} queries"
        )
        results: dict[str, list[dict]] = {}
        for c in FIXED:
            n = args.c1_queries if c == 1 else args.queries
            results[f"fixed {c}"] = [run(base_url, redis_url, n, concurrency=c, adaptive=False)]
        best = max(FIXED, key=lambda c: results[f"fixed {c}"][0]["rate"])
        results["adaptive"] = [run(base_url, redis_url, args.queries, concurrency=CAP, adaptive=True)]
        for _ in range(args.rounds - 1):
            results["adaptive"].append(run(base_url, redis_url, args.queries, concurrency=CAP, adaptive=True))
            results[f"fixed {best}"].append(run(base_url, redis_url, args.queries, concurrency=best, adaptive=False))

        print(f"{'run':<12} {'wall s':>8} {'answers/s':>10} {'429s':>6} {'failed':>7}")
        for label, runs in results.items():
            rate = statistics.median(r["rate"] for r in runs)
            wall = statistics.median(r["wall"] for r in runs)
            refused = statistics.median(r["refused"] for r in runs)
            failed = max(r["failed"] for r in runs)
            print(f"{label:<12} {wall:>8.2f} {rate:>10.1f} {refused:>6.0f} {failed:>7}")
        rate = {label: statistics.median(r["rate"] for r in runs) for label, runs in results.items()}
        print(f"best fixed concurrency found by the search: {best}")
        print(f"adaptive / c=1:        {rate['adaptive'] / rate['fixed 1']:.1f}x  (target >= 5x)")
        print(f"adaptive / fixed {best:<3}:  {rate['adaptive'] / rate[f'fixed {best}']:.2f}   (target >= 0.9)")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
