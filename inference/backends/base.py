"""The contract between jobs and model backends. Plain Python, no Django.

A job turns items into `ModelQuery` objects (chat messages in the OpenAI format, images as
data URLs or PIL images) and hands a chunk of them to a backend; the backend returns one
`ModelReply` per query, in order, never raising for a single query's failure. Both are defined
with the prompts that make them (protocols/kit/prompting.py) and imported from here by the
backends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from protocols.kit.prompting import ModelQuery, ModelReply

__all__ = [
    "BackendUnavailable",
    "ModelBackend",
    "ModelQuery",
    "ModelReply",
    "Sampling",
    "max_tokens_for",
    "single_token_choices",
]


@dataclass
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int | None = None
    seed: int | None = None
    logprobs: int | None = 5  # top-k log-probs of each generated token, where the backend supports it


def single_token_choices(choices: list[str] | None) -> bool:
    """Whether first-token log-probs can stand for the choices: every choice is one character (an
    option letter, a digit), so the first generated token is the whole answer. Tokenizers split
    longer choices ("10" starts with the token "1"; "A,C" with "A"), and the first token's
    log-prob would then be credited to the wrong choice, so none are stored for such queries."""
    return bool(choices) and all(isinstance(c, str) and len(c.strip()) == 1 for c in choices)


def max_tokens_for(query: ModelQuery, sampling: Sampling) -> int:
    """The generation limit of one query. A job-level max_tokens replaces the protocol's default,
    except for structured (JSON-schema) replies such as judges, where the protocol's limit is a
    minimum: a smaller job limit would cut the JSON and lose the answer, so it only raises it."""
    if query.json_schema is not None:
        return max(int(sampling.max_tokens or 0), query.max_tokens)
    return sampling.max_tokens or query.max_tokens


class BackendUnavailable(RuntimeError):
    """The backend cannot run here (e.g. vLLM not installed); jobs refuse to start."""


class ModelBackend(Protocol):
    def complete(self, queries: list[ModelQuery], sampling: Sampling) -> list[ModelReply]: ...

    def close(self) -> None: ...
