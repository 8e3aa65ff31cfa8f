"""OpenAIBackend request shapes and reply handling against the stand-in (real HTTP)."""

import pytest

from inference.backends import get_backend
from inference.backends.base import ModelQuery, Sampling
from inference.backends.openai_backend import OpenAIBackend
from inference.models import ModelEndpoint
from protocols.oscbench.prompts import JUDGE_SCHEMA

from .openai_standin import StandIn


def _letters_query(i=0):
    return ModelQuery(
        key=f"{i}|osi_a",
        messages=[{"role": "user", "content": f"Pick one {i}.\nA. x\nB. y\nC. z"}],
        choices=["A", "B", "C"],
        max_tokens=4,
    )


def test_request_shapes_for_letters_judges_and_structured_choice():
    backend = OpenAIBackend(
        base_url="http://127.0.0.1:1/v1", api_key="k", model="m", options={"structured_choice": True}
    )
    letters = backend.request_kwargs(_letters_query(), Sampling(temperature=0.0, seed=3, logprobs=5))
    assert letters == {
        "model": "m",
        "messages": _letters_query().messages,
        "temperature": 0.0,
        "top_p": 1.0,
        "max_tokens": 4,
        "seed": 3,
        "logprobs": True,
        "top_logprobs": 5,
        "structured_outputs": {"choice": ["A", "B", "C"]},
    }
    judge = backend.request_kwargs(
        ModelQuery(key="1|judge", messages=[], json_schema=JUDGE_SCHEMA, max_tokens=800), Sampling()
    )
    assert judge["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": JUDGE_SCHEMA, "strict": True},
    }
    assert "logprobs" not in judge
    plain = OpenAIBackend(base_url=None, api_key="k", model="m", options={"json_schema": False, "logprobs": False})
    assert "response_format" not in plain.request_kwargs(
        ModelQuery(key="1|judge", messages=[], json_schema=JUDGE_SCHEMA), Sampling()
    )
    assert "logprobs" not in plain.request_kwargs(_letters_query(), Sampling())


def test_replies_carry_letter_logprobs_usage_and_keep_order():
    standin = StandIn(faults=False, latency=0.01).start()
    try:
        backend = OpenAIBackend(base_url=standin.base_url, api_key=None, model="m", concurrency=4)
        queries = [_letters_query(i) for i in range(10)]
        replies = backend.complete(queries, Sampling(logprobs=2))
        assert [r.key for r in replies] == [q.key for q in queries]
        for r in replies:
            assert r.error is None and r.text in ("A", "B", "C") and r.attempts == 1
            assert len(r.logprobs) == 2 and max(r.logprobs, key=r.logprobs.get) == r.text
            assert r.prompt_tokens > 0 and r.completion_tokens == 1
    finally:
        standin.stop()


def test_connection_refused_is_a_failed_reply_not_an_exception():
    backend = OpenAIBackend(
        base_url="http://127.0.0.1:9/v1", api_key=None, model="m", options={"max_retries": 0, "timeout": 2}
    )
    (reply,) = backend.complete([_letters_query()], Sampling())
    assert reply.text == "" and reply.error.startswith("connection failed")


def test_registry_reads_the_key_from_the_environment_and_never_shows_it(monkeypatch):
    monkeypatch.setenv("STATELAB_KEY_MINE", "sk-do-not-show")
    endpoint = ModelEndpoint(
        name="e", backend="openai", model_id="m", base_url="http://x/v1", api_key_env="STATELAB_KEY_MINE", concurrency=3
    )
    backend = get_backend(endpoint)
    assert isinstance(backend, OpenAIBackend) and backend.concurrency == 3
    assert "sk-do-not-show" not in repr(backend) and "sk-do-not-show" not in str(vars(backend).get("options"))


def test_complete_works_when_an_event_loop_already_runs_in_this_thread():
    import asyncio
    import concurrent.futures

    standin = StandIn(faults=False).start()
    try:
        backend = OpenAIBackend(base_url=standin.base_url, api_key=None, model="m", concurrency=2)

        async def inside_a_loop():
            return backend.complete([_letters_query(1), _letters_query(2)], Sampling())

        # In a thread of its own, so this test does not depend on what else runs in the main thread.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            replies = pool.submit(lambda: asyncio.run(inside_a_loop())).result()
        assert [r.error for r in replies] == [None, None] and [r.key for r in replies] == ["1|osi_a", "2|osi_a"]
    finally:
        standin.stop()


def test_a_slow_server_is_reported_as_a_timeout():
    standin = StandIn(faults=False, latency=1.5).start()
    try:
        backend = OpenAIBackend(
            base_url=standin.base_url, api_key=None, model="m", options={"timeout": 0.3, "max_retries": 0}
        )
        (reply,) = backend.complete([_letters_query()], Sampling())
        assert reply.error == "timed out after 0.3 s (after 1 attempt)" and reply.text == ""
    finally:
        standin.stop()


def _redis_url():
    from django.conf import settings

    if not getattr(settings, "REDIS_URL", ""):
        pytest.skip("needs REDIS_URL (the shared in-flight bound lives in Redis)")
    return settings.REDIS_URL


