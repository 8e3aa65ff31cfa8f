"""Per-protocol validation of one item line of the PROTOCOLS.md interchange format.

Plain Python (no Django): a line goes in as a decoded JSON object, a `CheckedItem` or a list of
`FieldError`s comes out. Media files are not opened here; the importer checks the paths that
`CheckedItem.media_paths` lists.

Every protocol splits its fields in three groups:
- `required`: needed even by a raw item (the media and whatever defines the task);
- `optional`: metadata that may be absent;
- `labels`: what annotators produce. An item carrying none of them is *raw* (status pending),
  one carrying them is *complete* (status annotated, or verified with ``--verified``); a complete
  item must carry every field of `labels_required`.

OSCBench items have no label fields (their labels are ratings, imported with
``import_annotations``), so they arrive pending unless imported as verified.

Every protocol also accepts ``"gold": true`` (default false): the item is a gold item of the
annotation queue, whose known answer scores annotators (annotation.agreement.gold_correct).
Only an item with a known answer may be gold, so gold on a raw item is refused. The known answer
is the complete item's labels, except for OSCBench, whose labels are ratings: a gold OSCBench
item gives its expected rating in ``gold_scores`` ({criterion: 1..5, or null where N/A is
expected}, any non-empty subset of the criteria; a rating within
protocols.RATING_GOLD_TOLERANCE of each is right). ``gold_scores`` is a gold item's answer
only: on an item that is not gold it is refused.

A known QA answer is stored in annotation.canonical's form (a raw ``"b"`` becomes ``"B"``), the
form a reviewer's verification writes. Single field values are checked in field_checks.py; lines
of annotations made elsewhere in annotation_lines.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from annotation import canonical
from annotation.protocols import (
    LETTERS,
    M3VERSE_CAPABILITIES,
    MEDIA_FIELDS,
    OSC_SCENARIOS,
    PROTOCOLS,
    QA_FORMATS,
    STATUS_CATEGORIES,
    STATUS_DIFFERENCES,
    VISUALTRANS_SUBTASKS,
)

from . import field_checks as fields
from .field_checks import FieldError

# Keys every protocol accepts besides its own fields (none of them goes into the payload).
COMMON_KEYS = ("id", "split", "tags", "gold")
# Added by a release export; ignored on import (it is recomputed when a release is frozen).
EXPORT_ONLY_KEYS = ("resolved",)
ID_MAX = 200
SPLIT_RE = re.compile(r"^[A-Za-z0-9_.-]{1,50}$")
M3VERSE_CONTEXTS = ("intra", "inter")


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


@dataclass(frozen=True)
class ProtocolSpec:
    required: dict[str, Callable[[Any], Any]]
    optional: dict[str, Callable[[Any], Any]]
    labels: dict[str, Callable[[Any], Any]]
    labels_required: tuple[str, ...]
    # Checks across fields of a complete item: returns errors.
    cross: Callable[[dict[str, Any]], list[FieldError]] | None = None
    # Rewrites a valid payload's values into the stored form (QA answers: annotation.canonical).
    canonical: Callable[[dict[str, Any]], None] | None = None
    # Fields holding a gold item's known answer where the labels are none (OSCBench's expected
    # scores): allowed, and then required, only on a gold item; they do not make an item complete.
    gold_answer: dict[str, Callable[[Any], Any]] = field(default_factory=dict)

    @property
    def all_fields(self) -> set[str]:
        return _ALL_FIELDS[id(self)]


# Cross-field checks run on every item, raw or complete; the answer is checked when present.
def _visualtrans_cross(p: dict[str, Any]) -> list[FieldError]:
    fmt, answer = p.get("format"), p.get("answer")
    if fmt == "choice":
        options = p.get("options")
        if options is None:
            return [FieldError("options", "required when format is choice")]
        if answer is None:
            return []
        if not isinstance(answer, str) or len(answer.strip()) != 1 or answer.strip().upper() not in LETTERS[: len(options)]:
            return [FieldError("answer", f"must be one option letter A–{LETTERS[len(options) - 1]}")]
    elif answer is None:
        return []
    elif fmt == "count":
        if not isinstance(answer, int) or isinstance(answer, bool) or answer < 0:
            return [FieldError("answer", "must be a non-negative integer when format is count")]
    elif fmt == "set":
        if not isinstance(answer, list) or not answer or not all(isinstance(a, str) and a.strip() for a in answer):
            return [FieldError("answer", "must be a non-empty list of strings when format is set")]
    return []


def _qa_answer_canonical(protocol: str) -> Callable[[dict[str, Any]], None]:
    """The item's known answer as annotation.canonical stores it ("b" -> "B", ["C", "A"] -> ["A", "C"])."""

    def rewrite(payload: dict[str, Any]) -> None:
        if payload.get("answer") is not None:
            payload["answer"] = canonical.payload_answer(protocol, payload)

    return rewrite


