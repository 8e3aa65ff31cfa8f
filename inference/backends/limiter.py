"""A bound on the requests in flight to one endpoint, across chunks, worker processes and hosts.

Every chunk's Celery task builds its own backend call, and the api queue runs several worker processes
(docker-compose: `--concurrency 4`, possibly on several hosts), so a per-call asyncio.Semaphore
alone would let one endpoint see (processes x chunks) x concurrency requests at once. Here a
request holds two things while it runs:

1. a slot of the local asyncio.Semaphore(limit) of this backend call (no Redis round trip is
   attempted by more than `limit` asyncio tasks of one call at once), and
2. a slot of a Redis counting semaphore keyed by the endpoint: a sorted set whose members are
   slot tokens and whose scores are expiry times (Redis server clock, milliseconds). A Lua script
   drops expired tokens and adds ours only while fewer than `limit` remain, atomically. A holder
   refreshes its tokens' expiry every ttl/3 while its requests run, so a worker that is killed
   (SIGKILL, lost host) stops refreshing and its slots lapse after `ttl` seconds. Waiters poll
   with a short jittered backoff.

A finished request hands its Redis slot straight to a request of the same call that is waiting
for one, instead of giving it back and taking it again: a busy call costs two Redis round trips
per slot (take, give back), not per request. A call therefore keeps its slots while it has work
queued; chunks are small (about two rounds of the endpoint's concurrency), so others soon get
their turn.

Without a Redis URL (the eager demo, no broker) only the local semaphore applies. If Redis
fails during a call, the call logs a warning and goes on with the local bound only: the
endpoint's rate limits are a politeness, answering queries is the job.

Adaptive concurrency. The number of slots is not fixed at the endpoint's `concurrency`: that is
its cap. A window, kept in Redis beside the slot set (one hash per endpoint, so every worker
reads and moves the same one), says how many requests may be in flight now; the acquire script
lets a request in only while fewer than floor(window) slots are taken. Each finished request
reports back (`Slot.outcome`, read by the feedback script), as TCP's congestion control does:

- an answer in time (within the backend's `slow_after`) adds one slot per answer while the
  window is below the threshold (the window doubles per round trip: a quick climb back to where
  the endpoint last coped); at or above it, the additive increase: per round trip, half the way
  to one slot below the window that last failed, and at least one slot per `probe` round trips
  (so it closes in on a limit it overshot while climbing quickly, and looks past a known one
  carefully);
- a 429 or a timeout halves the window (never below 1), once per round trip: the failure of a
  request sent before the last cut does not cut again, since that cut already answered it. The
  threshold becomes the window just below the one that failed when the window was probing (the
  limit is right there), else the halved window (an overshoot while climbing says little about
  where the limit is). A 429's `Retry-After` also pauses the whole endpoint: no worker sends a
  request until it has passed;
- a slow answer, or a 500, leaves the window as it is.

Only a window in use grows: an answer while fewer than half its slots are taken (a worker short
of work, or of CPU) leaves it as it is. The window starts at `start` (default 4, at most the
cap), with no threshold until the first cut, and lives an hour past its last use. So against a
limit L it spends most round trips at L, one beyond it (whose refused requests are asked again)
and one climbing back from about L/2.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

log = logging.getLogger(__name__)

KEY_PREFIX = "statelab:inference:inflight:"
DEFAULT_TTL = 30.0  # seconds a slot outlives its holder's last refresh

STATE_PREFIX = "statelab:inference:window:"
STATE_TTL_MS = 3_600_000  # an endpoint's window is forgotten an hour after its last use
DEFAULT_START = 4  # the window of an endpoint no worker has used lately
DEFAULT_PROBE = 8  # round trips per slot added at or above the threshold

# KEYS[1] the endpoint's slot set, KEYS[2] its window state; ARGV: cap, token, ttl in ms, start.
# Returns {1, now} when the slot was taken, {0, 0} when the window is full, {-1, ms to wait} while
# a Retry-After pause runs.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
local cap = tonumber(ARGV[1])
local state = redis.call('HMGET', KEYS[2], 'window', 'paused_until')
local window = tonumber(state[1]) or math.min(cap, tonumber(ARGV[4]))
local paused = tonumber(state[2]) or 0
if paused > now then
  return {-1, paused - now}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = redis.call('ZCARD', KEYS[1])
if n < math.min(cap, math.max(1, math.floor(window))) then
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ttl * 2)
  return {1, now}
end
return {0, 0}
"""

