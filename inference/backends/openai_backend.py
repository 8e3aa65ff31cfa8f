"""Any OpenAI-compatible chat endpoint (OpenAI, a `vllm serve` server, others) through AsyncOpenAI.

- Requests in flight per endpoint are bounded by an adaptive window, at most `endpoint.concurrency`,
  shared by every chunk, worker process and host (limiter.EndpointLimiter: a Redis counting
  semaphore with leases keyed by the endpoint, plus a local asyncio.Semaphore; the local one
  alone without a Redis URL). The option `slot_ttl` (seconds, default 30) is how long a killed
  worker's slots stay taken; `adaptive: false` keeps the window at the cap.
- Transient failures (408, 409, 429, 5xx, timeouts, dropped connections, an HTTP 200 whose body
  is not a chat completion) are retried here, up to `max_retries` more requests, each through
  the limiter (the openai client's own retries are off: the window has to see every 429 and
  timeout): after the server's Retry-After (which also pauses the endpoint for every worker),
  else a jittered exponential backoff, holding no slot while waiting. What still fails comes
  back as a ModelReply with `error` set, never as answer text; `attempts` counts the requests
  tried (a 400 is not retried, so it counts 1), including one whose connection failed or timed
  out before it went out, which the endpoint never saw. A judge's JSON repair requests are
  further calls made by the chunk (services/chunks.py), which adds their tries, tokens and time
  to the stored prediction.
- Deterministic requests are answered from the response cache when it holds them
  (response_cache.py; the caller passes the store), with 0 attempts and 0 tokens.
- Judges get `response_format={"type": "json_schema", ...}` unless the endpoint's options say
  `"json_schema": false`; their protocol token limit is a minimum (base.max_tokens_for).
  Option queries ask for first-token top log-probs unless `"logprobs": false`, and only when
  every choice is a single character (base.single_token_choices: not candidate numbers "1".."10");
  `"structured_choice": true` adds vLLM's `structured_outputs.choice`.
- HTTP goes through aiohttp (the SDK's `aiohttp` extra) when installed, else the SDK default.
- The API key is passed in by the caller (read from the environment variable the endpoint names);
  this module never stores, logs or prints it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import json
import math
import random
import time
from typing import Any

import openai
from openai._constants import RAW_RESPONSE_HEADER
from openai.types.chat import ChatCompletion

from .base import ModelQuery, ModelReply, Sampling, max_tokens_for, single_token_choices
from .limiter import DEFAULT_START, DEFAULT_TTL, EndpointLimiter
from .response_cache import ResponseStore, cacheable, request_hash, sampling_of

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 3
DEFAULT_MAX_RETRY_AFTER = 60.0  # a longer Retry-After is not waited for: the backoff applies
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
        limiter_key: str | None = None,
        redis_url: str | None = None,
        response_store: ResponseStore | None = None,
    ):
        self.base_url = base_url or None
        self._api_key = api_key or "not-needed"  # local servers accept any key
        self.model = model
        self.concurrency = max(1, int(concurrency))
        self.options = dict(options or {})
        self.timeout = float(self.options.get("timeout", DEFAULT_TIMEOUT))
        self.max_retries = int(self.options.get("max_retries", DEFAULT_MAX_RETRIES))
        # The endpoint's in-flight bound is shared through Redis under this key (see limiter.py).
        self.limiter_key = limiter_key or f"{self.base_url or 'openai'}|{self.model}"
        self.redis_url = redis_url or None
        self.slot_ttl = float(self.options.get("slot_ttl", DEFAULT_TTL))
        # Adaptive concurrency (limiter.py): an answer slower than this does not widen the window.
        self.slow_after = float(self.options.get("slow_after", self.timeout / 2))
        self.start_concurrency = int(self.options.get("start_concurrency", DEFAULT_START))
        self.adaptive = bool(self.options.get("adaptive", True))  # false: `concurrency` is a fixed bound
        self.max_retry_after = float(self.options.get("max_retry_after", DEFAULT_MAX_RETRY_AFTER))
        # Answers to repeated requests (response_cache.py); none kept without a store.
        self.response_store = response_store
        self.response_cache = str(self.options.get("response_cache", "deterministic"))
        self.cache_model = f"{self.base_url or 'openai'}|{self.model}"

    def __repr__(self) -> str:  # never show the key
        return f"OpenAIBackend(base_url={self.base_url!r}, model={self.model!r}, concurrency={self.concurrency})"

    def complete(self, queries: list[ModelQuery], sampling: Sampling) -> list[ModelReply]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return self._complete(queries, sampling)
        # An event loop already runs in this thread (a notebook, Playwright's sync API in a test
        # session): run ours in a helper thread instead of failing.

        def in_thread() -> list[ModelReply]:
            try:
                return self._complete(queries, sampling)
            finally:
                if self.response_store is not None:
                    self.response_store.release_thread()

        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="openai-backend") as pool:
            return pool.submit(in_thread).result()

    def _complete(self, queries: list[ModelQuery], sampling: Sampling) -> list[ModelReply]:
        """Serve what the response cache holds (response_cache.py), ask the endpoint the rest, and
        keep its answers to cacheable requests."""
        digests: dict[int, str] = {}
        if self.response_store is not None:
            for i, query in enumerate(queries):
                body = self.request_kwargs(query, sampling)
                if cacheable(body, self.response_cache):
                    digests[i] = request_hash(body)
        found = self.response_store.get_many(self.cache_model, list(digests.values())) if digests else {}
        replies: dict[int, ModelReply] = {
            i: _cached_reply(queries[i], found[digest]) for i, digest in digests.items() if digest in found
        }
        asked = [i for i in range(len(queries)) if i not in replies]
        if asked:
            answers = asyncio.run(self.complete_async([queries[i] for i in asked], sampling))
            replies.update(zip(asked, answers))
            keep = {
                digests[i]: _cache_entry(self.request_kwargs(queries[i], sampling), replies[i])
                for i in asked
                if i in digests and _keepable(queries[i], replies[i])
            }
            if keep:
                self.response_store.put_many(self.cache_model, keep)
        return [replies[i] for i in range(len(queries))]

    async def complete_async(self, queries: list[ModelQuery], sampling: Sampling) -> list[ModelReply]:
        client = openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=self._api_key,
            timeout=self.timeout,
            max_retries=0,  # retried here, through the limiter (_one)
            http_client=self._http_client(),
        )
        limiter = EndpointLimiter(
            self.limiter_key,
            self.concurrency,
            self.redis_url,
            ttl=self.slot_ttl,
            start=self.start_concurrency,
            adaptive=self.adaptive,
        )
        try:
            return list(await asyncio.gather(*(self._one(client, limiter, q, sampling) for q in queries)))
        finally:
            await limiter.close()
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
        kwargs: dict[str, Any] = {"model": self.model, "messages": query.messages}
        if self.options.get("sampling_params", True):  # reasoning models refuse temperature / top_p
            kwargs["temperature"] = sampling.temperature
            kwargs["top_p"] = sampling.top_p
        # OpenAI's reasoning models take max_completion_tokens; most servers take max_tokens.
        kwargs[str(self.options.get("max_tokens_param", "max_tokens"))] = max_tokens_for(query, sampling)
        if sampling.seed is not None:
            kwargs["seed"] = sampling.seed
        extra_body: dict[str, Any] = {}
        if query.choices:
            if self.options.get("logprobs", True) and sampling.logprobs and single_token_choices(query.choices):
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
        # Anything else the server understands (e.g. reasoning_effort, chat_template_kwargs);
        # it never replaces the model or the messages.
        extra = self.options.get("extra_body") or {}
        if isinstance(extra, dict):
            kwargs.update({k: v for k, v in extra.items() if k not in ("model", "messages")})
        return kwargs

    async def _one(
        self, client: openai.AsyncOpenAI, limiter: EndpointLimiter, query: ModelQuery, sampling: Sampling
    ) -> ModelReply:
        kwargs = self.request_kwargs(query, sampling)
        attempts = 0
        started = time.monotonic()
        problem = ""
        for round_ in range(1 + self.max_retries):
            wait = 0.0
            async with limiter.slot() as slot:
                sent = time.monotonic()
                try:
                    # The client's generic POST (its own retries off: each try goes through the
                    # limiter, which has to see every 429 and timeout) without re-walking every
                    # message part and the JSON schema through the SDK's typed-params transform
                    # (a third of its CPU per call).
                    raw = await client.post(
                        "/chat/completions", body=kwargs, cast_to=ChatCompletion, options=_RAW_OPTIONS
                    )
                except openai.APIStatusError as exc:
                    attempts += 1
                    problem = f"HTTP {exc.status_code}: {_short(_error_message(exc))}"
                    if not _retried(exc):
                        return self._failure(query, started, attempts, problem)
                    pause = _retry_after(exc, self.max_retry_after)
                    if exc.status_code == 429:
                        slot.outcome, slot.pause = "limited", pause or 0.0
                    wait = pause if pause is not None else _backoff(round_)
                except openai.APITimeoutError as exc:
                    attempts += 1
                    refused = _connection_failure(exc)
                    if refused:  # the aiohttp transport reports a refused connection as a connect timeout
                        problem = f"connection failed: {_short(refused)}"
                    else:
                        problem = f"timed out after {self.timeout:g} s"
                        slot.outcome = "timeout"
                    wait = _backoff(round_)
                except openai.APIConnectionError as exc:
                    attempts += 1
                    problem = f"connection failed: {_short(str(exc))}"
                    wait = _backoff(round_)
                except openai.APIError as exc:
                    attempts += 1
                    return self._failure(query, started, attempts, f"bad response: {_short(str(exc))}")
                else:
                    attempts += 1
                    # The body is read as plain JSON: building the SDK's pydantic models for every
                    # reply costs more CPU than the rest of the reply handling.
                    try:
                        data = raw.http_response.json()
                    except ValueError:
                        problem = f"bad response: the body is not JSON: {_short(raw.http_response.text, 120)!r}"
                    else:
                        choice = _chat_choice(data)
                        if choice is not None:
                            slot.outcome = "ok" if time.monotonic() - sent <= self.slow_after else "slow"
                            break
                        problem = f"bad response: not a chat completion: {_short(json.dumps(data)[:300])}"
                    wait = _backoff(round_)  # a garbled 200: ask again
            if round_ < self.max_retries:
                await asyncio.sleep(wait)  # outside the slot: a waiting request holds none
        else:
            return self._failure(query, started, attempts, problem)
        latency = int((time.monotonic() - started) * 1000)
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return ModelReply(
            key=query.key,
            text=choice["message"].get("content") or "",
            logprobs=_first_token_logprobs(choice.get("logprobs"), query.choices),
            prompt_tokens=_int(usage.get("prompt_tokens")),
            completion_tokens=_int(usage.get("completion_tokens")),
            latency_ms=latency,
            attempts=attempts,
            extra={"finish_reason": choice.get("finish_reason")},
        )

    def _failure(self, query: ModelQuery, started: float, attempts: int, message: str) -> ModelReply:
        attempts = max(1, attempts)
        return ModelReply(
            key=query.key,
            latency_ms=int((time.monotonic() - started) * 1000),
            attempts=attempts,
            error=f"{message} (after {attempts} attempt{'s' if attempts != 1 else ''})",
        )

    def close(self) -> None:
        pass


def _cached_reply(query: ModelQuery, entry: dict[str, Any]) -> ModelReply:
    """An answer from the response cache: no request, no tokens spent (those the first asking
    spent are in extra["cached_usage"])."""
    return ModelReply(
        key=query.key,
        text=entry.get("text") or "",
        logprobs=entry.get("logprobs"),
        attempts=0,
        extra={
            "finish_reason": entry.get("finish_reason") or None,
            "cached": True,
            "cached_usage": [entry.get("prompt_tokens") or 0, entry.get("completion_tokens") or 0],
        },
    )


def _keepable(query: ModelQuery, reply: ModelReply) -> bool:
    """An answer worth serving again: a chat completion and, for a JSON-schema query (a judge),
    a JSON object; an unreadable one is asked again next time (the job's retry of unreadable
    replies must reach the judge)."""
    if reply.error is not None:
        return False
    if query.json_schema:
        try:
            return isinstance(json.loads(reply.text), dict)
        except ValueError:
            return False
    return True


def _cache_entry(body: dict[str, Any], reply: ModelReply) -> dict[str, Any]:
    return {
        "sampling": sampling_of(body),
        "text": reply.text,
        "logprobs": reply.logprobs,
        "finish_reason": str(reply.extra.get("finish_reason") or ""),
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
    }


def _short(message: str, limit: int = 300) -> str:
    message = " ".join(str(message).split())
    return message if len(message) <= limit else message[: limit - 1] + "…"


def _backoff(round_: int) -> float:
    """Jittered exponential backoff: 0.5 s doubling to at most 8 s, minus up to 25 % jitter (the
    openai client's own schedule), so requests refused together do not come back together."""
    return min(0.5 * 2.0**round_, 8.0) * (1 - 0.25 * random.random())


def _retried(exc: openai.APIStatusError) -> bool:
    """The openai client's rule for what is worth another try: the server's x-should-retry when it
    says, else 408, 409, 429 and 5xx (a 400, 401, 404 fails at once)."""
    should = exc.response.headers.get("x-should-retry") if exc.response is not None else None
    if should in ("true", "false"):
        return should == "true"
    return exc.status_code in (408, 409, 429) or exc.status_code >= 500


def _retry_after(exc: openai.APIStatusError, most: float) -> float | None:
    """Seconds the server asked to wait (retry-after-ms, or retry-after in seconds or as an HTTP
    date); None when it did not say or asked for more than `most` (then the backoff applies)."""
    headers = exc.response.headers if exc.response is not None else {}
    seconds = None
    try:
        if headers.get("retry-after-ms"):
            seconds = float(headers["retry-after-ms"]) / 1000
        elif headers.get("retry-after"):
            value = headers["retry-after"]
            try:
                seconds = float(value)
            except ValueError:
                seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError, OverflowError):
        return None
    if seconds is None or not math.isfinite(seconds) or seconds < 0 or seconds > most:
        return None
    return seconds


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _chat_choice(data: Any) -> dict[str, Any] | None:
    """The first choice of a chat completion body, or None when the body is not one."""
    try:
        choice = data["choices"][0]
        if isinstance(choice, dict) and isinstance(choice["message"], dict):
            content = choice["message"].get("content")
            if content is None or isinstance(content, str):
                return choice
    except (KeyError, IndexError, TypeError):
        pass
    return None


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
    """Log-probs of the option letters among the first generated token's top alternatives
    (none when a choice is longer than one token: see base.single_token_choices)."""
    if not single_token_choices(choices) or not isinstance(logprobs, dict) or not logprobs.get("content"):
        return None
    first = logprobs["content"][0]
    wanted = set(choices)
    # Each distinct token once (the chosen one is usually among the alternatives too); tokens that
    # decode to the same letter ("A", " A") are summed, as the vLLM backend does.
    seen: dict[str, float] = {}
    for alt in [*(first.get("top_logprobs") or []), first]:
        token, value = alt.get("token"), alt.get("logprob")
        if isinstance(token, str) and isinstance(value, (int, float)) and math.isfinite(value) and token not in seen:
            seen[token] = float(value)
    by_letter: dict[str, list[float]] = {}
    for token, value in seen.items():
        if token.strip() in wanted:
            by_letter.setdefault(token.strip(), []).append(value)
    out = {letter: _logsumexp(values) for letter, values in by_letter.items()}
    return out or None


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))
