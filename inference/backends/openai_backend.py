"""Any OpenAI-compatible chat endpoint (OpenAI, a `vllm serve` server, others) through AsyncOpenAI.

- Concurrency per endpoint is bounded by an asyncio.Semaphore(endpoint.concurrency).
- Transient failures (429, 5xx, timeouts, dropped connections) are retried by the openai client
  itself, which honours retry-after headers; `max_retries` and `timeout` come from the endpoint's
  options. What still fails comes back as a ModelReply with `error` set, never as answer text.
- Judges get `response_format={"type": "json_schema", ...}` unless the endpoint's options say
  `"json_schema": false`; option-letter queries ask for first-token top log-probs unless
  `"logprobs": false`; `"structured_choice": true` adds vLLM's `structured_outputs.choice`.
- HTTP goes through aiohttp (the SDK's `aiohttp` extra) when installed, else the SDK default.
- The API key is passed in by the caller (read from the environment variable the endpoint names);
  this module never stores, logs or prints it.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
from typing import Any

import openai
from openai._constants import RAW_RESPONSE_HEADER
from openai.types.chat import ChatCompletion

from .base import ModelQuery, ModelReply, Sampling

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 3
# Ask for the raw response (to read retries_taken) and for the client's bearer auth.
_RAW_OPTIONS: dict[str, Any] = {"headers": {RAW_RESPONSE_HEADER: "true"}, "security": {"bearer_auth": True}}


class OpenAIBackend:
    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        model: str,
        concurrency: int = 8,
        options: dict[str, Any] | None = None,
    ):
        self.base_url = base_url or None
        self._api_key = api_key or "not-needed"  # local servers accept any key
        self.model = model
        self.concurrency = max(1, int(concurrency))
        self.options = dict(options or {})
        self.timeout = float(self.options.get("timeout", DEFAULT_TIMEOUT))
        self.max_retries = int(self.options.get("max_retries", DEFAULT_MAX_RETRIES))

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIBackend(base_url={self.base_url!r}, model={self.model!r}, concurrency={self.concurrency})"

    def complete(self, queries: list[ModelQuery], sampling: Sampling) -> list[ModelReply]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.complete_async(queries, sampling))
        # An event loop already runs in this thread (a notebook, Playwright's sync API in a test
        # session): run ours in a helper thread instead of failing.
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="openai-backend") as pool:
            return pool.submit(lambda: asyncio.run(self.complete_async(queries, sampling))).result()

    async def complete_async(self, queries: list[ModelQuery], sampling: Sampling) -> list[ModelReply]:
        client = openai.AsyncOpenAI(
            base_url=self.base_url, api_key=self._api_key, timeout=self.timeout, max_retries=self.max_retries,
            http_client=self._http_client(),
        )
        semaphore = asyncio.Semaphore(self.concurrency)
        try:
            return list(await asyncio.gather(*(self._one(client, semaphore, q, sampling) for q in queries)))
        finally:
            await client.close()

    def _http_client(self):
        """aiohttp as the SDK's transport (its `aiohttp` extra: about 40 % less CPU per request
        than the default pure-Python HTTP stack, which matters at 32 requests in flight);
        the default transport when the extra is missing or `"http_transport": "httpx"`."""
        if self.options.get("http_transport", "aiohttp") == "aiohttp":
            try:
                return openai.DefaultAioHttpClient(timeout=self.timeout)
            except RuntimeError:  # the aiohttp extra is not installed
                pass
        return None

    def request_kwargs(self, query: ModelQuery, sampling: Sampling) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": query.messages,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens or query.max_tokens,
        }
        if sampling.seed is not None:
            kwargs["seed"] = sampling.seed
        extra_body: dict[str, Any] = {}
        if query.choices:
            if self.options.get("logprobs", True) and sampling.logprobs:
                kwargs["logprobs"] = True
                kwargs["top_logprobs"] = min(int(sampling.logprobs), 20)
            if self.options.get("structured_choice", False):
                extra_body["structured_outputs"] = {"choice": list(query.choices)}
        if query.json_schema and self.options.get("json_schema", True):
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": query.json_schema, "strict": True},
            }
        kwargs.update(extra_body)
        return kwargs

    async def _one(self, client: openai.AsyncOpenAI, semaphore: asyncio.Semaphore, query: ModelQuery, sampling: Sampling) -> ModelReply:
        kwargs = self.request_kwargs(query, sampling)
        async with semaphore:
            started = time.monotonic()
            try:
                # The client's generic POST: same retries, retry-after handling, timeouts and auth
                # as chat.completions.create, without re-walking every message part and the JSON
                # schema through the SDK's typed-params transform (a third of its CPU per call).
                raw = await client.post(
                    "/chat/completions", body=kwargs, cast_to=ChatCompletion, options=_RAW_OPTIONS
                )
                # The body is read as plain JSON: building the SDK's pydantic models for every
                # reply costs more CPU than the rest of the reply handling.
                data = raw.http_response.json()
            except openai.APIStatusError as exc:
                return self._failure(query, started, f"HTTP {exc.status_code}: {_short(_error_message(exc))}")
            except openai.APITimeoutError as exc:
                refused = _connection_failure(exc)
                if refused:  # the aiohttp transport reports a refused connection as a connect timeout
                    return self._failure(query, started, f"connection failed: {_short(refused)}")
                return self._failure(query, started, f"timed out after {self.timeout:g} s")
            except openai.APIConnectionError as exc:
                return self._failure(query, started, f"connection failed: {_short(str(exc))}")
            except (openai.APIError, ValueError) as exc:  # malformed response bodies and the like
                return self._failure(query, started, f"bad response: {_short(str(exc))}")
            latency = int((time.monotonic() - started) * 1000)
        attempts = 1 + int(getattr(raw, "retries_taken", 0) or 0)
        try:
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
            usage = data.get("usage") or {}
            return ModelReply(
                key=query.key,
                text=text,
                logprobs=_first_token_logprobs(choice.get("logprobs"), query.choices),
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
                latency_ms=latency,
                attempts=attempts,
                extra={"finish_reason": choice.get("finish_reason")},
            )
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            return ModelReply(key=query.key, latency_ms=latency, attempts=attempts,
                              error=f"bad response: not a chat completion: {_short(json.dumps(data)[:300])}")

    def _failure(self, query: ModelQuery, started: float, message: str) -> ModelReply:
        # Every failed request was tried 1 + max_retries times when the error was retryable.
        return ModelReply(
            key=query.key,
            latency_ms=int((time.monotonic() - started) * 1000),
            attempts=1 + self.max_retries,
            error=f"{message} (after up to {1 + self.max_retries} attempts)",
        )

    def close(self) -> None:
        pass


def _short(message: str, limit: int = 300) -> str:
    message = " ".join(str(message).split())
    return message if len(message) <= limit else message[: limit - 1] + "…"


def _connection_failure(exc: BaseException) -> str | None:
    """The OS-level connection error under an exception chain, unless it is a real timeout."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) and not isinstance(exc, TimeoutError):
            return str(exc)
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        if isinstance(inner.get("message"), str):
            return inner["message"]
    return exc.message


def _first_token_logprobs(logprobs: Any, choices: list[str] | None) -> dict[str, float] | None:
    """Log-probs of the option letters among the first generated token's top alternatives."""
    if not choices or not logprobs or not logprobs.get("content"):
        return None
    first = logprobs["content"][0]
    wanted = set(choices)
    out: dict[str, float] = {}
    for alt in first.get("top_logprobs") or []:
        token = alt["token"].strip()
        if token in wanted and token not in out:
            out[token] = float(alt["logprob"])
    token = first["token"].strip()
    if token in wanted and token not in out:
        out[token] = float(first["logprob"])
    return out or None
