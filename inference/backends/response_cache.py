"""The response cache of API judges: an answer to one exact request, kept in PostgreSQL
(inference.models.CachedResponse), is served again without asking the endpoint.

Which requests (the endpoint's option `response_cache`):

- "deterministic" (the default): only greedy requests, temperature 0 and at most one choice. A
  sampled request is asked every time, since its answers are meant to differ; so is one that sends
  no temperature at all (the endpoint's `sampling_params: false`, for reasoning models: the
  server's own default decides, and it is rarely greedy);
- "always": every request, sampled ones included (a re-run then repeats its samples);
- "off": none.

The key is (model, request hash): the model is the server and model asked (base URL and model
id), the hash the SHA-256 of the whole request body in canonical JSON, so every message, image,
sampling parameter, token limit and schema is part of it; a request that differs in any of them
is a miss. Only answers that came back as chat completions are kept: failures are asked again.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Protocol

POLICIES = ("deterministic", "always", "off")
SAMPLING_KEYS = ("temperature", "top_p", "seed", "max_tokens", "max_completion_tokens", "n", "logprobs", "top_logprobs")


def request_hash(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def cacheable(body: dict[str, Any], policy: str) -> bool:
    """Whether this request's answer may be served from, and kept in, the cache."""
    if policy == "always":
        return True
    if policy != "deterministic":
        return False
    temperature = body.get("temperature")
    return temperature is not None and float(temperature) == 0.0 and int(body.get("n") or 1) == 1


def sampling_of(body: dict[str, Any]) -> dict[str, Any]:
    return {k: body[k] for k in SAMPLING_KEYS if k in body}


class ResponseStore(Protocol):
    """Where cached answers live. `get_many` returns hash -> {"text", "logprobs", "finish_reason",
    "prompt_tokens", "completion_tokens"} for the hashes it holds; `put_many` keeps new ones
    (hash, sampling and the same fields), leaving any it holds already."""

    def get_many(self, model: str, hashes: list[str]) -> dict[str, dict[str, Any]]: ...

    def put_many(self, model: str, entries: dict[str, dict[str, Any]]) -> None: ...

    def release_thread(self) -> None: ...


class DatabaseResponseStore:
    """The store in PostgreSQL (inference.models.CachedResponse)."""

    FIELDS = ("text", "logprobs", "finish_reason", "prompt_tokens", "completion_tokens")

    def get_many(self, model: str, hashes: list[str]) -> dict[str, dict[str, Any]]:
        from django.db.models import F
        from django.utils import timezone

        from ..models import CachedResponse

        if not hashes:
            return {}
        rows = CachedResponse.objects.filter(model=model, request_hash__in=set(hashes))
        found = {row["request_hash"]: row for row in rows.values("request_hash", *self.FIELDS)}
        if found:
            CachedResponse.objects.filter(model=model, request_hash__in=list(found)).update(
                hits=F("hits") + 1, used_at=timezone.now()
            )
        return found

    def put_many(self, model: str, entries: dict[str, dict[str, Any]]) -> None:
        from ..models import CachedResponse

        CachedResponse.objects.bulk_create(
            [
                CachedResponse(
                    model=model,
                    request_hash=digest,
                    sampling=entry.get("sampling") or {},
                    **{k: entry.get(k) if k == "logprobs" else entry.get(k) or _empty(k) for k in self.FIELDS},
                )
                for digest, entry in entries.items()
            ],
            ignore_conflicts=True,  # another worker kept the same answer first
        )

    def release_thread(self) -> None:
        """Close this thread's database connection (a helper thread's, which nothing else closes)."""
        from django.db import connection

        connection.close()


def _empty(field: str) -> Any:
    return 0 if field.endswith("_tokens") else ""
