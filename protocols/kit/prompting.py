"""What a protocol's prompts are made of: the item a prompt module reads (``ItemInput``), the query
it hands a model (``ModelQuery``, answered by a ``ModelReply``), what it returns per query
(``PreparedQuery``), the media it asks for (``Media``: inference.prompting.MediaPreparer is the
one the jobs pass), and the helpers that build chat messages. Plain Python, no Django.

A protocol's ``prompts`` module (``Protocol.prompts``, protocols/base.py) exposes
``PROMPT_VERSION`` and ``build(item, *, media, params) -> list[PreparedQuery]``; a query whose
media cannot be prepared comes back with ``error`` set and no messages, so only that query (or
item) fails. Optional, where the protocol has them: ``DEFAULT_FRAMES`` (frames per video),
``JSON_QUERIES`` (the keys asked under a JSON schema), and for suggestions ``build_suggestion``,
``parse_suggestion``, ``SUGGEST_JSON_QUERIES`` and ``suggestion_queries(payload)``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any
from typing import Protocol as Interface

from protocols.base import LETTERS


class MediaError(RuntimeError):
    """A media file cannot be read or prepared; the message names the file and says why."""


class Media(Interface):
    """The media a prompt module asks for, as data URLs (inference.prompting.MediaPreparer)."""

    def image(self, path: str | None, *, bbox=None) -> str: ...

    def frames(
        self, path: str | None, n: int, *, content_hash: str | None = None, known: Any = None
    ) -> tuple[list[str], list[int]]: ...


# --- the query a backend answers (inference/backends/base.py: the backends' contract) ------------


@dataclass
class ModelQuery:
    key: str  # unique within a chunk, e.g. "<item pk>|<query key>"
    messages: list[
        dict[str, Any]
    ]  # OpenAI chat format; image parts {"type": "image_url", "image_url": {"url": "data:..."}}
    choices: list[str] | None = None  # constrain the reply to exactly one of these strings (option letters)
    json_schema: dict[str, Any] | None = None  # constrain the reply to this JSON schema (judges)
    max_tokens: int = 16


@dataclass
class ModelReply:
    key: str
    text: str = ""
    # Log-probabilities of the first generated token for each option letter the backend saw, when available.
    logprobs: dict[str, float] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: int = 0
    attempts: int = 1
    error: str | None = None  # set when the query failed for good; text is then ignored
    extra: dict[str, Any] = field(default_factory=dict)


# --- a protocol's items and prepared queries ------------------------------------------------


@dataclass
class ItemInput:
    item_pk: int
    external_id: str
    payload: dict[str, Any]
    # media field -> absolute local path, or a stored file's name that the media preparer's `fetch`
    # turns into one (object storage), or a list of these for list fields; None when missing.
    media_paths: dict[str, Any]
    # media field -> content sha256 (or list), used as frame-cache keys.
    media_hashes: dict[str, Any]
    # the protocol's resolve_queries(...) for this item: key -> {"options", "answer", ...}
    resolved: dict[str, dict[str, Any]]
    # video field -> metadata known from import (saves a probe before sampling frames)
    media_info: dict[str, Any] = field(default_factory=dict)
    # the project's settings (defaults an item's own fields may leave to the project, e.g. whether
    # several options may be right)
    project_settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class PreparedQuery:
    key: str  # the protocol's query key, e.g. "osi_a"
    query: ModelQuery | None
    options: list[Any]
    prompt: str = ""  # the rendered prompt as stored with the prediction
    frame_indices: dict[str, list[int]] | None = None
    fmt: str | None = None  # the item's answer format (choice / count / set), for parse_answer
    error: str | None = None  # preparation failed: the prediction is stored as failed with this
    # The item's candidates this query does not show (its resolved "unshown"), for parse_answer.
    unshown: list[Any] = field(default_factory=list)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def user(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": parts}]


def lettered(options: list[Any]) -> str:
    return "\n".join(f"{LETTERS[i]}. {opt}" for i, opt in enumerate(options))


def numbered(options: list[Any]) -> str:
    return "\n".join(f"{i + 1}. {opt}" for i, opt in enumerate(options))


def render_prompt(messages: list[dict[str, Any]]) -> str:
    """The exact prompt as text, images shown as numbered placeholders (stored per prediction)."""
    out: list[str] = []
    n_image = 0
    for message in messages:
        content = message["content"]
        parts = [text(content)] if isinstance(content, str) else content
        chunk: list[str] = []
        for part in parts:
            if part["type"] == "text":
                chunk.append(part["text"])
            else:
                n_image += 1
                chunk.append(f"<image {n_image}>")
        out.append(f"[{message['role']}]\n" + "\n".join(chunk))
    return "\n\n".join(out)


def letter_subsets(n: int, *, min_size: int = 1) -> list[str]:
    """Every set of option letters as "A,C" strings, for constrained multi-answer replies."""
    letters = LETTERS[:n]
    return [",".join(combo) for size in range(min_size, n + 1) for combo in itertools.combinations(letters, size)]


def query_for(key: str, item: ItemInput, messages, *, choices=None, json_schema=None, max_tokens=16) -> ModelQuery:
    return ModelQuery(
        key=f"{item.item_pk}|{key}", messages=messages, choices=choices, json_schema=json_schema, max_tokens=max_tokens
    )


def failed(key: str, options: list[Any], error: str) -> PreparedQuery:
    return PreparedQuery(key=key, query=None, options=options, error=error)


def frames_param(params: dict[str, Any], default: int, maximum: int = 200) -> int:
    n = int(params.get("frames") or default)
    if not 1 <= n <= maximum:
        raise ValueError(f"frames must be between 1 and {maximum}, got {n}")
    return n