def _two_chunks_at_once(standin, *, redis_url, concurrency=3, per_chunk=18):
    """Two chunk tasks of one endpoint, each with its own backend call and event loop (as two
    worker processes would have), started together."""
    import threading
    import uuid

    key = f"test-endpoint-{uuid.uuid4().hex}"
    results, barrier = {}, threading.Barrier(2)

    def chunk(n):
        backend = OpenAIBackend(
            base_url=standin.base_url,
            api_key=None,
            model="m",
            concurrency=concurrency,
            limiter_key=key,
            redis_url=redis_url,
        )
        barrier.wait()
        results[n] = backend.complete([_letters_query(100 * n + i) for i in range(per_chunk)], Sampling())

    threads = [threading.Thread(target=chunk, args=(n,)) for n in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(r.error is None for n in (1, 2) for r in results[n])
    return key


def test_two_chunks_of_one_endpoint_never_exceed_its_concurrency_together():
    redis_url = _redis_url()
    standin = StandIn(faults=False, latency=0.05).start()
    try:
        key = _two_chunks_at_once(standin, redis_url=redis_url)
        assert standin.max_in_flight == 3  # the bound is reached and never passed
        from inference.backends.limiter import in_flight

        assert in_flight(redis_url, key) == 0  # every slot was given back
        # Without the shared bound each chunk keeps its own 3 in flight: 6 at once.
        standin.reset_in_flight()
        _two_chunks_at_once(standin, redis_url=None)
        assert standin.max_in_flight > 3
    finally:
        standin.stop()


def test_slots_of_a_killed_worker_lapse_after_their_ttl():
    import asyncio
    import time
    import uuid

    from inference.backends.limiter import EndpointLimiter, in_flight

    redis_url = _redis_url()
    key = f"test-lapse-{uuid.uuid4().hex}"

    # A short ttl (3 s, production's is 30 s) keeps the test short; a stall of the test process of
    # up to about 2.5 s between the two "workers" still leaves a wait to measure.
    async def dies_holding_the_slot():
        limiter = EndpointLimiter(key, 1, redis_url, ttl=3.0)
        slot = limiter.slot()
        await slot.__aenter__()  # acquired, never released: the process is "killed" here
        limiter._heartbeat.cancel()  # and stops refreshing
        await limiter._redis.aclose()

    async def next_worker():
        limiter = EndpointLimiter(key, 1, redis_url, ttl=3.0)
        started = time.monotonic()
        async with limiter.slot():
            waited = time.monotonic() - started
            assert in_flight(redis_url, key) == 1
        await limiter.close()
        return waited

    from concurrent.futures import ThreadPoolExecutor

    # Each "worker" runs its own event loop in a thread of its own (the main thread may already
    # run one: Playwright's, when browser tests ran earlier in the session).
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, dies_holding_the_slot()).result()
        assert in_flight(redis_url, key) == 1
        waited = pool.submit(asyncio.run, next_worker()).result()
    assert 0.5 <= waited < 8  # it waited for the dead holder's slot to lapse, then got it
    assert in_flight(redis_url, key) == 0


def test_a_held_slot_is_kept_alive_past_its_ttl_while_its_request_runs():
    standin = StandIn(faults=False, latency=6.0).start()
    try:
        import uuid

        from inference.backends.limiter import in_flight

        redis_url = _redis_url()
        key = f"test-alive-{uuid.uuid4().hex}"
        backend = OpenAIBackend(
            base_url=standin.base_url,
            api_key=None,
            model="m",
            concurrency=1,
            limiter_key=key,
            redis_url=redis_url,
            options={"slot_ttl": 3.0, "timeout": 20},
        )
        import threading

        seen = []
        thread = threading.Thread(target=lambda: seen.extend(backend.complete([_letters_query(1)], Sampling())))
        thread.start()
        import time

        time.sleep(4.5)  # past the ttl (refreshed every second): only the heartbeat keeps the slot taken
        assert in_flight(redis_url, key) == 1
        thread.join(30)
        assert seen[0].error is None and in_flight(redis_url, key) == 0
    finally:
        standin.stop()


def test_the_registry_shares_the_bound_through_the_brokers_redis(settings, monkeypatch):
    settings.REDIS_URL = "redis://127.0.0.1:6379/15"
    endpoint = ModelEndpoint(pk=7, name="judge", backend="openai", model_id="m", base_url="http://x/v1", concurrency=5)
    backend = get_backend(endpoint)
    assert (backend.limiter_key, backend.redis_url, backend.concurrency) == ("endpoint:7:judge", settings.REDIS_URL, 5)
    settings.REDIS_URL = ""
    assert get_backend(endpoint).redis_url is None  # the eager demo: the local bound only