def _oscbench_canonical(payload: dict[str, Any]) -> None:
    if payload.get("gold_scores") is not None:
        payload["gold_scores"] = canonical.gold_scores(payload["gold_scores"])


def _m3verse_cross(p: dict[str, Any]) -> list[FieldError]:
    options, answer = p.get("options") or [], p.get("answer")
    allowed = LETTERS[: len(options)]
    if answer is None:
        return []
    if not isinstance(answer, list) or not answer:
        return [FieldError("answer", "must be a non-empty list of option letters")]
    if not all(isinstance(a, str) and a in allowed for a in answer):
        return [FieldError("answer", f"letters must lie in A–{allowed[-1] if allowed else 'A'}")]
    if len(set(answer)) != len(answer):
        return [FieldError("answer", "lists a letter twice")]
    if p.get("multiple") is False and len(answer) != 1:
        return [FieldError("answer", f"lists {len(answer)} letters but the item says multiple: false (one correct option)")]
    return []


SPECS: dict[str, ProtocolSpec] = {
    "status": ProtocolSpec(
        required={"image_a": fields.media_path, "image_b": fields.media_path},
        optional={},
        labels={
            "state_a": fields.any_text,
            "state_b": fields.any_text,
            "change": fields.any_text,
            "change_distractors": fields.text_list(exactly=3),
            "category": fields.choice(STATUS_CATEGORIES),
            "difference": fields.choice(STATUS_DIFFERENCES),
        },
        labels_required=("state_a", "state_b", "change", "change_distractors", "category", "difference"),
    ),
    "changeit": ProtocolSpec(
        required={"image": fields.media_path, "object": fields.any_text, "state": fields.any_text},
        optional={"distractors": fields.text_list()},
        labels={"bbox": fields.bbox},
        labels_required=("bbox",),
    ),
    # A QA item's question (with its format and options) defines the task, so even a raw item
    # carries it; the label is the answer (plus the metadata scoring needs).
    "visualtrans": ProtocolSpec(
        required={"images": fields.image_list, "question": fields.any_text, "format": fields.choice(QA_FORMATS)},
        optional={"scene": fields.any_text, "options": fields.options, "subtask": fields.choice(VISUALTRANS_SUBTASKS)},
        labels={"answer": lambda v: v},  # checked against format in _visualtrans_cross
        labels_required=("answer", "subtask"),
        cross=_visualtrans_cross,
        canonical=_qa_answer_canonical("visualtrans"),
    ),
    "m3verse": ProtocolSpec(
        required={
            "video_before": fields.media_path,
            "video_after": fields.media_path,
            "question": fields.any_text,
            "options": fields.options,
        },
        optional={
            "context": fields.choice(M3VERSE_CONTEXTS),
            "capabilities": fields.subset(M3VERSE_CAPABILITIES),
            "hallucination": fields.boolean,
            # One or several correct options: the item's own fact, given on raw items too (the
            # annotator's form follows it; never derived from the answer). Absent: project setting.
            "multiple": fields.boolean,
        },
        labels={"answer": lambda v: v},  # checked against options in _m3verse_cross
        labels_required=("answer", "context", "capabilities"),
        cross=_m3verse_cross,
        canonical=_qa_answer_canonical("m3verse"),
    ),
    "oscbench": ProtocolSpec(
        required={"video": fields.media_path, "prompt": fields.any_text},
        optional={
            "generator": fields.any_text,
            "scenario": fields.choice(OSC_SCENARIOS),
            "action": fields.any_text,
            "action_category": fields.any_text,
            "object": fields.any_text,
            "object_category": fields.any_text,
        },
        labels={},
        labels_required=(),
        canonical=_oscbench_canonical,
        gold_answer={"gold_scores": fields.gold_scores},
    ),
}
assert set(SPECS) == set(PROTOCOLS)
_ALL_FIELDS = {
    id(spec): set(spec.required) | set(spec.optional) | set(spec.labels) | set(spec.gold_answer)
    for spec in SPECS.values()
}
_ALLOWED_KEYS = {p: frozenset(_ALL_FIELDS[id(spec)] | set(COMMON_KEYS) | set(EXPORT_ONLY_KEYS)) for p, spec in SPECS.items()}
_OTHER_CHECKS = {p: {**spec.optional, **spec.labels, **spec.gold_answer} for p, spec in SPECS.items()}
_split_match = SPLIT_RE.match
# Per protocol, what `_check_valid` walks: (required (name, check) pairs, allowed keys, optional
# and label checks by key, label names, labels required of a complete item, cross check, rewrite
# into the stored form, media fields, gold answer fields).
_COMPILED = {
    p: (
        tuple(spec.required.items()),
        _ALLOWED_KEYS[p],
        _OTHER_CHECKS[p],
        tuple(spec.labels),
        spec.labels_required,
        spec.cross,
        spec.canonical,
        tuple(MEDIA_FIELDS[p].items()),
        tuple(spec.gold_answer),
    )
    for p, spec in SPECS.items()
}


