"""The vLLM backend: the offline engine (`vllm.LLM`) inside a gpu-queue Celery worker.

One engine per worker process, built on the first chunk (never at import, so never before the
worker forks: the gpu worker runs with --pool solo, concurrency 1) and kept in this module for
the next chunk of the same endpoint. A chunk of queries goes to the engine as one `LLM.chat`
call (one `generate` over the whole chunk), one SamplingParams per conversation, so vLLM batches
the whole chunk. Prefix caching is on (`enable_prefix_caching`; the option turns it off): the
queries of a chunk share their protocol's instructions, and an item's several queries its images,
so the KV blocks of a shared prefix are computed once per engine and reused, across chunks too.
bench/bench_vllm_gpu.py measures the batched call against one request at a time. Option letters are
constrained with structured outputs (choice), judge replies with a JSON schema; the first
token's log-probabilities of the option letters come back in `ModelReply.logprobs`.

A query that cannot run (an image that does not decode, a prompt longer than the model allows)
gets `ModelReply.error`; the rest of the chunk still runs. Plain Python, no Django.

Endpoint options used here (strings are accepted too, as `create_endpoint --option` gives them):
  tensor_parallel_size, max_model_len, dtype, limit_mm_per_prompt ({"image": 8, "video": 1}),
  mm_processor_kwargs ({"max_pixels": 401408}), generation_config ("vllm" by default: ignore the
  checkpoint's sampling defaults, so the job's own sampling parameters are what runs),
  kv_cache_memory_bytes, gpu_memory_utilization, enforce_eager, enable_prefix_caching (on by
  default), max_num_seqs,
  max_num_batched_tokens, max_logprobs, seed, structured_outputs_config, engine_args (a dict
  passed to `vllm.LLM` as is). Other keys (prices, timeouts of other backends) are ignored.
"""

from __future__ import annotations

import base64
import binascii
import gc
import importlib.util
import io
import json
import logging
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import BackendUnavailable, ModelQuery, ModelReply, Sampling, max_tokens_for, single_token_choices

logger = logging.getLogger(__name__)

INSTALL_HINT = "vLLM is not installed: pip install .[gpu]"

INT_OPTIONS = (
    "tensor_parallel_size",
    "max_model_len",
    "kv_cache_memory_bytes",
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_logprobs",
    "seed",
)
FLOAT_OPTIONS = ("gpu_memory_utilization",)
BOOL_OPTIONS = ("enforce_eager", "trust_remote_code", "enable_prefix_caching")
DICT_OPTIONS = ("limit_mm_per_prompt", "mm_processor_kwargs", "media_io_kwargs", "structured_outputs_config")
STR_OPTIONS = ("dtype", "generation_config", "distributed_executor_backend", "tokenizer", "quantization")
# vLLM keeps only the first 32 frames of a frame-list video unless told otherwise; the protocol
# has already chosen the frames, so all of them are used.
# Prefix caching is asked for explicitly: a protocol's queries share their instructions and an
# item's queries their images, and not every vLLM version or platform turns it on by default.
ENGINE_DEFAULTS: dict[str, Any] = {
    "generation_config": "vllm",
    "seed": 0,
    "media_io_kwargs": {"video": {"num_frames": -1}},
    "enable_prefix_caching": True,
}


