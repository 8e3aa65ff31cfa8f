"""Validation of one item line of the interchange format (docs/architecture.md, "Interchange
formats"; each protocol's fields: docs/protocols/<name>.md), by the fields the line's protocol
declares (``Protocol.item_fields``, protocols/fields.py ItemFields, in the protocol's fields.py).

Plain Python (no Django): a line goes in as a decoded JSON object, a `CheckedItem` or a list of
`FieldError`s comes out. Media files are not opened here; the importer checks the paths that
`CheckedItem.media_paths` lists.

An item carrying none of its protocol's label fields is *raw* (status pending), one carrying them
is *complete* (status annotated, or verified with ``--verified``); a complete item must carry
every field of `labels_required`. A protocol without label fields (its labels are ratings,
imported with ``import_annotations``) has its items arrive pending unless imported as verified.

Every protocol also accepts ``"gold": true`` (default false): the item is a gold item of the
annotation queue, whose known answer scores annotators (annotation.agreement.gold_correct).
Only an item with a known answer may be gold, so gold on a raw item is refused. The known answer
is the complete item's labels, or, for a protocol whose labels are ratings, its `gold_answer`
fields (the expected scores); these are a gold item's answer only: on an item that is not gold
they are refused.

A known QA answer is stored in annotation.canonical's form (a raw ``"b"`` becomes ``"B"``), the
form a reviewer's verification writes; expected scores in criteria order. Single field values
are checked in protocols/fields.py; lines of annotations made elsewhere in annotation_lines.py.

Fields the protocol does not know are kept, not refused: they go into the payload's ``"extra"``
object (with whatever object the line carries as ``"extra"`` itself: the provenance an authors'
format reader keeps, protocols/kit/releases.py), which reviewers see, a release exports back and
annotators never receive (annotation.selectors.annotator_item_payload shows an allow-list).
``strict`` refuses them instead. Every error of a line comes at once: the checks across fields
run on the fields that passed, where the line's required fields are all valid.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from annotation import canonical
from protocols import fields, registry
from protocols.base import Protocol
from protocols.fields import FieldError

# Keys every protocol accepts besides its own fields (none of them goes into the payload).
COMMON_KEYS = ("id", "split", "tags", "gold")
# The payload's object of fields kept from the source that the protocol does not know.
EXTRA = "extra"
# Added by a release export; ignored on import (it is recomputed when a release is frozen).
EXPORT_ONLY_KEYS = ("resolved",)
ID_MAX = 200
SPLIT_RE = re.compile(r"^[A-Za-z0-9_.-]{1,50}$")


@dataclass(slots=True)
class CheckedItem:
    """A valid line: the payload to store (protocol fields only) and its bookkeeping."""

    external_id: str
    payload: dict[str, Any]
    split: str
    tags: list[str]
    complete: bool
    # (payload field, relative path, "image" | "video") for every media reference, in field order.
    media_paths: list[tuple[str, str, str]] = field(default_factory=list)
    gold: bool = False


def _stored_form(proto: Protocol):
    """Rewrites a valid payload's values into the stored form: a known QA answer as
    annotation.canonical stores it ("b" -> "B", ["C", "A"] -> ["A", "C"]), expected scores in
    criteria order."""
    # Expected scores (a rating protocol's gold answer) are stored in criteria order; another form's
    # gold answer (e.g. a pairwise form's better side) is stored as given.
    gold_answer = tuple(proto.item_fields.gold_answer) if proto.workflow == "rating" else ()
    answers = "answer" in proto.item_fields.labels

    def rewrite(payload: dict[str, Any]) -> None:
        if answers and payload.get("answer") is not None:
            payload["answer"] = canonical.payload_answer(proto.name, payload)
        for name in gold_answer:
            if payload.get(name) is not None:
                payload[name] = fields.ordered_scores(payload[name], proto.criteria)

    return rewrite


# Per protocol object, what `_check_valid` walks: (required (name, check) pairs, allowed keys,
# optional and label checks by key, label names, labels required of a complete item, cross check,
# rewrite into the stored form, media fields, gold answer fields, every allowed key -> its check
# or None, the rewrite again or None where it changes nothing). Built on first use, so the
# registry as it is then (a test's own protocols too) is what counts.
_compiled: dict[Protocol, tuple] = {}
# What `_check_valid` finds for a key the protocol does not know (kept in extra, or strict: refused).
_UNKNOWN = object()


def _compile(protocol: str) -> tuple:
    proto = registry.get(protocol)
    table = _compiled.get(proto)
    if table is None:
        spec = proto.item_fields
        allowed = frozenset(spec.all_fields | set(COMMON_KEYS) | set(EXPORT_ONLY_KEYS))
        others = {**spec.optional, **spec.labels, **spec.gold_answer}
        rewrite = _stored_form(proto)
        rewrites = "answer" in spec.labels or (proto.workflow == "rating" and bool(spec.gold_answer))
        table = _compiled[proto] = (
            tuple(spec.required.items()),
            allowed,
            others,
            tuple(spec.labels),
            spec.labels_required,
            spec.cross,
            rewrite,
            tuple(proto.media_fields.items()),
            tuple(spec.gold_answer),
            {key: others.get(key) for key in allowed},
            rewrite if rewrites else None,
        )
    return table


_split_match = SPLIT_RE.match


def check_tables(protocol: str) -> tuple:
    """The protocol's tables that `check_item` walks, for an import to look up once and pass to
    every line's `check_item(..., tables=)` (looking them up reads Django's settings: about a
    microsecond a line)."""
    return _compile(protocol)


def check_item(
    protocol: str, obj: Any, *, verified: bool = False, strict: bool = False, tables: tuple | None = None
) -> CheckedItem | list[FieldError]:
    """Validate one decoded JSON line; return the checked item or every error found.

    A valid line takes `_check_valid`, which does the same checks with per-protocol tables built
    once and gives up at the first doubt; the line then takes `_check_item_full`, which names every
    error. Either way the same lines are accepted, with the same result. `tables`: the protocol's
    `check_tables`, when the caller has them.
    """
    if type(obj) is dict:
        checked = _check_valid(tables if tables is not None else _compile(protocol), obj, verified, strict)
        if checked is not None:
            return checked
    return _check_item_full(protocol, obj, verified=verified, strict=strict)


def _check_valid(compiled: tuple, obj: dict[str, Any], verified: bool, strict: bool) -> CheckedItem | None:
    """`_check_item_full` for a line without errors: the same CheckedItem, or None at any error."""
    required, _allowed, _others, labels, labels_required, cross, _, media_fields, gold_answer, keyed, canon = compiled
    get = obj.get
    external_id = get("id")
    if (
        type(external_id) is not str
        or not 0 < len(external_id) <= ID_MAX
        or external_id[0].isspace()
        or external_id[-1].isspace()
    ):
        return None
    split = get("split", "test")
    if split != "test" and (type(split) is not str or not _split_match(split)):
        return None
    tags = get("tags")
    if tags is None:
        if "tags" in obj:
            return None
        tags = []
    elif type(tags) is not list:
        return None
    else:
        for t in tags:
            if type(t) is not str or not t.strip():
                return None
        tags = list(tags)
    gold = get("gold", False)
    if gold is not False and gold is not True:
        return None
    payload: dict[str, Any] = {}
    extra: dict[str, Any] | None = None
    try:
        for name, check in required:
            value = get(name)
            if value is None:
                return None
            payload[name] = check(value)
        for key, value in obj.items():
            check = keyed.get(key, _UNKNOWN)
            if check is None:  # a common or required key, checked above
                continue
            if check is not _UNKNOWN:
                if value is not None:
                    payload[key] = check(value)
                continue
            if strict:
                return None
            if extra is None:
                extra = {}
            extra[key] = value
    except fields.Invalid:
        return None
    if extra is not None:
        extra = _kept(extra)
        if extra is None:
            return None
        if extra:
            payload[EXTRA] = extra
    complete = False
    for name in labels:
        if get(name) is not None:
            complete = True
            break
    if complete or (verified and labels):
        for name in labels_required:
            if get(name) is None:
                return None
    if cross is not None and cross(payload):
        return None
    if canon is not None:
        canon(payload)
    known = complete
    for name in gold_answer:
        if name in payload:
            if not gold:
                return None
            known = True
    if gold and not known:
        return None
    media: list[tuple[str, str, str]] = []
    for name, kind in media_fields:
        if name not in payload:  # optional media (a protocol showing videos or images)
            continue
        if kind == "images":
            media.extend([(name, p, "image") for p in payload[name]])
        else:
            media.append((name, payload[name], kind))
    return CheckedItem(external_id, payload, split, tags, complete, media, gold)


def _check_item_full(
    protocol: str, obj: Any, *, verified: bool = False, strict: bool = False
) -> CheckedItem | list[FieldError]:
    """The complete check of one line, naming every error (see `check_item`)."""
    if not isinstance(obj, dict):
        return [FieldError("-", "a line must be a JSON object")]
    proto = registry.get(protocol)
    spec = proto.item_fields
    errors: list[FieldError] = []

    external_id = obj.get("id")
    if isinstance(external_id, int) and not isinstance(external_id, bool):
        errors.append(FieldError("id", "must be a string (quote numeric ids)"))
    elif not isinstance(external_id, str) or not external_id.strip():
        errors.append(FieldError("id", "required, a non-empty string"))
    elif len(external_id) > ID_MAX or external_id != external_id.strip():
        errors.append(FieldError("id", f"at most {ID_MAX} characters, no surrounding spaces"))

    split = obj.get("split", "test")
    if split != "test" and (not isinstance(split, str) or not SPLIT_RE.match(split)):
        errors.append(FieldError("split", "must be a short name of letters, digits, '_', '.', '-'"))
    tags = obj.get("tags", [])
    if not isinstance(tags, list) or (tags and not all(isinstance(t, str) and t.strip() for t in tags)):
        errors.append(FieldError("tags", "must be a list of non-empty strings"))
    gold = obj.get("gold", False)
    gold_valid = isinstance(gold, bool)
    if not gold_valid:
        errors.append(FieldError("gold", "must be true or false"))
        gold = False

    payload: dict[str, Any] = {}
    before = len(errors)
    for name, check in spec.required.items():
        value = obj.get(name)
        if value is None:
            errors.append(FieldError(name, "required"))
            continue
        try:
            payload[name] = check(value)
        except fields.Invalid as exc:
            errors.append(FieldError(name, exc.reason))
    core_valid = len(errors) == before  # the required fields: what the checks across fields rest on
    # One walk over the line's keys: unknown ones kept (or, strict, errors), the others checked.
    _, allowed, others, *_ = _compile(protocol)
    extra: dict[str, Any] = {}
    for key, value in obj.items():
        check = others.get(key)
        if check is not None:
            if value is not None:
                try:
                    payload[key] = check(value)
                except fields.Invalid as exc:
                    errors.append(FieldError(key, exc.reason))
        elif key not in allowed:
            if strict:
                errors.append(FieldError(key, f"unknown field for protocol {protocol} (refused by --strict)"))
            else:
                extra[key] = value
    if extra:
        errors.extend(_extra_errors(extra))

    present_labels = [n for n in spec.labels if obj.get(n) is not None] if spec.labels else []
    complete = bool(present_labels)
    if present_labels or (verified and spec.labels):
        for name in spec.labels_required:
            if obj.get(name) is None:
                why = (
                    "required for a verified import"
                    if verified and not present_labels
                    else "required for a labeled item"
                )
                errors.append(FieldError(name, why))
    if spec.cross and core_valid:
        # Run on the fields that passed too, so a line's errors come in one round; a finding about
        # a field already named is left out (it follows from that field's own error).
        named = {e.field for e in errors}
        errors.extend(e for e in spec.cross(payload) if e.field not in named)
    gold_given = [n for n in spec.gold_answer if obj.get(n) is not None]
    if gold_given and not gold and gold_valid:  # (an invalid gold is named above)
        errors.extend(
            FieldError(n, f'only a gold item carries {n} (its known answer): add "gold": true, or drop {n}')
            for n in gold_given
        )
    if gold and not complete and not gold_given:
        if spec.gold_answer:
            errors.append(
                FieldError(
                    "gold",
                    f"a gold {protocol} item needs its known answer: give {', '.join(spec.gold_answer)} "
                    "too, or drop gold",
                )
            )
        else:
            errors.append(
                FieldError(
                    "gold",
                    "a gold item needs its known answer; this item is raw "
                    f"(give {', '.join(spec.labels_required)} too, or drop gold)",
                )
            )
    if errors:
        return errors
    _compile(protocol)[6](payload)
    if extra and (kept := _kept(extra)):
        payload[EXTRA] = kept

    media: list[tuple[str, str, str]] = []
    for name, kind in proto.media_fields.items():
        if name not in payload:  # optional media (a protocol showing videos or images)
            continue
        if kind == "images":
            media.extend((name, p, "image") for p in payload[name])
        else:
            media.append((name, payload[name], kind))
    return CheckedItem(
        external_id=external_id,
        payload=payload,
        split=split,
        tags=list(tags),
        complete=complete,
        media_paths=media,
        gold=gold,
    )


def _kept(extra: dict[str, Any]) -> dict[str, Any] | None:
    """The payload's ``extra``: the line's unknown fields merged into the object it carries as
    ``extra`` (None when that is not an object or repeats one of them: `_extra_errors` says so)."""
    own = extra.pop(EXTRA, None)
    if own is None:
        return extra
    if type(own) is not dict or any(key in own for key in extra):
        return None
    return {**own, **extra}


def _extra_errors(extra: dict[str, Any]) -> list[FieldError]:
    own = extra.get(EXTRA)
    if own is None:
        return []
    if not isinstance(own, dict):
        return [FieldError(EXTRA, "must be an object of the fields kept from the source")]
    return [
        FieldError(key, "given both at the top level and inside extra; keep one")
        for key in extra
        if key != EXTRA and key in own
    ]
