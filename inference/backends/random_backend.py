"""The seeded Random baseline: answers drawn uniformly from what each query allows, through the
same pipeline (prompts, parsing, storage, scoring) as a real model."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from .base import ModelQuery, ModelReply, Sampling


def _from_schema(schema: dict[str, Any], rng: random.Random) -> Any:
    if "anyOf" in schema:
        return _from_schema(schema["anyOf"][0], rng)  # the non-null branch: a baseline always answers
    if "enum" in schema:
        return rng.choice([v for v in schema["enum"] if v is not None])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next(k for k in kind if k != "null")
    if kind == "object":
        return {name: _from_schema(sub, rng) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        size = schema.get("minItems", 1)
        return [_from_schema(schema.get("items", {"type": "string"}), rng) for _ in range(size)]
    if kind == "integer":
        return rng.randint(schema.get("minimum", 0), schema.get("maximum", 9))
    if kind == "number":
        return rng.uniform(schema.get("minimum", 0), schema.get("maximum", 1))
    if kind == "boolean":
        return rng.random() < 0.5
    return "random"


class RandomBackend:
    def __init__(self, *, seed: int = 0, count_max: int = 9):
        self.seed = seed
        self.count_max = count_max

    def answer(self, query: ModelQuery) -> str:
        # Seeded by the query's content (prompt and media), not by database ids, so the same release
        # gives the same baseline answers in any database.
        content = hashlib.sha256(json.dumps([query.messages, query.choices], sort_keys=True).encode()).hexdigest()
        rng = random.Random(f"{self.seed}:{query.key.rsplit('|', 1)[-1]}:{content}")
        if query.choices:
            return rng.choice(query.choices)
        if query.json_schema:
            return json.dumps(_from_schema(query.json_schema, rng))
        # Free-form replies (counts): a whole number in a small range.
        return str(rng.randint(0, self.count_max))

    def complete(self, queries: list[ModelQuery], sampling: Sampling) -> list[ModelReply]:
        seed = self.seed if sampling.seed is None else sampling.seed
        backend = self if seed == self.seed else RandomBackend(seed=seed, count_max=self.count_max)
        return [ModelReply(key=q.key, text=backend.answer(q)) for q in queries]

    def close(self) -> None:
        pass
