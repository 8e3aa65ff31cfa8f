"""How a tool's rows meet a release's items (``--match``), and where the tool's own per-sample
verdict and StateLab's score disagree. Plain Python: no Django.

A mapping is one or more ``PATH=FIELD`` pairs (docs/inference.md, "Other tools' outputs"):

- ``PATH``: a dotted path into the tool's row, e.g. ``doc_id``, ``index``, ``doc.question_id``,
  ``mmmu_acc.id`` (a key holding a dot is read whole first; a number indexes a list);
- ``FIELD``: what it equals in the release: ``id`` (the item's id), ``row`` (the item's place in
  the release, counting from 0 as lmms-eval's ``doc_id`` and VLMEvalKit's usual ``index`` do),
  ``row1`` (counting from 1), a field of the release line (``extra.question_id``: the authors'
  provenance an import kept, or any other field, e.g. ``scene``), or ``query`` (the StateLab
  query the row answers, for a protocol that asks several per item).

Several item pairs must all hold (a composite key such as a scene id and a question id). Values
compare as text, a whole number alike whether written 7, 7.0 or "7". A row that names no item is
reported as unmatched and left out; a key that names two items refuses the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

ROW_FIELDS = {"row": 0, "row1": 1}  # the release position, and the number it starts from
SHOWN = 5  # unmatched rows named in a report (the count is always given)
_MISSING = object()


class MatchError(ValueError):
    """A --match value that is not a mapping (one message)."""


@dataclass(frozen=True)
class MatchRule:
    path: str  # in the tool's row
    field: str  # in the release: id, row, row1, query or a line field

    def __str__(self) -> str:
        return f"{self.path}={self.field}"


@dataclass(frozen=True)
class Mapping:
    items: tuple[MatchRule, ...]
    query: MatchRule | None = None

    def __str__(self) -> str:
        return " ".join(str(r) for r in self.items + ((self.query,) if self.query else ()))


def parse_match(specs: Sequence[str]) -> Mapping | None:
    """The mapping named by --match values (None when none is named)."""
    if not specs:
        return None
    items: list[MatchRule] = []
    query: MatchRule | None = None
    for spec in specs:
        path, sep, target = (part.strip() for part in spec.partition("="))
        if not sep or not path or not target:
            raise MatchError(f"--match {spec!r}: expected PATH=FIELD, e.g. doc.question_id=id or index=row")
        rule = MatchRule(path, target)
        if target == "query":
            if query is not None:
                raise MatchError(f"--match {spec!r}: the query is already read from {query.path}")
            query = rule
        else:
            items.append(rule)
    if not items:
        raise MatchError("--match names only the query: add how a row names its item, e.g. doc_id=row")
    positional = [r for r in items if r.field in ROW_FIELDS]
    if positional and len(items) > 1:
        raise MatchError(f"--match {positional[0]}: a position matches alone; drop the other item pairs")
    return Mapping(tuple(items), query)


def value_at(record: Any, path: str) -> Any:
    """The value at a dotted path (``_MISSING`` when there is none)."""
    if isinstance(record, dict) and path in record:
        return record[path]
    head, _, rest = path.partition(".")
    if isinstance(record, dict) and head in record:
        value = record[head]
    elif isinstance(record, list) and head.isdigit() and int(head) < len(record):
        value = record[int(head)]
    else:
        return _MISSING
    return value_at(value, rest) if rest else value


def key_text(value: Any) -> str | None:
    """The text a value is compared by (None: no value to compare)."""
    if value is None or value is _MISSING or isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        text = value.strip()
        return text or None
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


@dataclass
class ReleaseLine:
    """One item of the release as its export line holds it, at its place in the release."""

    position: int
    external_id: str
    line: dict[str, Any]


def _release_value(entry: ReleaseLine, target: str) -> Any:
    if target in ROW_FIELDS:
        return entry.position + ROW_FIELDS[target]
    if target == "id":
        return entry.external_id
    return value_at(entry.line, target)


class ItemIndex:
    """The release's items by the values a mapping reads from them."""

    def __init__(self, mapping: Mapping, entries: Iterable[ReleaseLine]):
        self.mapping = mapping
        self.by_key: dict[tuple[str, ...], str] = {}
        self.ambiguous: dict[tuple[str, ...], list[str]] = {}
        self.size = 0
        for entry in entries:
            self.size += 1
            key = tuple(key_text(_release_value(entry, r.field)) for r in mapping.items)
            if None in key:
                continue
            if key in self.by_key:
                self.ambiguous.setdefault(key, [self.by_key[key]]).append(entry.external_id)
            else:
                self.by_key[key] = entry.external_id

    def find(self, record: Any) -> tuple[str | None, str]:
        """(item id, "") or (None, why the row names no item)."""
        key = []
        for rule in self.mapping.items:
            value = value_at(record, rule.path)
            if value is _MISSING:
                return None, f"no {rule.path!r} in the row"
            text = key_text(value)
            if text is None:
                return None, f"{rule.path!r} is empty"
            key.append(text)
        found = self.by_key.get(tuple(key))
        shown = ", ".join(f"{r.path}={k!r}" for r, k in zip(self.mapping.items, key))
        if found is None:
            return None, f"{shown} names no item"
        if tuple(key) in self.ambiguous:
            names = ", ".join(repr(i) for i in self.ambiguous[tuple(key)][:3])
            raise MatchError(
                f"--match {self.mapping}: {shown} names several items ({names}); add a pair that tells them apart"
            )
        return found, ""