def test_a_refused_request_is_not_counted_as_retried():
    standin = StandIn(faults=False).start()
    try:
        backend = OpenAIBackend(
            base_url=standin.base_url.replace("/v1", "/nowhere"), api_key=None, model="m", options={"max_retries": 3}
        )
        (reply,) = backend.complete([_letters_query()], Sampling())
        assert reply.error == "HTTP 404: not found (after 1 attempt)" and reply.attempts == 1
        assert len(standin.log) == 0 and len(standin.events) == 0  # 404s are answered before the query is seen
    finally:
        standin.stop()


def _numbers_query(n, i=0):
    ask = (
        f"Which label {i}?\n"
        + "\n".join(f"{k + 1}. label {k}" for k in range(n))
        + f"\nAnswer with the number (1 to {n})."
    )
    return ModelQuery(
        key=f"{i}|state:standard:full",
        messages=[{"role": "user", "content": ask}],
        choices=[str(k + 1) for k in range(n)],
        max_tokens=4,
    )


def test_no_first_token_logprobs_for_changeit_numbers_1_to_10():
    """Tokenizers split "10" into "1" + "0": the first token's log-prob would be credited to "1"."""
    backend = OpenAIBackend(base_url=None, api_key="k", model="m")
    assert "logprobs" not in backend.request_kwargs(_numbers_query(10), Sampling(logprobs=5))
    assert backend.request_kwargs(_numbers_query(9), Sampling(logprobs=5))["top_logprobs"] == 5
    standin = StandIn(faults=False).start()
    try:
        backend = OpenAIBackend(base_url=standin.base_url, api_key=None, model="m")
        ten, nine = backend.complete([_numbers_query(10, 1), _numbers_query(9, 2)], Sampling(logprobs=5))
        assert ten.error is None and ten.text in {str(k) for k in range(1, 11)} and ten.logprobs is None
        assert nine.error is None and max(nine.logprobs, key=nine.logprobs.get) == nine.text
    finally:
        standin.stop()


def test_a_job_max_tokens_never_cuts_below_the_judge_minimum():
    backend = OpenAIBackend(base_url=None, api_key="k", model="m")
    judge = ModelQuery(key="1|judge", messages=[], json_schema=JUDGE_SCHEMA, max_tokens=800)
    assert backend.request_kwargs(judge, Sampling(max_tokens=64))["max_tokens"] == 800
    assert backend.request_kwargs(judge, Sampling(max_tokens=4000))["max_tokens"] == 4000
    assert backend.request_kwargs(_letters_query(), Sampling(max_tokens=64))["max_tokens"] == 64
    assert backend.request_kwargs(_letters_query(), Sampling())["max_tokens"] == 4


def test_an_unreachable_redis_leaves_the_local_bound_and_the_queries_answered(caplog):
    standin = StandIn(faults=False, latency=0.02).start()
    try:
        backend = OpenAIBackend(
            base_url=standin.base_url, api_key=None, model="m", concurrency=2, redis_url="redis://127.0.0.1:9/0"
        )
        replies = backend.complete([_letters_query(i) for i in range(6)], Sampling())
        assert [r.error for r in replies] == [None] * 6
        assert standin.max_in_flight <= 2
        assert "Redis failed" in caplog.text and "bounding by this process only" in caplog.text
    finally:
        standin.stop()


def test_first_token_logprobs_sum_the_tokens_of_one_letter_once_each():
    import math

    from inference.backends.openai_backend import _first_token_logprobs

    first = {
        "token": "A",
        "logprob": math.log(0.5),
        "top_logprobs": [
            {"token": "A", "logprob": math.log(0.5)},
            {"token": " A", "logprob": math.log(0.2)},
            {"token": "B", "logprob": math.log(0.1)},
            {"token": "maybe", "logprob": math.log(0.1)},
        ],
    }
    out = _first_token_logprobs({"content": [first]}, ["A", "B"])
    assert set(out) == {"A", "B"}
    assert math.isclose(math.exp(out["A"]), 0.7) and math.isclose(math.exp(out["B"]), 0.1)
    # The chosen token alone (no alternatives asked for) still gives its letter.
    assert _first_token_logprobs({"content": [{"token": " B", "logprob": -0.5}]}, ["A", "B"]) == {"B": -0.5}
    assert _first_token_logprobs({"content": [first]}, ["10", "2"]) is None  # multi-token choices: none


def test_request_options_for_reasoning_models_and_server_extras():
    query = _numbers_query(4)
    plain = OpenAIBackend(base_url=None, api_key="k", model="m").request_kwargs(query, Sampling())
    assert plain["max_tokens"] == 4 and "temperature" in plain and "max_completion_tokens" not in plain
    reasoning = OpenAIBackend(
        base_url=None,
        api_key="k",
        model="o-model",
        options={
            "max_tokens_param": "max_completion_tokens",
            "sampling_params": False,
            "extra_body": {"reasoning_effort": "low", "model": "not-this", "messages": []},
        },
    )
    body = reasoning.request_kwargs(query, Sampling())
    assert body["max_completion_tokens"] == 4 and "max_tokens" not in body
    assert "temperature" not in body and "top_p" not in body
    assert body["reasoning_effort"] == "low"
    assert body["model"] == "o-model" and body["messages"] == query.messages
