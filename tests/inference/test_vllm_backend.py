"""The vLLM backend's parts that need no engine: availability, engine settings, message and
log-prob conversion. The real engine is tested in tests/vllm (the separate vLLM-on-CPU tier)."""

from __future__ import annotations

import base64
import io
import math
import sys
from types import SimpleNamespace

import pytest
from PIL import Image

from inference.backends import vllm_backend
from inference.backends.base import BackendUnavailable
from inference.backends.vllm_backend import (
    INSTALL_HINT,
    QueryInputError,
    VLLMBackend,
    engine_kwargs,
    first_token_logprobs,
    to_vllm_messages,
)


def png_url(size=(30, 20), color=(200, 10, 10), mode="RGB") -> str:
    buf = io.BytesIO()
    Image.new(mode, size, color if mode == "RGB" else color[0]).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def test_backend_refuses_to_exist_without_vllm_and_names_the_extra(monkeypatch):
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: False)

    with pytest.raises(BackendUnavailable) as refused:
        VLLMBackend({}, "Qwen/Qwen2-VL-2B-Instruct", "main")

    assert str(refused.value) == "vLLM is not installed: pip install .[gpu]" == INSTALL_HINT


def test_engine_is_not_built_when_vllm_cannot_be_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` now fails as if absent
    starts = vllm_backend.engine_stats()["starts"]

    with pytest.raises(BackendUnavailable) as refused:
        vllm_backend.get_engine("Qwen/Qwen2-VL-2B-Instruct", "", {})

    assert str(refused.value) == INSTALL_HINT
    assert vllm_backend.engine_stats() == {"starts": starts, "loaded": False, "start_seconds": None}


def test_engine_settings_come_from_endpoint_options_with_strings_coerced():
    options = {
        "tensor_parallel_size": "2",
        "max_model_len": 8192,
        "dtype": "bfloat16",
        "limit_mm_per_prompt": '{"image": 16, "video": 0}',
        "mm_processor_kwargs": {"max_pixels": 401408},
        "kv_cache_memory_bytes": "1073741824",
        "enforce_eager": "false",
        "gpu_memory_utilization": "0.85",
        "price_per_1m_input": 0.5,  # another backend's setting: not an engine argument
        "engine_args": {"max_num_seqs": 64},
    }

    kwargs = engine_kwargs("Qwen/Qwen2-VL-7B-Instruct", "a1b2c3", options)

    assert kwargs == {
        "model": "Qwen/Qwen2-VL-7B-Instruct",
        "revision": "a1b2c3",
        "tokenizer_revision": "a1b2c3",
        "generation_config": "vllm",
        "seed": 0,
        "media_io_kwargs": {"video": {"num_frames": -1}},
        "enable_prefix_caching": True,
        "tensor_parallel_size": 2,
        "max_model_len": 8192,
        "dtype": "bfloat16",
        "limit_mm_per_prompt": {"image": 16, "video": 0},
        "mm_processor_kwargs": {"max_pixels": 401408},
        "kv_cache_memory_bytes": 1073741824,
        "enforce_eager": False,
        "gpu_memory_utilization": 0.85,
        "max_num_seqs": 64,
    }


def test_prefix_caching_is_on_unless_the_endpoint_turns_it_off():
    assert engine_kwargs("m", "", {})["enable_prefix_caching"] is True
    assert engine_kwargs("m", "", {"enable_prefix_caching": "false"})["enable_prefix_caching"] is False
    assert engine_kwargs("m", "", {"enable_prefix_caching": False})["enable_prefix_caching"] is False
    # Another setting is another engine: an endpoint that turns it off does not reuse this one.
    assert vllm_backend.engine_key("m", "", {}) != vllm_backend.engine_key("m", "", {"enable_prefix_caching": 0})


def test_a_local_model_folder_takes_no_revision_and_a_model_is_required(tmp_path):
    assert "revision" not in engine_kwargs(str(tmp_path), "main", {})
    with pytest.raises(ValueError):
        engine_kwargs("", "", {})


def test_invalid_endpoint_settings_refuse_the_backend_with_a_readable_reason(monkeypatch):
    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: True)

    with pytest.raises(BackendUnavailable) as refused:
        VLLMBackend({"max_model_len": "lots"}, "Qwen/Qwen2-VL-2B-Instruct", "")

    assert (
        str(refused.value) == "the vllm endpoint's settings are invalid: invalid literal for int() with base 10: 'lots'"
    )


def test_images_are_decoded_here_so_a_broken_one_is_reported_with_its_position():
    good = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Before:"},
                {"type": "image_url", "image_url": {"url": png_url((30, 20))}},
                {"type": "image_url", "image_url": {"url": png_url((8, 8), mode="L")}},
            ],
        }
    ]
    broken = [
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": png_url()}},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgoAAAA="}},
            ],
        }
    ]

    converted = to_vllm_messages(good)

    parts = converted[0]["content"]
    assert parts[0] == {"type": "text", "text": "Before:"}
    assert [p["type"] for p in parts[1:]] == ["image_pil", "image_pil"]
    assert [(p["image_pil"].size, p["image_pil"].mode) for p in parts[1:]] == [((30, 20), "RGB"), ((8, 8), "RGB")]
    with pytest.raises(QueryInputError, match=r"^image 2 could not be decoded"):
        to_vllm_messages(broken)


def test_video_frames_become_one_jpeg_frame_video_for_vllm():
    frames = [png_url((56, 56), (i * 40, 0, 0)) for i in range(3)]

    parts = to_vllm_messages([{"role": "user", "content": [{"type": "video_frames", "video_frames": frames}]}])[0][
        "content"
    ]

    assert parts[0]["type"] == "video_url"
    url = parts[0]["video_url"]["url"]
    assert url.startswith("data:video/jpeg;base64,")
    encoded = url.split(",", 1)[1].split(",")
    assert len(encoded) == 3
    assert [Image.open(io.BytesIO(base64.b64decode(e))).size for e in encoded] == [(56, 56)] * 3


def test_option_letter_logprobs_merge_spellings_and_drop_masked_tokens():
    position = {
        1: SimpleNamespace(logprob=math.log(0.5), decoded_token="A"),
        2: SimpleNamespace(logprob=math.log(0.2), decoded_token=" A"),
        3: SimpleNamespace(logprob=math.log(0.3), decoded_token="B"),
        4: SimpleNamespace(logprob=float("-inf"), decoded_token="C"),
        5: SimpleNamespace(logprob=math.log(0.01), decoded_token="x"),
    }

    letters = first_token_logprobs(position, ["A", "B", "C"])
    free = first_token_logprobs(position, None)

    assert letters.keys() == {"A", "B"}
    assert letters["A"] == pytest.approx(math.log(0.7))
    assert letters["B"] == pytest.approx(math.log(0.3))
    assert free.keys() == {"A", " A", "B", "x"}
    assert first_token_logprobs(None, ["A"]) is None


def test_no_first_token_logprobs_when_a_choice_is_longer_than_one_token():
    position = {
        1: SimpleNamespace(logprob=math.log(0.6), decoded_token="1"),  # the first token of "1" and of "10"
        2: SimpleNamespace(logprob=math.log(0.4), decoded_token="2"),
    }
    assert first_token_logprobs(position, [str(i) for i in range(1, 11)]) is None  # ChangeIt: "1".."10"
    assert first_token_logprobs(position, ["A", "B", "A,B"]) is None  # M3-Verse answer sets
    assert first_token_logprobs(position, [str(i) for i in range(1, 10)]).keys() == {"1", "2"}


def test_a_job_max_tokens_never_cuts_below_the_judge_minimum(monkeypatch):
    from inference.backends.base import ModelQuery, Sampling

    monkeypatch.setattr(vllm_backend, "vllm_available", lambda: True)
    fake = SimpleNamespace(SamplingParams=lambda **kw: kw)
    monkeypatch.setattr(vllm_backend, "_import_vllm", lambda: (fake, lambda **kw: kw))
    backend = VLLMBackend({}, "Qwen/Qwen2-VL-2B-Instruct", "")
    judge = ModelQuery(key="1|judge", messages=[], json_schema={"type": "object"}, max_tokens=800)
    letters = ModelQuery(key="1|qa", messages=[], choices=["A", "B"], max_tokens=4)
    assert backend.sampling_params(judge, Sampling(max_tokens=64))["max_tokens"] == 800
    assert backend.sampling_params(judge, Sampling(max_tokens=2000))["max_tokens"] == 2000
    assert backend.sampling_params(letters, Sampling(max_tokens=64))["max_tokens"] == 64
    assert backend.sampling_params(letters, Sampling())["max_tokens"] == 4