def vllm_available() -> bool:
    """Whether `vllm` can be found, without importing it (cheap; safe in the web process)."""
    return importlib.util.find_spec("vllm") is not None


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def engine_kwargs(model_id: str, revision: str, options: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments for `vllm.LLM`, from an endpoint's model, revision and options."""
    if not model_id:
        raise ValueError("a vllm endpoint needs a model id (a hub id or a local folder)")
    kwargs: dict[str, Any] = {"model": model_id, **ENGINE_DEFAULTS}
    # A revision names a hub commit; a local folder has none.
    if revision and not Path(model_id).is_dir():
        kwargs["revision"] = revision
    for key in INT_OPTIONS:
        if options.get(key) not in (None, ""):
            kwargs[key] = int(options[key])
    for key in FLOAT_OPTIONS:
        if options.get(key) not in (None, ""):
            kwargs[key] = float(options[key])
    for key in BOOL_OPTIONS:
        if key in options:
            kwargs[key] = _as_bool(options[key])
    for key in DICT_OPTIONS:
        if options.get(key) not in (None, ""):
            value = options[key]
            kwargs[key] = json.loads(value) if isinstance(value, str) else dict(value)
    for key in STR_OPTIONS:
        if options.get(key) not in (None, ""):
            kwargs[key] = str(options[key])
    if "revision" in kwargs and "tokenizer" not in kwargs:
        kwargs["tokenizer_revision"] = kwargs["revision"]  # the tokenizer comes from the same commit
    extra = options.get("engine_args") or {}
    kwargs.update(json.loads(extra) if isinstance(extra, str) else extra)
    return kwargs


def engine_key(model_id: str, revision: str, options: dict[str, Any]) -> str:
    return json.dumps(engine_kwargs(model_id, revision, options), sort_keys=True, default=str)


@dataclass
class _CachedEngine:
    key: str
    llm: Any
    pid: int
    start_seconds: float


# The engine of this worker process. One at a time: a GPU holds one model, so switching endpoints
# shuts the previous engine down before the next one loads.
_engine: _CachedEngine | None = None
_engine_lock = threading.RLock()
_engine_starts = 0


def engine_stats() -> dict[str, Any]:
    """How many engines this process has started, and the current one's start time."""
    return {
        "starts": _engine_starts,
        "loaded": _engine is not None,
        "start_seconds": _engine.start_seconds if _engine else None,
    }


def _import_vllm():
    try:
        import vllm
        from vllm.sampling_params import StructuredOutputsParams
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "vllm":
            raise BackendUnavailable(INSTALL_HINT) from exc
        raise BackendUnavailable(f"vLLM is installed but cannot be imported: {exc}") from exc
    except (ImportError, OSError, RuntimeError) as exc:
        raise BackendUnavailable(f"vLLM is installed but cannot be imported: {exc}") from exc
    return vllm, StructuredOutputsParams


def get_engine(model_id: str, revision: str, options: dict[str, Any]) -> Any:
    """The process's `vllm.LLM` for these settings, built on first use and kept afterwards."""
    global _engine, _engine_starts
    key = engine_key(model_id, revision, options)
    with _engine_lock:
        if _engine is not None and _engine.pid != os.getpid():
            # Inherited through a fork: the engine's threads, sockets and device state belong to
            # the parent. Forget it (without shutting down the parent's) and build our own.
            logger.warning("vLLM engine inherited from process %s; building a new one", _engine.pid)
            _engine = None
        if _engine is not None and _engine.key == key:
            return _engine.llm
        vllm, _ = _import_vllm()
        if _engine is not None:
            shutdown_engine()
        kwargs = engine_kwargs(model_id, revision, options)
        started = time.perf_counter()
        llm = vllm.LLM(**kwargs)
        _engine = _CachedEngine(key=key, llm=llm, pid=os.getpid(), start_seconds=time.perf_counter() - started)
        _engine_starts += 1
        logger.info("vLLM engine for %s started in %.1f s", model_id, _engine.start_seconds)
        return llm


def shutdown_engine() -> None:
    """Shut the process's engine down and free its memory (tests, worker shutdown, model switch)."""
    global _engine
    with _engine_lock:
        if _engine is None:
            return
        llm, _engine = _engine.llm, None
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            try:
                core.shutdown()
            except Exception:  # already down; freeing memory below is what matters
                logger.exception("vLLM engine shutdown failed")
        del llm, core
        gc.collect()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass


# ---- turning OpenAI-format messages into vLLM chat messages --------------------------------


class QueryInputError(ValueError):
    """A query's own input is unusable (e.g. an image that does not decode)."""


def _open_image(source: Any, what: str):
    from PIL import Image

    if isinstance(source, Image.Image):
        image = source
    else:
        try:
            if isinstance(source, (bytes, bytearray)):
                data = bytes(source)
            elif isinstance(source, str) and source.startswith("data:"):
                header, _, payload = source.partition(",")
                if ";base64" not in header:
                    raise QueryInputError(f"{what}: only base64 data URLs are supported")
                data = base64.b64decode(payload, validate=True)
            elif isinstance(source, str):
                path = source[len("file://") :] if source.startswith("file://") else source
                data = Path(path).read_bytes()
            else:
                raise QueryInputError(f"{what}: unsupported image value of type {type(source).__name__}")
            image = Image.open(io.BytesIO(data))
            image.load()
        except QueryInputError:
            raise
        except (OSError, ValueError, binascii.Error, SyntaxError) as exc:
            raise QueryInputError(f"{what} could not be decoded: {exc}") from exc
    return image if image.mode == "RGB" else image.convert("RGB")


def _jpeg_base64(image) -> str:
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=95)
    return base64.b64encode(buf.getvalue()).decode()


