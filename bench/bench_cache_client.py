"""Cache reads with Django's Redis backend against ours (config/cache.py: one client per pool).

Every API request with a token reads the bad-token count from the cache (annotation/tokens.py).
This times that read, N calls per round, the two backends alternated round by round against the
same Redis, and prints per-call CPU and wall time and their ratios (lower is better for ours).

    REDIS_URL=redis://127.0.0.1:6379/<n> .venv/bin/python bench/bench_cache_client.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("SECRET_KEY", "bench-only")
django.setup()

from django.core.cache.backends.redis import RedisCache as DjangoRedisCache  # noqa: E402

from config.cache import RedisCache  # noqa: E402


def timed(cache, calls: int) -> tuple[float, float]:
    key = "bench-bad-token:198.51.100.7"
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(calls):
        cache.get(key)
    return (time.process_time() - cpu) / calls * 1e6, (time.perf_counter() - wall) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    params = {"KEY_PREFIX": "bench", "OPTIONS": {"socket_connect_timeout": 3, "socket_timeout": 5}}
    backends = {"django": DjangoRedisCache(url, params), "statelab": RedisCache(url, params)}
    for cache in backends.values():
        timed(cache, 500)  # connect and warm up
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in backends}
    for _ in range(args.rounds):
        for name, cache in backends.items():
            results[name].append(timed(cache, args.calls))
    cpu = {name: statistics.median(c for c, _ in runs) for name, runs in results.items()}
    wall = {name: statistics.median(w for _, w in runs) for name, runs in results.items()}
    for name in backends:
        per_call = f"{cpu[name]:7.1f} µs CPU, {wall[name]:7.1f} µs wall per call"
        print(f"{name:9s} cache.get: {per_call} (median of {args.rounds})")
    print(f"ours / Django's: CPU {cpu['statelab'] / cpu['django']:.2f}x, wall {wall['statelab'] / wall['django']:.2f}x")


if __name__ == "__main__":
    main()
