"""Pieces shared by the item and the annotation importer: the error list, the refusal, and
duplicate-key detection in constant memory per line."""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_REPORTED_ERRORS = 200


class ImportRefused(Exception):
    """The whole file is refused; `errors` lists "line N: field F: reason" messages."""

    def __init__(self, errors: list[str], total: int | None = None):
        self.errors = errors
        self.total = total if total is not None else len(errors)
        # The format the file was read as (an item import's), for the refusal's heading.
        self.read_as: str | None = None
        more = f" (showing {len(errors)} of {self.total})" if self.total > len(errors) else ""
        super().__init__(f"import refused, {self.total} error(s){more}:\n" + "\n".join(errors))

    def as_dict(self) -> dict[str, Any]:
        return {"detail": "import refused; nothing was written", "error_count": self.total, "errors": self.errors}


@dataclass
class ErrorLog:
    """Collects every error, keeping the first MAX_REPORTED_ERRORS messages."""

    messages: list[str] = field(default_factory=list)
    total: int = 0

    def add(self, line: int | str, field_name: str, reason: str) -> None:
        self.total += 1
        if len(self.messages) < MAX_REPORTED_ERRORS:
            where = f"line {line}" if isinstance(line, int) else str(line)
            # A NUL quoted from the input is shown escaped: PostgreSQL stores none (the run's errors).
            self.messages.append(f"{where}: field {field_name}: {reason}".replace("\x00", "\\x00"))

    def __bool__(self) -> bool:
        return self.total > 0

    def refuse(self) -> ImportRefused:
        return ImportRefused(self.messages, self.total)


_MASK64 = (1 << 64) - 1


def key_hash(key: str) -> int:
    """A 64-bit hash of the key, stable within this process (Python's keyed SipHash of str).

    Hashes are only ever compared within one import, so the per-process seed does not matter; a
    collision only makes `report_duplicates` look at the real keys of the lines concerned.
    """
    return hash(key) & _MASK64


class KeySeen:
    """Remember keys (ids) as 8-byte hashes: 8 bytes per line instead of a Python set of strings.

    `colliding()` returns the hashes seen more than once; the caller re-reads the file to name the
    lines (and compares the real keys, so a hash collision never reports a false duplicate).
    """

    def __init__(self) -> None:
        self._hashes = array("Q")
        self._append = self._hashes.append

    def add(self, key: str) -> None:
        self._append(hash(key) & _MASK64)

    def colliding(self) -> set[int]:
        if len(self._hashes) < 2:
            return set()
        values = np.sort(np.frombuffer(self._hashes, dtype=np.uint64))
        return {int(v) for v in values[1:][values[1:] == values[:-1]]}


def report_duplicates(
    keyed_lines: Iterable[tuple[int, str]], colliding: set[int], errors: ErrorLog, *, field_name: str, what: str
) -> None:
    """Second look at the lines whose key hash collided: report real duplicates with both lines."""
    first_line: dict[str, int] = {}
    for line, key in keyed_lines:
        if key_hash(key) not in colliding:
            continue
        if key in first_line:
            errors.add(line, field_name, f"duplicate {what} {key!r} (first on line {first_line[key]})")
        else:
            first_line[key] = line


class InvalidJSON:
    """Stands in for an item's text where a source could not cut the item out of the file (a
    syntax error inside a JSON document: nothing after it can be read); `reason` says why."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


class LineTooLong(InvalidJSON):
    """Stands in for a line longer than STATELAB_MAX_LINE_BYTES (its text was never read whole)."""

    __slots__ = ()


def parse_json_line(line: int, text: str | InvalidJSON | None, errors: ErrorLog) -> Any:
    """Decode one JSONL line or record why not (returns None then)."""
    if text is None:
        errors.add(line, "-", "not valid UTF-8")
        return None
    if isinstance(text, LineTooLong):
        errors.add(line, "-", text.reason)
        return None
    if isinstance(text, InvalidJSON):
        errors.add(line, "-", f"invalid JSON ({text.reason})")
        return None
    try:
        return json.loads(text)
    except RecursionError:
        errors.add(line, "-", "invalid JSON (nested too deeply)")
        return None
    except ValueError as exc:
        reason = f"{exc.msg} at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else str(exc)
        errors.add(line, "-", f"invalid JSON ({reason})")
        return None
