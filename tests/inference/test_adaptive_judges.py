"""Adaptive concurrency of API judges (inference/backends/limiter.py, openai_backend.py): against the
rate-limited stand-in (ratelimited_standin.py) over real HTTP, with the window in the real Redis."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from django.conf import settings

from inference.backends.base import ModelQuery, Sampling
from inference.backends.limiter import EndpointLimiter, in_flight, window_state
from inference.backends.openai_backend import OpenAIBackend
from inference.backends.response_cache import DatabaseResponseStore
from inference.models import CachedResponse, InferenceJob, JobStatus
from protocols.oscbench.prompts import JUDGE_SCHEMA

from . import factories
from .openai_standin import StandIn
from .ratelimited_standin import RateLimitedStandIn


def _redis_url() -> str:
    if not getattr(settings, "REDIS_URL", ""):
        pytest.skip("needs REDIS_URL (the adaptive window lives in Redis)")
    return settings.REDIS_URL


def _query(i: int) -> ModelQuery:
    return ModelQuery(
        key=f"{i}|osi_a",
        messages=[{"role": "user", "content": f"Pick one {i}.\nA. x\nB. y\nC. z"}],
        choices=["A", "B", "C"],
        max_tokens=4,
    )


def _backend(standin, key: str, *, cap: int, start: int, **options) -> OpenAIBackend:
    return OpenAIBackend(
        base_url=standin.base_url,
        api_key=None,
        model="m",
        concurrency=cap,
        limiter_key=key,
        redis_url=_redis_url(),
        options={"start_concurrency": start, "max_retries": 8, **options},
    )


def test_the_window_halves_once_per_round_trip_and_grows_back_by_one_per_answer():
    """The rules, step by step, through the limiter's own Redis scripts."""
    redis_url, key = _redis_url(), f"test-aimd-{uuid.uuid4().hex}"

    async def answer(limiter, outcome):
        async with limiter.slot() as slot:
            slot.outcome = outcome
        return limiter.window

    async def steps():
        limiter = EndpointLimiter(key, 16, redis_url, start=8)
        seen = []
        try:
            async with limiter.slot() as early:  # sent before the first cut
                pass
            await asyncio.sleep(0.01)  # (the Redis clock counts milliseconds)
            seen.append(await answer(limiter, "limited"))  # 8 -> 4; climbing, so the threshold is 4
            early.outcome = "limited"  # a 429 of a request sent before that cut: no second cut
            await limiter._report(early)
            seen.append(limiter.window)
            await asyncio.sleep(0.01)
            seen.append(await answer(limiter, "timeout"))  # sent after it: 4 -> 2, threshold 3, failed at 4
            other = limiter.slot()  # a second request in flight: the window is in use
            await other.__aenter__()
            for outcome in ("ok", "ok", "ok", "slow"):
                seen.append(await answer(limiter, outcome))
            await other.__aexit__(None, None, None)
            seen.append(await answer(limiter, "ok"))  # one request of a window of 3: not in use
        finally:
            await limiter.close()
        return seen

    # Back to the threshold one slot per answer; then (at the window below the one that failed)
    # 1/(window x 8) per answer; a slow answer leaves it.
    probing = 3 + 1 / 24
    expected = [4.0, 4.0, 2.0, 3.0, probing, probing + 1 / (probing * 8)]
    # In a thread of its own: a browser test earlier in the run may leave an event loop running here.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        got = pool.submit(asyncio.run, steps()).result()
    assert got == pytest.approx(expected + expected[-1:] * 2)
    state = window_state(redis_url, key)
    assert (state["window"], state["threshold"]) == pytest.approx((expected[-1], 3.0))
    assert in_flight(redis_url, key) == 0


