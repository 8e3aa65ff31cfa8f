"""VLLMBackend against a real vLLM engine on the CPU, with the tiny random Qwen2-VL.

Random weights answer noise, so these tests check structure, token accounting, constraint
validity and determinism, never what the answer means.
"""

from __future__ import annotations

import base64
import io
import json
import math

import jsonschema
import numpy as np
import pytest
from PIL import Image

from inference.backends.base import ModelQuery, Sampling

pytestmark = pytest.mark.vllm

GREEDY = Sampling(temperature=0.0, top_p=1.0, max_tokens=None, seed=0, logprobs=5)
LETTERS = ["A", "B", "C", "D"]


def image_url(seed: int, width: int, height: int, fmt: str = "PNG") -> str:
    pixels = np.random.default_rng(seed).integers(0, 255, (height, width, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format=fmt)
    return f"data:image/{fmt.lower()};base64," + base64.b64encode(buf.getvalue()).decode()


def two_image_query(key: str, seed: int, size: int = 56, **fields) -> ModelQuery:
    return ModelQuery(
        key=key,
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Image 1 is before the action."},
                    {"type": "image_url", "image_url": {"url": image_url(seed, size, size)}},
                    {"type": "text", "text": "Image 2 is after the action."},
                    {"type": "image_url", "image_url": {"url": image_url(seed + 1, size, size)}},
                    {"type": "text", "text": "Which option describes the change? Answer with the letter."},
                ],
            }
        ],
        **fields,
    )


def test_engine_starts_once_and_serves_the_next_chunk_from_a_new_instance(vllm_backend, tiny_model_dir, tiny_options):
    from inference.backends.vllm_backend import VLLMBackend, engine_stats

    first = vllm_backend.complete([two_image_query("c1|q1", seed=1, max_tokens=3)], GREEDY)
    starts = engine_stats()["starts"]
    engine = vllm_backend.llm

    # The registry may build a fresh backend object for the next chunk of the same endpoint.
    again = VLLMBackend(dict(tiny_options), str(tiny_model_dir), "")
    second = again.complete([two_image_query("c2|q1", seed=2, max_tokens=3)], GREEDY)

    assert engine_stats()["starts"] == starts
    assert again.llm is engine
    assert [r.error for r in first + second] == [None, None]
    assert [r.key for r in first + second] == ["c1|q1", "c2|q1"]


def test_batch_of_two_image_chats_counts_image_tokens_exactly(vllm_backend):
    # Qwen2-VL merges 28x28 pixels into one token: 56x56 gives 4 tokens, 112x112 gives 16.
    small = [two_image_query(f"s{i}", seed=10 * i, size=56, max_tokens=4) for i in range(3)]
    large = [two_image_query(f"l{i}", seed=10 * i + 5, size=112, max_tokens=4) for i in range(3)]

    replies = vllm_backend.complete(small + large, GREEDY)

    assert [r.key for r in replies] == [q.key for q in small + large]
    assert [r.error for r in replies] == [None] * 6
    assert len({r.prompt_tokens for r in replies[:3]}) == 1
    assert len({r.prompt_tokens for r in replies[3:]}) == 1
    assert replies[3].prompt_tokens - replies[0].prompt_tokens == 2 * (16 - 4)
    for reply in replies:
        assert 1 <= reply.completion_tokens <= 4
        assert reply.extra["finish_reason"] == "length" or reply.completion_tokens < 4
        assert reply.extra["batch_size"] == 6


def test_choice_constraint_returns_only_allowed_letters_with_their_logprobs(vllm_backend):
    queries = [two_image_query(f"q{i}", seed=100 + i, choices=LETTERS, max_tokens=4) for i in range(8)]

    replies = vllm_backend.complete(queries, GREEDY)

    for reply in replies:
        assert reply.error is None
        assert reply.text in LETTERS
        assert reply.completion_tokens == 2  # the letter (one token) and the forced end of turn
        assert reply.extra["finish_reason"] == "stop"
        assert set(reply.logprobs) == set(LETTERS)
        assert all(math.isfinite(v) and v <= 0.0 for v in reply.logprobs.values())
        # The constraint masks every other token, so the letters carry all the probability,
        # and greedy decoding picks the most likely of them.
        assert sum(math.exp(v) for v in reply.logprobs.values()) == pytest.approx(1.0, abs=1e-3)
        assert reply.text == max(reply.logprobs, key=reply.logprobs.get)


def test_ten_options_keep_all_letter_logprobs(vllm_backend):
    letters = list("ABCDEFGHIJ")  # ChangeIt's ten candidates; more than the default top-5
    (reply,) = vllm_backend.complete([two_image_query("ten", seed=7, choices=letters, max_tokens=2)], GREEDY)

    assert reply.text in letters
    assert set(reply.logprobs) == set(letters)


def test_json_schema_output_parses_and_validates(vllm_backend):
    schema = {
        "type": "object",
        "properties": {
            "state": {"enum": ["open", "closed", "full", "empty"]},
            "score": {"enum": [1, 2, 3, 4, 5]},
        },
        "required": ["state", "score"],
        "additionalProperties": False,
    }
    queries = [two_image_query(f"j{i}", seed=200 + i, json_schema=schema, max_tokens=40) for i in range(3)]

    replies = vllm_backend.complete(queries, GREEDY)

    for reply in replies:
        assert reply.error is None
        assert reply.extra["finish_reason"] == "stop"
        jsonschema.validate(json.loads(reply.text), schema)
        assert reply.logprobs is None


