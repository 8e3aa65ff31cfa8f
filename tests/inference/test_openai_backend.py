"""OpenAIBackend request shapes and reply handling against the stand-in (real HTTP)."""
from inference.backends import get_backend
from inference.backends.base import ModelQuery, Sampling
from inference.backends.openai_backend import OpenAIBackend
from inference.models import ModelEndpoint
from inference.protocols.oscbench import JUDGE_SCHEMA

from .openai_standin import StandIn


def _letters_query(i=0):
    return ModelQuery(key=f"{i}|osi_a", messages=[{"role": "user", "content": f"Pick one {i}.\nA. x\nB. y\nC. z"}], choices=["A", "B", "C"], max_tokens=4)


def test_request_shapes_for_letters_judges_and_structured_choice():
    backend = OpenAIBackend(base_url="http://127.0.0.1:1/v1", api_key="k", model="m", options={"structured_choice": True})
    letters = backend.request_kwargs(_letters_query(), Sampling(temperature=0.0, seed=3, logprobs=5))
    assert letters == {
        "model": "m", "messages": _letters_query().messages, "temperature": 0.0, "top_p": 1.0, "max_tokens": 4, "seed": 3,
        "logprobs": True, "top_logprobs": 5, "structured_outputs": {"choice": ["A", "B", "C"]},
    }
    judge = backend.request_kwargs(ModelQuery(key="1|judge", messages=[], json_schema=JUDGE_SCHEMA, max_tokens=800), Sampling())
    assert judge["response_format"] == {"type": "json_schema", "json_schema": {"name": "answer", "schema": JUDGE_SCHEMA, "strict": True}}
    assert "logprobs" not in judge
    plain = OpenAIBackend(base_url=None, api_key="k", model="m", options={"json_schema": False, "logprobs": False})
    assert "response_format" not in plain.request_kwargs(ModelQuery(key="1|judge", messages=[], json_schema=JUDGE_SCHEMA), Sampling())
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
    backend = OpenAIBackend(base_url="http://127.0.0.1:9/v1", api_key=None, model="m", options={"max_retries": 0, "timeout": 2})
    (reply,) = backend.complete([_letters_query()], Sampling())
    assert reply.text == "" and reply.error.startswith("connection failed")


def test_registry_reads_the_key_from_the_environment_and_never_shows_it(monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-do-not-show")
    endpoint = ModelEndpoint(name="e", backend="openai", model_id="m", base_url="http://x/v1", api_key_env="MY_KEY", concurrency=3)
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
        backend = OpenAIBackend(base_url=standin.base_url, api_key=None, model="m", options={"timeout": 0.3, "max_retries": 0})
        (reply,) = backend.complete([_letters_query()], Sampling())
        assert reply.error == "timed out after 0.3 s (after up to 1 attempts)" and reply.text == ""
    finally:
        standin.stop()