def test_a_rate_limited_endpoint_halves_the_window_and_it_recovers_when_the_limit_rises():
    redis_url, key = _redis_url(), f"test-adapt-{uuid.uuid4().hex}"
    standin = RateLimitedStandIn(limit=4, latency=0.03, retry_after=None).start()
    try:
        backend = _backend(standin, key, cap=16, start=16)
        replies = backend.complete([_query(i) for i in range(80)], Sampling())
        assert [r.error for r in replies] == [None] * 80
        refused = len(standin.rejected)
        state = window_state(redis_url, key)
        # 16 at once met a limit of 4: 429s, and the window halved (16 -> 8 -> 4 at least) to
        # settle about the limit.
        assert refused > 0 and 2 <= state["window"] < 6 and state["threshold"] <= 5
        assert standin.max_in_flight == 4
        assert sum(r.attempts for r in replies) == 80 + refused  # each 429 was asked again
        # Few 429s after the first round trip: not a storm retried at 16.
        assert refused < 80

        # The endpoint now takes 12 at once: answers in time widen the window past the old limit.
        standin.limit = 12
        standin.reset_in_flight()
        before = len(standin.rejected)
        replies = backend.complete([_query(1000 + i) for i in range(400)], Sampling())
        assert [r.error for r in replies] == [None] * 400
        assert window_state(redis_url, key)["window"] >= 8
        assert standin.max_in_flight >= 8
        assert len(standin.rejected) - before < 40
        assert in_flight(redis_url, key) == 0
    finally:
        standin.stop()


def test_retry_after_pauses_every_request_to_the_endpoint():
    key = f"test-pause-{uuid.uuid4().hex}"
    standin = RateLimitedStandIn(limit=1, latency=0.2, retry_after=1.0).start()
    try:
        backend = _backend(standin, key, cap=2, start=2)
        replies = backend.complete([_query(i) for i in range(4)], Sampling())
        assert [r.error for r in replies] == [None] * 4
        assert standin.rejected
        first_refusal = standin.rejected[0]
        after = [e["received"] for e in standin.events if e["received"] > first_refusal]
        assert after  # requests were answered after the pause
        # Not only the refused request waited: nothing reached the endpoint during the pause.
        assert min(after) - first_refusal >= 0.95
    finally:
        standin.stop()


def test_a_retry_after_beyond_the_bound_falls_back_to_the_backoff():
    key = f"test-long-pause-{uuid.uuid4().hex}"
    standin = RateLimitedStandIn(limit=1, latency=0.2, retry_after=3600).start()
    try:
        backend = _backend(standin, key, cap=2, start=2)
        started = time.monotonic()
        replies = backend.complete([_query(i) for i in range(2)], Sampling())
        assert [r.error for r in replies] == [None] * 2 and standin.rejected
        assert time.monotonic() - started < 30  # an hour was not waited for
    finally:
        standin.stop()