def test_video_given_as_frames_counts_frame_tokens(vllm_backend):
    def video_query(key: str, n_frames: int) -> ModelQuery:
        frames = [image_url(300 + i, 56, 56) for i in range(n_frames)]
        return ModelQuery(
            key=key,
            max_tokens=3,
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "video_frames", "video_frames": frames},
                        {"type": "text", "text": "Describe the change of state in the video."},
                    ],
                }
            ],
        )

    replies = vllm_backend.complete([video_query("v2", 2), video_query("v4", 4), video_query("v8", 8)], GREEDY)

    assert [r.error for r in replies] == [None, None, None]
    # Two frames make one temporal patch; each 56x56 patch group is 4 tokens.
    assert replies[1].prompt_tokens - replies[0].prompt_tokens == 4
    assert replies[2].prompt_tokens - replies[1].prompt_tokens == 8


def test_same_chunk_twice_gives_identical_replies(vllm_backend):
    queries = [
        two_image_query("d1", seed=400, max_tokens=6),
        two_image_query("d2", seed=401, choices=LETTERS),
        ModelQuery(key="d3", max_tokens=6, messages=[{"role": "user", "content": "How many objects changed state?"}]),
    ]

    first = vllm_backend.complete(queries, GREEDY)
    second = vllm_backend.complete(queries, GREEDY)

    def strip(replies):
        return [(r.key, r.text, r.logprobs, r.prompt_tokens, r.completion_tokens, r.error) for r in replies]

    assert strip(first) == strip(second)
    assert [r.error for r in first] == [None, None, None]


def test_a_broken_image_fails_only_its_query(vllm_backend):
    broken = two_image_query("broken", seed=500, choices=LETTERS)
    broken.messages[0]["content"][3] = {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAA="},
    }
    queries = [
        two_image_query("ok1", seed=501, choices=LETTERS),
        broken,
        two_image_query("ok2", seed=502, choices=LETTERS),
    ]

    replies = vllm_backend.complete(queries, GREEDY)

    assert [r.key for r in replies] == ["ok1", "broken", "ok2"]
    assert replies[1].error.startswith("image 2 could not be decoded")
    assert replies[1].text == ""
    assert [r.error for r in (replies[0], replies[2])] == [None, None]
    assert replies[0].text in LETTERS and replies[2].text in LETTERS


def test_a_prompt_too_long_for_the_engine_fails_only_its_query(vllm_backend):
    too_long = ModelQuery(key="long", messages=[{"role": "user", "content": "open closed " * 400}])
    queries = [two_image_query("fine", seed=600, choices=LETTERS), too_long]

    replies = vllm_backend.complete(queries, GREEDY)

    assert replies[0].error is None and replies[0].text in LETTERS
    assert "maximum context length is 512 tokens" in replies[1].error
    assert replies[1].text == ""


def test_an_engine_that_cannot_start_fails_the_chunk_queries_with_the_reason(
    vllm_backend, tiny_model_dir, tiny_options, tmp_path
):
    from inference.backends.vllm_backend import VLLMBackend, engine_stats

    vllm_backend.llm
    starts = engine_stats()["starts"]
    missing = VLLMBackend(dict(tiny_options), str(tmp_path / "no-such-model"), "")

    replies = missing.complete([two_image_query("x1", seed=1), two_image_query("x2", seed=2)], GREEDY)

    assert [r.key for r in replies] == ["x1", "x2"]
    assert all(r.error.startswith("the vLLM engine could not start: ") for r in replies)
    assert engine_stats()["starts"] == starts
    # The session's engine was shut down to make room; the next chunk of its endpoint reloads it.
    assert vllm_backend.complete([two_image_query("back", seed=3, choices=LETTERS)], GREEDY)[0].text in LETTERS
    assert engine_stats()["starts"] == starts + 1


def test_prefix_caching_is_on_and_a_later_chunk_reuses_a_shared_prefix(vllm_backend):
    engine_config = vllm_backend.llm.llm_engine.vllm_config.cache_config
    assert engine_config.enable_prefix_caching is True
    block = engine_config.block_size
    # A system prompt longer than one KV block, shared by two queries of two chunks (vLLM caches
    # whole blocks only: 128 tokens on the CPU).
    instructions = "Compare the two photographs of the object and name the change of its state. " * 6

    def query(key: str, question: str) -> ModelQuery:
        return ModelQuery(
            key=key,
            max_tokens=3,
            choices=LETTERS,
            messages=[
                {"role": "system", "content": instructions},
                {"role": "user", "content": f"{question}\nA. a\nB. b\nC. c\nD. d"},
            ],
        )

    (first,) = vllm_backend.complete([query("p1", "Which option is right for the cup?")], GREEDY)
    (second,) = vllm_backend.complete([query("p2", "Which option fits the door best?")], GREEDY)

    assert [first.error, second.error] == [None, None]
    assert block < first.prompt_tokens < 500, first.prompt_tokens  # the prefix spans at least one block
    # The second chunk found the shared instructions' full blocks in the cache; its own question not.
    cached = second.extra["cached_prompt_tokens"]
    assert cached >= block and cached % block == 0, (cached, block)
    assert cached < second.prompt_tokens