def _video_part(frames: list[Any], what: str) -> dict[str, Any]:
    """Frames of one video as a vLLM video input (a JPEG-frame data URL, decoded by vLLM)."""
    if not frames:
        raise QueryInputError(f"{what} has no frames")
    images = [_open_image(f, f"{what}, frame {i + 1}") for i, f in enumerate(frames)]
    size = images[0].size
    images = [im if im.size == size else im.resize(size) for im in images]
    url = "data:video/jpeg;base64," + ",".join(_jpeg_base64(im) for im in images)
    return {"type": "video_url", "video_url": {"url": url}}


def to_vllm_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Decode every image of a conversation (so a broken one fails this query only)."""
    converted = []
    n_images = n_videos = 0
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            converted.append(dict(message))
            continue
        parts = []
        for part in content:
            kind = part.get("type")
            if kind == "image_url":
                n_images += 1
                value = part["image_url"]
                url = value.get("url") if isinstance(value, dict) else value
                if isinstance(url, str) and url.startswith(("http://", "https://")):
                    parts.append(part)  # vLLM fetches it
                else:
                    parts.append({"type": "image_pil", "image_pil": _open_image(url, f"image {n_images}")})
            elif kind in ("image_pil", "image"):
                n_images += 1
                parts.append({"type": "image_pil", "image_pil": _open_image(part[kind], f"image {n_images}")})
            elif kind in ("video_frames", "video"):
                # StateLab's own part for sampled frames: {"type": "video_frames", "video_frames": [...]}
                n_videos += 1
                parts.append(_video_part(list(part[kind]), f"video {n_videos}"))
            else:
                parts.append(part)
        converted.append({**message, "content": parts})
    return converted


# ---- sampling and outputs ------------------------------------------------------------------


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def first_token_logprobs(position: dict[int, Any] | None, choices: list[str] | None) -> dict[str, float] | None:
    """Log-probs of the first generated token: per option letter when there are choices
    (tokens decoding to the same letter, e.g. "A" and " A", are summed), else the top-k tokens.
    None when a choice is longer than one character (a candidate number "10", a letter set "A,C"): its
    first token would be credited to another choice (base.single_token_choices)."""
    if not position or (choices and not single_token_choices(choices)):
        return None
    by_text: dict[str, list[float]] = {}
    for entry in position.values():
        if entry.logprob is None or not math.isfinite(entry.logprob):
            continue  # masked out by the constraint, or unusable; JSON cannot hold -inf anyway
        text = entry.decoded_token or ""
        key = text.strip() if choices else text
        by_text.setdefault(key, []).append(float(entry.logprob))
    if choices:
        return {c: _logsumexp(by_text[c]) for c in choices if c in by_text}
    return {t: _logsumexp(v) for t, v in by_text.items()}


class VLLMBackend:
    """ModelBackend over the process's vLLM engine; see the module docstring."""

    def __init__(self, endpoint_options: dict[str, Any], model_id: str, revision: str = "") -> None:
        if not vllm_available():
            raise BackendUnavailable(INSTALL_HINT)
        self.options = dict(endpoint_options or {})
        self.model_id = model_id
        self.revision = revision or ""
        try:  # reject bad settings before any work, in words the job page can show
            engine_kwargs(model_id, self.revision, self.options)
        except (ValueError, TypeError) as exc:
            raise BackendUnavailable(f"the vllm endpoint's settings are invalid: {exc}") from exc

    # The engine is looked up on every chunk, so a replaced engine (another endpoint ran in
    # between) is rebuilt rather than used after shutdown.
    @property
    def llm(self) -> Any:
        return get_engine(self.model_id, self.revision, self.options)

    def sampling_params(self, query: ModelQuery, sampling: Sampling) -> Any:
        vllm, StructuredOutputsParams = _import_vllm()
        max_logprobs = int(self.options.get("max_logprobs") or 20)
        logprobs = sampling.logprobs
        if logprobs is not None and query.choices:
            logprobs = max(logprobs, len(query.choices))
        if logprobs is not None and max_logprobs >= 0:  # -1: the engine allows the whole vocabulary
            logprobs = min(logprobs, max_logprobs)
        structured = None
        if query.choices:
            structured = StructuredOutputsParams(choice=list(query.choices))
        elif query.json_schema is not None:
            structured = StructuredOutputsParams(json=query.json_schema)
        return vllm.SamplingParams(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=max_tokens_for(query, sampling),  # a judge's limit is a minimum
            seed=sampling.seed,
            logprobs=logprobs,
            structured_outputs=structured,
        )

    def complete(self, queries: list[ModelQuery], sampling: Sampling) -> list[ModelReply]:
        if not queries:
            return []
        try:
            llm = self.llm
        except BackendUnavailable:
            raise
        except Exception as exc:
            # The engine did not start (bad model id or revision, out of memory, ...): every query
            # of the chunk fails with the reason, so the job records it instead of hanging; a
            # later chunk or "retry failed" tries to start the engine again.
            logger.exception("vLLM engine for %s failed to start", self.model_id)
            error = f"the vLLM engine could not start: {type(exc).__name__}: {exc}"
            return [ModelReply(key=q.key, error=error) for q in queries]
        replies: dict[str, ModelReply] = {}
        runnable: list[tuple[ModelQuery, list[dict[str, Any]], Any]] = []
        for query in queries:
            try:
                runnable.append((query, to_vllm_messages(query.messages), self.sampling_params(query, sampling)))
            except (QueryInputError, ValueError, TypeError) as exc:
                replies[query.key] = ModelReply(key=query.key, error=str(exc))
        if runnable:
            try:
                self._run(llm, runnable, replies)
            except BackendUnavailable:
                raise
            except Exception as exc:  # one bad request fails the whole call: isolate it
                logger.warning("vLLM chunk of %d failed (%s); running its queries one by one", len(runnable), exc)
                for item in runnable:
                    try:
                        self._run(llm, [item], replies)
                    except Exception as single_exc:
                        replies[item[0].key] = ModelReply(
                            key=item[0].key, error=f"{type(single_exc).__name__}: {single_exc}"
                        )
        return [replies[q.key] for q in queries]

    @staticmethod
    def _run(
        llm: Any, batch: list[tuple[ModelQuery, list[dict[str, Any]], Any]], replies: dict[str, ModelReply]
    ) -> None:
        started = time.perf_counter()
        outputs = llm.chat([m for _, m, _ in batch], [p for _, _, p in batch], use_tqdm=False)
        batch_ms = int(round((time.perf_counter() - started) * 1000))
        if len(outputs) != len(batch):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(batch)} conversations")
        for (query, _, _), output in zip(batch, outputs):
            completion = output.outputs[0]
            replies[query.key] = ModelReply(
                key=query.key,
                text=completion.text,
                logprobs=None
                if query.json_schema is not None
                else first_token_logprobs(completion.logprobs[0] if completion.logprobs else None, query.choices),
                prompt_tokens=len(output.prompt_token_ids or []),
                completion_tokens=len(completion.token_ids),
                latency_ms=batch_ms,  # every query of the batch waited for the whole batch
                extra={
                    "finish_reason": completion.finish_reason,
                    "batch_size": len(batch),
                    # Prompt tokens whose KV blocks came from the prefix cache (None: not reported).
                    "cached_prompt_tokens": getattr(output, "num_cached_tokens", None),
                },
            )

    def close(self) -> None:
        """Nothing to do: the engine outlives the instance, for the next chunk of this endpoint.
        `shutdown_engine()` frees it."""
