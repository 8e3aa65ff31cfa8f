"""The OpenAI stand-in (openai_standin.py) as a rate-limited endpoint: it answers at most `limit`
requests at once, each after `latency` seconds, and refuses any request beyond that at once with a
429 (with `retry-after` when `retry_after` is set). The client is never told `limit`: the tests of
adaptive concurrency and bench/bench_judge_concurrency.py find out whether it finds it.

Run alone: python -m tests.inference.ratelimited_standin --limit 12 --latency 0.05 [--port 8766]

`rejected` holds the time (time.monotonic()) of each 429 it sent; `limit` may be changed while it
runs (an endpoint whose limit moves).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .openai_standin import StandIn


class RateLimitedStandIn(StandIn):
    def __init__(self, *, limit: int, latency: float, retry_after: float | None = None):
        super().__init__(latency=latency, faults=False)
        self.limit = limit
        self.retry_after_header = retry_after
        self.rejected: list[float] = []

    async def respond(self, body: dict[str, Any]) -> tuple[int, dict[str, Any] | bytes, dict[str, str]]:
        # One event loop serves every connection: nothing runs between this check and the count
        # that StandIn.respond takes before its first await.
        with self.lock:
            over = self.in_flight >= self.limit
            if over:
                self.rejected.append(time.monotonic())
        if not over:
            return await super().respond(body)
        await asyncio.sleep(0)
        headers = {"retry-after": f"{self.retry_after_header:g}"} if self.retry_after_header is not None else {}
        return 429, {"error": {"message": "rate limited", "type": "rate_limit"}}, headers

    @property
    def served(self) -> int:
        with self.lock:
            return len(self.events)


def main() -> None:
    import argparse
    import threading

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--limit", type=int, required=True)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--retry-after", type=float, default=None)
    args = parser.parse_args()
    standin = RateLimitedStandIn(limit=args.limit, latency=args.latency, retry_after=args.retry_after).start(args.port)
    print(standin.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        standin.stop()


if __name__ == "__main__":
    main()