_HOLDER = """
import asyncio, sys, time
from inference.backends.limiter import EndpointLimiter

async def main():
    limiter = EndpointLimiter(sys.argv[1], 4, sys.argv[2], ttl=3.0, start=4)
    held = [limiter.slot() for _ in range(3)]  # kept: a collected one would give its slot back
    for slot in held:
        await slot.__aenter__()
    print("holding", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def test_slots_of_a_killed_worker_process_expire():
    redis_url, key = _redis_url(), f"test-killed-{uuid.uuid4().hex}"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, key, redis_url],
        stdout=subprocess.PIPE,
        text=True,
        cwd=settings.BASE_DIR,
        env={**os.environ, "PYTHONPATH": str(settings.BASE_DIR)},
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        assert in_flight(redis_url, key) == 3
        time.sleep(4)  # past the ttl: the living holder's heartbeat keeps them
        assert in_flight(redis_url, key) == 3
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        killed = time.monotonic()
        while in_flight(redis_url, key) and time.monotonic() - killed < 10:
            time.sleep(0.1)
        assert in_flight(redis_url, key) == 0
        assert 0.5 <= time.monotonic() - killed < 8
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)


def _judge_query(i: int) -> ModelQuery:
    return ModelQuery(
        key=f"{i}|judge",
        messages=[{"role": "user", "content": f"Judge the answer {i}."}],
        json_schema=JUDGE_SCHEMA,
        max_tokens=800,
    )


def _cached_backend(standin, **options) -> OpenAIBackend:
    return OpenAIBackend(
        base_url=standin.base_url,
        api_key=None,
        model="m",
        options=options,
        response_store=DatabaseResponseStore(),
    )


@pytest.mark.django_db
def test_a_repeated_deterministic_request_is_served_from_the_cache_without_an_http_call():
    standin = StandIn(faults=False).start()
    try:
        backend = _cached_backend(standin)
        queries = [_query(1), _query(2), _judge_query(3)]
        first = backend.complete(queries, Sampling())
        assert standin.received == 3 and not any(r.extra.get("cached") for r in first)
        assert CachedResponse.objects.count() == 3

        again = backend.complete(queries, Sampling())
        assert standin.received == 3  # nothing went over HTTP
        assert [(r.key, r.text, r.logprobs) for r in again] == [(r.key, r.text, r.logprobs) for r in first]
        assert [(r.extra["cached"], r.attempts, r.prompt_tokens, r.completion_tokens) for r in again] == [
            (True, 0, 0, 0)
        ] * 3
        assert again[0].extra["cached_usage"] == [first[0].prompt_tokens, first[0].completion_tokens]
        assert sorted(CachedResponse.objects.values_list("hits", flat=True)) == [1, 1, 1]
        cached = CachedResponse.objects.get(request_hash__isnull=False, text=first[2].text)
        assert cached.model == f"{standin.base_url}|m" and cached.sampling["temperature"] == 0.0

        # Any difference in the request is another request: a token limit, another model.
        backend.complete(queries[:1], Sampling(max_tokens=8))
        assert standin.received == 4
        other = OpenAIBackend(
            base_url=standin.base_url, api_key=None, model="m2", response_store=DatabaseResponseStore()
        )
        other.complete(queries[:1], Sampling())
        assert standin.received == 5
    finally:
        standin.stop()


@pytest.mark.django_db
def test_sampled_requests_are_never_cached_unless_the_endpoint_asks_and_off_means_off():
    standin = StandIn(faults=False).start()
    try:
        queries = [_query(1), _judge_query(2)]
        sampled = Sampling(temperature=0.7)
        backend = _cached_backend(standin)
        for _ in range(2):
            replies = backend.complete(queries, sampled)
            assert not any(r.extra.get("cached") for r in replies)
        assert standin.received == 4 and CachedResponse.objects.count() == 0

        # A greedy request of an endpoint whose cache is off is asked every time too.
        off = _cached_backend(standin, response_cache="off")
        off.complete(queries, Sampling())
        off.complete(queries, Sampling())
        assert standin.received == 8 and CachedResponse.objects.count() == 0

        always = _cached_backend(standin, response_cache="always")
        always.complete(queries, sampled)
        replies = always.complete(queries, sampled)
        assert standin.received == 10 and all(r.extra["cached"] for r in replies)
    finally:
        standin.stop()


@pytest.mark.django_db
def test_an_unreadable_judge_reply_is_not_kept():
    from .openai_standin import four_judge_outcomes

    standin = StandIn(rule=four_judge_outcomes).start()
    try:
        backend = _cached_backend(standin, max_retries=0)
        queries = [_judge_query(i) for i in range(12)]
        replies = backend.complete(queries, Sampling())
        readable = []
        for r in replies:
            try:
                readable.append(r.error is None and isinstance(json.loads(r.text), dict))
            except ValueError:
                readable.append(False)
        assert 0 < sum(readable) < 12
        assert CachedResponse.objects.count() == sum(readable)
        received = standin.received
        backend.complete(queries, Sampling())
        assert standin.received == received + 12 - sum(readable)  # only the readable ones were served
    finally:
        standin.stop()


@pytest.mark.django_db(transaction=True)
def test_a_rerun_job_counts_the_answers_served_from_the_cache(eager, make_project, tmp_path):
    from inference import services

    standin = StandIn(faults=False).start()
    try:
        project = make_project("vt", "visualtrans")
        items = factories.visualtrans_items(project, 12, tmp_path)
        release = factories.release_of(project, items)
        endpoint = services.endpoint_create(
            name="cached-judge", backend="openai", model_id="standin-1", base_url=standin.base_url
        )
        first = services.job_create(endpoint=endpoint, project=project, release=release, params={"chunk_size": 5})
        first.refresh_from_db()
        asked = standin.received
        assert first.status == JobStatus.FINISHED and first.cached_answers == 0 and asked == first.total_queries

        second = services.job_create(endpoint=endpoint, project=project, release=release, params={"chunk_size": 5})
        second.refresh_from_db()
        assert second.status == JobStatus.FINISHED and standin.received == asked
        assert second.cached_answers == second.total_queries == first.total_queries
        assert InferenceJob.objects.get(pk=first.pk).cached_answers == 0
    finally:
        standin.stop()