@dataclass
class Mapped:
    """StateLab prediction lines in file order ("" where a row is left out or was blank)."""

    lines: list[str] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)
    unmatched: list[tuple[int, str]] = field(default_factory=list)
    matched: int = 0


def _query(row, query_keys: tuple[str, ...], mapping: Mapping | None) -> tuple[Any, str]:
    if mapping is not None and mapping.query is not None:
        value = value_at(row.record, mapping.query.path)
        return (None, f"no query at {mapping.query.path!r}") if key_text(value) is None else (key_text(value), "")
    if mapping is None and row.query not in (None, ""):
        return str(row.query), ""
    if len(query_keys) == 1:
        return query_keys[0], ""
    hint = "name it with --match PATH=query" if mapping is not None else "give the query in the document"
    return None, f"no query: the protocol asks several per item ({', '.join(query_keys)}); {hint}"


def map_rows(rows, *, query_keys: tuple[str, ...], mapping: Mapping | None, index: ItemIndex | None) -> Mapped:
    """The rows as StateLab prediction lines: by the mapping when one is named (rows naming no item
    reported as unmatched), else by the ids the rows carry (checked later, strictly)."""
    out = Mapped()
    for row in rows:
        if row.error:
            out.errors.append((row.at, row.error))
            continue
        if mapping is None:
            item, why = (row.item, "") if row.item is not None else (None, row.item_error)
            if item is None:
                out.errors.append((row.at, why))
                continue
        else:
            item, why = index.find(row.record)
            if item is None:
                out.unmatched.append((row.at, why))
                continue
        query, why = _query(row, query_keys, mapping)
        if query is None:
            out.errors.append((row.at, why))
            continue
        line: dict[str, Any] = {"item": str(item), "query": query, "answer": row.answer}
        if row.logprobs is not None:
            line["logprobs"] = row.logprobs
        if row.source:
            line["source"] = row.source
        out.lines.extend([""] * (row.at - 1 - len(out.lines)))
        out.lines.append(json.dumps(line, ensure_ascii=False))
        out.matched += 1
    return out


# --- the tool's verdict beside StateLab's ----------------------------------------------------


def verdict(value: Any) -> bool | None:
    """A per-sample metric value read as right (True) or wrong (False): a boolean, or a number
    (or its text) exactly 0 or 1. Anything else (a partial credit, a score out of 100, a record)
    is not a verdict, and that row is not compared on that metric."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "false"):
            return text == "true"
        try:
            value = float(text)
        except ValueError:
            return None
    if isinstance(value, (int, float)) and value in (0, 1):
        return value == 1
    return None


@dataclass
class Disagreement:
    at: int
    item: str
    query: str
    metric: str
    tool_value: Any
    statelab_correct: bool
    reply: str
    target: Any


@dataclass
class Comparison:
    """Per metric: rows compared, rows agreeing; and every disagreeing row, in file order."""

    compared: dict[str, int] = field(default_factory=dict)
    agreeing: dict[str, int] = field(default_factory=dict)
    disagreements: list[Disagreement] = field(default_factory=list)


def compare(lines: Iterable[Any]) -> Comparison:
    """Each parsed line (``at``, ``external_id``, ``query``, ``raw``, ``correct``: StateLab's verdict
    or None where the query has no right answer, ``source``) whose source holds metrics."""
    out = Comparison()
    for p in lines:
        metrics = (p.source or {}).get("metrics") if isinstance(p.source, dict) else None
        if p.correct is None or not isinstance(metrics, dict):
            continue
        for name, value in metrics.items():
            tool = verdict(value)
            if tool is None:
                continue
            out.compared[name] = out.compared.get(name, 0) + 1
            if tool == p.correct:
                out.agreeing[name] = out.agreeing.get(name, 0) + 1
                continue
            reply = p.raw if isinstance(p.raw, str) else json.dumps(p.raw, ensure_ascii=False)
            out.disagreements.append(
                Disagreement(p.at, p.external_id, p.query, name, value, p.correct, reply, p.source.get("target"))
            )
    return out
