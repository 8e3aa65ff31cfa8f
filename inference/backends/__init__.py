"""Backend registry: endpoint row -> a ModelBackend.

vLLM is an optional extra (`pip install .[gpu]`): it is imported lazily, and without it
`get_backend` / `check_available` raise BackendUnavailable, so a job refuses to start with a
clear message. The vLLM engine itself is kept per worker process by vllm_backend (loaded on the
first chunk, reused by the next chunk of the same endpoint, replaced for another endpoint), so a
VLLMBackend instance is cheap and its close() leaves the engine loaded.
"""

from __future__ import annotations

import importlib.util

from .base import BackendUnavailable, ModelBackend
from .keys import endpoint_api_key

VLLM_MISSING = (
    "vLLM is not installed in this environment: the 'vllm' backend needs the gpu extra "
    "(pip install .[gpu]) on a gpu worker"
)


def check_available(endpoint) -> None:
    """Raise BackendUnavailable when this endpoint's backend cannot run here."""
    if endpoint.backend == "vllm":
        if importlib.util.find_spec("vllm") is None:
            raise BackendUnavailable(VLLM_MISSING)
    elif endpoint.backend == "openai":
        endpoint_api_key(endpoint)  # an allowed variable that is set (keys.py), or none
        if not endpoint.model_id:
            raise BackendUnavailable(f"endpoint {endpoint.name} names no model")
    elif endpoint.backend != "random":
        raise BackendUnavailable(f"unknown backend {endpoint.backend!r}")


def get_backend(endpoint) -> ModelBackend:
    check_available(endpoint)
    if endpoint.backend == "random":
        from .random_backend import RandomBackend

        return RandomBackend(seed=int(endpoint.options.get("seed", 0)))
    if endpoint.backend == "openai":
        from .openai_backend import OpenAIBackend
        from .response_cache import DatabaseResponseStore

        return OpenAIBackend(
            base_url=endpoint.base_url or None,
            api_key=endpoint_api_key(endpoint),
            model=endpoint.model_id,
            concurrency=endpoint.concurrency,
            options=endpoint.options,
            # One in-flight bound per endpoint, shared by every chunk, worker process and host
            # through the broker's Redis; without REDIS_URL (the eager demo) per call only.
            limiter_key=f"endpoint:{endpoint.pk}:{endpoint.name}",
            redis_url=_redis_url(),
            # Deterministic judges' answers are kept and served again (response_cache.py).
            response_store=DatabaseResponseStore(),
        )
    return _vllm_backend(endpoint)


def _redis_url() -> str | None:
    from django.conf import settings

    return getattr(settings, "REDIS_URL", "") or None


def _vllm_backend(endpoint) -> ModelBackend:
    try:
        from .vllm_backend import VLLMBackend
    except ImportError as exc:
        raise BackendUnavailable(f"{VLLM_MISSING} ({exc})") from None
    return VLLMBackend(dict(endpoint.options), endpoint.model_id, endpoint.revision)
