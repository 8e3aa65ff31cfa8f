"""What scoring reads: items and one answer set (one model's answers), and the option-order mapping
every protocol's scoring shares. Plain Python, no Django.

An item is a ``ScoringItem`` (payload in the interchange format + ``resolved`` = its protocol's
``resolve_queries`` output). An answer set is a mapping ``(item key, query key) -> ModelAnswer``;
a missing key means the model produced nothing for that query, ``ModelAnswer.value is None`` means
a prediction that failed or could not be parsed.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from protocols.base import LETTERS

from .answers import normalize_letter


@dataclass(slots=True)
class ScoringItem:
    key: Hashable  # the item's primary key (or any unique key)
    external_id: str
    payload: dict[str, Any]
    resolved: dict[str, dict[str, Any]]


@dataclass(slots=True)  # millions per board: no per-instance dict, faster attribute reads
class ModelAnswer:
    value: Any  # canonical parsed answer (see answers.py) or None
    options: list | None = None  # option order the model saw, when stored
    logprobs: dict | None = None


def remap_index(value_index: int, seen: list | None, resolved: list) -> int | None:
    """Map an option index from the order the model saw to the release's order (by option text)."""
    if not seen or list(seen) == list(resolved):
        return value_index
    if not 0 <= value_index < len(seen):
        return None
    try:
        return list(resolved).index(seen[value_index])
    except ValueError:
        return None


def seen_letter(release_index: int, seen: list | None, resolved: list) -> str | None:
    """The letter under which the model saw the release's option ``release_index``."""
    if not seen or list(seen) == list(resolved):
        return LETTERS[release_index]
    try:
        return LETTERS[list(seen).index(resolved[release_index])]
    except (ValueError, IndexError):
        return None


def letter_in_release(answer: ModelAnswer | None, resolved_options: list) -> str | None:
    if answer is None or answer.value is None:
        return None
    letter = normalize_letter(answer.value) if isinstance(answer.value, str) else None
    if letter is None:
        return None
    idx = remap_index(LETTERS.index(letter), answer.options, resolved_options)
    return None if idx is None else LETTERS[idx]