# KEYS[1] the window state, KEYS[2] the slot set; ARGV: outcome ('ok', 'slow', 'limited',
# 'timeout'), cap, the request's send time (Redis ms), pause in ms, start, probe, state ttl in ms.
# Returns the window after the change (a string: Lua numbers become integers on the way back) and
# the ms left of a pause.
_FEEDBACK = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local outcome = ARGV[1]
local cap = tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'window', 'threshold', 'cut_at', 'paused_until', 'failed_at')
local window = tonumber(state[1]) or math.min(cap, tonumber(ARGV[5]))
local threshold = tonumber(state[2]) or (cap + 1)
local cut_at = tonumber(state[3]) or 0
local paused = tonumber(state[4]) or 0
local failed_at = tonumber(state[5]) or 0
if outcome == 'ok' then
  -- Only a window in use grows: a worker that cannot fill it has not shown the endpoint copes.
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  local in_use = redis.call('ZCARD', KEYS[2]) * 2 >= math.floor(window)
  if in_use and window < threshold then
    window = math.min(window + 1, threshold)
  elseif in_use then
    -- per round trip: half the way to just below the window that last failed, or one slot per `probe`
    window = window + math.max(1 / tonumber(ARGV[6]), (failed_at - 1 - window) / 2) / window
  end
elseif outcome == 'limited' or outcome == 'timeout' then
  if tonumber(ARGV[3]) > cut_at then
    if window < threshold then
      threshold = math.max(1, window / 2)
    else
      threshold = math.max(1, math.floor(window) - 1)
    end
    failed_at = math.floor(window)
    window = math.max(1, window / 2)
    cut_at = now
  end
  local pause = tonumber(ARGV[4])
  if pause > 0 and now + pause > paused then
    paused = now + pause
  end
end
window = math.min(cap, math.max(1, window))
redis.call('HSET', KEYS[1], 'window', tostring(window), 'threshold', tostring(threshold), 'cut_at', cut_at,
  'paused_until', paused, 'failed_at', failed_at)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[7]))
return {tostring(window), math.max(0, paused - now)}
"""

# KEYS[1] the slot set; ARGV[1] ttl in ms, ARGV[2..] tokens still held. Extends those that are
# still there (XX: a token that already lapsed is not brought back). Returns how many.
_REFRESH = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[1])
local n = 0
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i])
    n = n + 1
  end
end
redis.call('PEXPIRE', KEYS[1], ttl * 2)
return n
"""


@dataclass
class Slot:
    """One request's hold on the endpoint. The caller sets `outcome` ('ok', 'slow', 'limited',
    'timeout'; None says nothing, as for a 500) and `pause` (seconds of Retry-After) before leaving it."""

    token: str | None = None
    sent_ms: int = 0  # when it was taken, on the Redis clock
    outcome: str | None = None
    pause: float = 0.0