def check_item(protocol: str, obj: Any, *, verified: bool = False) -> CheckedItem | list[FieldError]:
    """Validate one decoded JSON line; return the checked item or every error found.

    A valid line takes `_check_valid`, which does the same checks with per-protocol tables built
    once and gives up at the first doubt; the line then takes `_check_item_full`, which names every
    error. Either way the same lines are accepted, with the same result.
    """
    if type(obj) is dict:
        checked = _check_valid(_COMPILED[protocol], obj, verified)
        if checked is not None:
            return checked
    return _check_item_full(protocol, obj, verified=verified)


def _check_valid(compiled: tuple, obj: dict[str, Any], verified: bool) -> CheckedItem | None:
    """`_check_item_full` for a line without errors: the same CheckedItem, or None at any error."""
    required, allowed, others, labels, labels_required, cross, canon, media_fields, gold_answer = compiled
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
    try:
        for name, check in required:
            value = get(name)
            if value is None:
                return None
            payload[name] = check(value)
        for key, value in obj.items():
            check = others.get(key)
            if check is not None:
                if value is not None:
                    payload[key] = check(value)
            elif key not in allowed:
                return None
    except fields.Invalid:
        return None
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
        if kind == "images":
            media.extend([(name, p, "image") for p in payload[name]])
        else:
            media.append((name, payload[name], kind))
    return CheckedItem(external_id, payload, split, tags, complete, media, gold)


def _check_item_full(protocol: str, obj: Any, *, verified: bool = False) -> CheckedItem | list[FieldError]:
    """The complete check of one line, naming every error (see `check_item`)."""
    if not isinstance(obj, dict):
        return [FieldError("-", "a line must be a JSON object")]
    spec = SPECS[protocol]
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
    for name, check in spec.required.items():
        value = obj.get(name)
        if value is None:
            errors.append(FieldError(name, "required"))
            continue
        try:
            payload[name] = check(value)
        except fields.Invalid as exc:
            errors.append(FieldError(name, exc.reason))
    # One walk over the line's keys: unknown ones are errors, optional and label fields checked.
    allowed, others = _ALLOWED_KEYS[protocol], _OTHER_CHECKS[protocol]
    for key, value in obj.items():
        check = others.get(key)
        if check is not None:
            if value is not None:
                try:
                    payload[key] = check(value)
                except fields.Invalid as exc:
                    errors.append(FieldError(key, exc.reason))
        elif key not in allowed:
            errors.append(FieldError(key, f"unknown field for protocol {protocol}"))

    present_labels = [n for n in spec.labels if obj.get(n) is not None] if spec.labels else []
    complete = bool(present_labels)
    if present_labels or (verified and spec.labels):
        for name in spec.labels_required:
            if obj.get(name) is None:
                why = "required for a verified import" if verified and not present_labels else "required for a labeled item"
                errors.append(FieldError(name, why))
    if not errors and spec.cross:
        errors.extend(spec.cross(payload))
    gold_given = [n for n in spec.gold_answer if obj.get(n) is not None]
    if gold_given and not gold and gold_valid:  # (an invalid gold is named above)
        errors.extend(
            FieldError(n, f'only a gold item carries {n} (its known answer): add "gold": true, or drop {n}')
            for n in gold_given
        )
    if gold and not complete and not gold_given:
        if spec.gold_answer:
            errors.append(
                FieldError("gold", f"a gold {protocol} item needs its known answer: give {', '.join(spec.gold_answer)} "
                                   "too, or drop gold")
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
    if spec.canonical is not None:
        spec.canonical(payload)

    media: list[tuple[str, str, str]] = []
    for name, kind in MEDIA_FIELDS[protocol].items():
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


def extract_item(protocol: str, obj: dict[str, Any]) -> CheckedItem:
    """The write pass's cheap twin of `check_item` for a line that already passed it.

    Pass 1 refused unknown keys, so the payload is every key except id/split/tags/resolved whose
    value is not null — exactly what `check_item` keeps.
    """
    spec = SPECS[protocol]
    skip = set(COMMON_KEYS) | set(EXPORT_ONLY_KEYS)
    payload = {k: v for k, v in obj.items() if k not in skip and v is not None}
    if spec.canonical is not None:
        spec.canonical(payload)
    media: list[tuple[str, str, str]] = []
    for name, kind in MEDIA_FIELDS[protocol].items():
        if kind == "images":
            media.extend((name, p, "image") for p in payload[name])
        else:
            media.append((name, payload[name], kind))
    return CheckedItem(
        external_id=obj["id"],
        payload=payload,
        split=obj.get("split", "test"),
        tags=list(obj.get("tags", [])),
        complete=any(n in payload for n in spec.labels),
        media_paths=media,
        gold=obj.get("gold") is True,
    )
