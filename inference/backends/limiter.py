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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
import uuid
from collections.abc import AsyncIterator

log = logging.getLogger(__name__)

KEY_PREFIX = "statelab:inference:inflight:"
DEFAULT_TTL = 30.0  # seconds a slot outlives its holder's last refresh

# KEYS[1] the endpoint's slot set; ARGV: limit, token, ttl in ms. Returns 1 when the slot was taken.
_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ttl * 2)
  return 1
end
return 0
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


class EndpointLimiter:
    """Per-call handle: `async with limiter.slot(): ...` around each request; `await close()` at the end."""

    def __init__(
        self,
        key: str,
        limit: int,
        redis_url: str | None = None,
        *,
        ttl: float = DEFAULT_TTL,
        poll: tuple[float, float] = (0.005, 0.1),
    ):
        self.key = KEY_PREFIX + key
        self.limit = max(1, int(limit))
        self.ttl_ms = max(1000, int(ttl * 1000))
        self.poll = poll
        self._local = asyncio.Semaphore(self.limit)
        self._redis = None
        self._held: set[str] = set()  # every token this call owns, in use or free
        self._free: list[str] = []  # owned tokens no request uses right now
        self._waiting = 0  # requests of this call that want a slot and have none yet
        self._heartbeat: asyncio.Task | None = None
        self._closing = None  # the client to close after a Redis failure
        self._prefix = f"{socket.gethostname()}:{os.getpid()}:"
        if redis_url:
            import redis.asyncio as aioredis

            self._redis = aioredis.from_url(redis_url)
            self._acquire = self._redis.register_script(_ACQUIRE)
            self._refresh = self._redis.register_script(_REFRESH)

    @property
    def distributed(self) -> bool:
        return self._redis is not None

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        self._waiting += 1
        waiting = True
        try:
            async with self._local:
                token = await self._take() if self._redis is not None else None
                self._waiting -= 1
                waiting = False
                try:
                    yield
                finally:
                    if token is not None:
                        if len(self._free) < self._waiting and self._redis is not None:
                            self._free.append(token)  # straight to the next request of this call
                        else:
                            await self._give_back(token)
        finally:
            if waiting:  # cancelled before it got a slot
                self._waiting -= 1

    async def _take(self) -> str | None:
        token = self._prefix + uuid.uuid4().hex
        delay = self.poll[0]
        while self._redis is not None:
            if self._free:
                return self._free.pop()
            try:
                taken = await self._acquire(keys=[self.key], args=[self.limit, token, self.ttl_ms])
            except Exception as exc:  # Redis gone: keep answering queries under the local bound
                self._degrade(exc)
                return None
            if taken:
                self._held.add(token)
                if self._heartbeat is None:
                    self._heartbeat = asyncio.create_task(self._keep_alive())
                return token
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, self.poll[1])
        return None

    async def _give_back(self, token: str) -> None:
        self._held.discard(token)
        if self._redis is None:
            return
        try:
            await self._redis.zrem(self.key, token)
        except Exception as exc:  # the slot lapses after ttl anyway
            self._degrade(exc)

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