class EndpointLimiter:
    """Per-call handle: `async with limiter.slot() as slot: ...` around each request (setting
    slot.outcome); `await close()` at the end. `limit` is the endpoint's cap."""

    def __init__(
        self,
        key: str,
        limit: int,
        redis_url: str | None = None,
        *,
        ttl: float = DEFAULT_TTL,
        poll: tuple[float, float] = (0.005, 0.1),
        start: int = DEFAULT_START,
        probe: int = DEFAULT_PROBE,
        adaptive: bool = True,
    ):
        self.key = KEY_PREFIX + key
        self.state_key = STATE_PREFIX + key
        self.limit = max(1, int(limit))
        # Not adaptive: the window stays at the cap (a fixed bound, as before adaptive concurrency).
        self.adaptive = adaptive
        self.start = max(1, min(self.limit, int(start))) if adaptive else self.limit
        self.probe = max(1, int(probe))
        self.window = float(self.start)  # the last window Redis reported
        self._wake = asyncio.Event()  # set when a waiter of this call may find a slot now
        self._paused_until = 0.0  # (monotonic) the end of the last Retry-After pause Redis reported
        self.ttl_ms = max(1000, int(ttl * 1000))
        self.poll = poll
        self._local = asyncio.Semaphore(self.limit)
        self._redis = None
        self._held: dict[str, int] = {}  # every token this call owns -> when it was last taken (Redis ms)
        self._free: list[str] = []  # owned tokens no request uses right now
        self._waiting = 0  # requests of this call that want a slot and have none yet
        self._heartbeat: asyncio.Task | None = None
        self._closing = None  # the client to close after a Redis failure
        self._clock_offset_ms = 0.0  # Redis clock minus this host's, as of the last slot taken
        self._prefix = f"{socket.gethostname()}:{os.getpid()}:"
        if redis_url:
            import redis.asyncio as aioredis

            self._redis = aioredis.from_url(redis_url)
            self._acquire = self._redis.register_script(_ACQUIRE)
            self._refresh = self._redis.register_script(_REFRESH)
            self._feedback = self._redis.register_script(_FEEDBACK)

    @property
    def distributed(self) -> bool:
        return self._redis is not None

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[Slot]:
        self._waiting += 1
        waiting = True
        try:
            async with self._local:
                token = await self._take() if self._redis is not None else None
                self._waiting -= 1
                waiting = False
                held = Slot(token, self._held.get(token, 0) if token else 0)
                try:
                    yield held
                finally:
                    if held.outcome is not None:
                        await self._report(held)
                    if token is not None:
                        # A token goes to the next request only within the window and outside a
                        # pause; else through Redis again, which knows both for every worker.
                        within = len(self._held) <= int(self.window) and time.monotonic() >= self._paused_until
                        if within and len(self._free) < self._waiting and self._redis is not None:
                            # straight to the next request of this call, sent from now on
                            self._held[token] = int(time.time() * 1000 + self._clock_offset_ms)
                            self._free.append(token)
                        else:
                            await self._give_back(token)
        finally:
            if waiting:  # cancelled before it got a slot
                self._waiting -= 1

    async def _report(self, slot: Slot) -> None:
        if self._redis is None or not self.adaptive:
            return
        args = [slot.outcome, self.limit, slot.sent_ms, int(slot.pause * 1000)]
        try:
            window, paused_ms = await self._feedback(
                keys=[self.state_key, self.key], args=[*args, self.start, self.probe, STATE_TTL_MS]
            )
            if int(float(window)) > int(self.window):
                self._wake.set()
            self.window = float(window)
            self._paused_until = time.monotonic() + int(paused_ms) / 1000
        except Exception as exc:
            self._degrade(exc)

    async def _take(self) -> str | None:
        token = self._prefix + uuid.uuid4().hex
        delay = self.poll[0]
        while self._redis is not None:
            if self._free:
                return self._free.pop()
            try:
                taken, now_ms = await self._acquire(
                    keys=[self.key, self.state_key], args=[self.limit, token, self.ttl_ms, self.start]
                )
            except Exception as exc:  # Redis gone: keep answering queries under the local bound
                self._degrade(exc)
                return None
            if taken == 1:
                self._held[token] = int(now_ms)
                self._clock_offset_ms = int(now_ms) - time.time() * 1000
                if self._heartbeat is None:
                    self._heartbeat = asyncio.create_task(self._keep_alive())
                return token
            if taken == -1:  # a Retry-After pause: wait it out, spread a little
                await asyncio.sleep(now_ms / 1000 * (1 + 0.1 * random.random()))
                continue
            # Poll again after a jittered backoff, or at once when this call's own slots free up
            # or its window grows (other workers' changes are seen by polling).
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay * (0.5 + random.random()))
            delay = min(delay * 2, self.poll[1])
        return None

    async def _give_back(self, token: str) -> None:
        self._held.pop(token, None)
        if self._redis is None:
            return
        try:
            await self._redis.zrem(self.key, token)
        except Exception as exc:  # the slot lapses after ttl anyway
            self._degrade(exc)
        self._wake.set()

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(self.ttl_ms / 3000)
            if self._held and self._redis is not None:
                try:
                    await self._refresh(keys=[self.key], args=[self.ttl_ms, *self._held])
                except Exception as exc:
                    self._degrade(exc)
                    return

    def _degrade(self, exc: BaseException) -> None:
        if self._redis is not None:
            log.warning("in-flight limiter for %s: Redis failed (%s); bounding by this process only", self.key, exc)
            redis, self._redis = self._redis, None
            self._closing = redis

    async def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._heartbeat
        client = self._redis or self._closing
        if client is None:
            return
        try:
            if self._held and self._redis is not None:  # free slots, and requests cancelled mid-flight
                await self._redis.zrem(self.key, *self._held)
        except Exception:
            pass
        finally:
            self._held.clear()
            self._free.clear()
            with contextlib.suppress(Exception):
                await client.aclose()


def window_state(redis_url: str, key: str) -> dict[str, float]:
    """An endpoint key's adaptive window as Redis holds it (window, threshold, cut_at, paused_until);
    empty when no worker used it lately. For tests, benchmarks and admins."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        return {k.decode(): float(v) for k, v in client.hgetall(STATE_PREFIX + key).items()}
    finally:
        client.close()


def in_flight(redis_url: str, key: str) -> int:
    """Slots currently held for an endpoint key (expired ones not counted); for tests and admins."""
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        now_s, now_us = client.time()
        now_ms = now_s * 1000 + now_us // 1000
        return int(client.zcount(KEY_PREFIX + key, now_ms + 1, "+inf"))
    finally:
        client.close()
