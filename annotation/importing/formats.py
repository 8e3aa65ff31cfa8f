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
annotation queue, whose known answer scores annotators. Only a complete item has a known
answer, so gold on a raw item (and on any OSCBench item) is refused.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from annotation.protocols import (
    BOX_OUTCOMES,
    LETTERS,
    M3VERSE_CAPABILITIES,
    MEDIA_FIELDS,
    OSC_CRITERIA,
    OSC_NULLABLE,
    PROTOCOLS,
    QA_FLAGS,
    STATUS_CATEGORIES,
    STATUS_DIFFERENCES,
    VISUALTRANS_SUBTASKS,
)

# Keys every protocol accepts besides its own fields (none of them goes into the payload).
COMMON_KEYS = ("id", "split", "tags", "gold")
# Added by a release export; ignored on import (it is recomputed when a release is frozen).
EXPORT_ONLY_KEYS = ("resolved",)
ID_MAX = 200
SPLIT_RE = re.compile(r"^[A-Za-z0-9_.-]{1,50}$")
OSC_SCENARIOS = ("regular", "novel", "compositional")
VISUALTRANS_FORMATS = ("choice", "count", "set")
M3VERSE_CONTEXTS = ("intra", "inter")


@dataclass(frozen=True)
class FieldError:
    field: str
    reason: str


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


class _Invalid(Exception):
    def __init__(self, reason: str):
        self.reason = reason


# --- value checks: each returns the value or raises _Invalid ------------------------------------


def _text(value: Any, *, max_len: int = 2000) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Invalid("must be a non-empty string")
    if len(value) > max_len:
        raise _Invalid(f"longer than {max_len} characters")
    return value


def _choice(options: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in options:
            raise _Invalid(f"must be one of {', '.join(options)}")
        return value

    return check


def _media_path(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _Invalid("must be a relative media path (a non-empty string)")
    if len(value) > 500:
        raise _Invalid("path longer than 500 characters")
    return value


def _image_list(value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) < 2:
        raise _Invalid("must be a list of at least 2 image paths (initial, final, …)")
    return [_media_path(v) for v in value]


def _text_list(*, exactly: int | None = None, min_len: int = 0) -> Callable[[Any], list[str]]:
    def check(value: Any) -> list[str]:
        if not isinstance(value, list):
            raise _Invalid("must be a list of strings")
        if exactly is not None and len(value) != exactly:
            raise _Invalid(f"must hold exactly {exactly} strings, got {len(value)}")
        if len(value) < min_len:
            raise _Invalid(f"must hold at least {min_len} strings")
        for v in value:
            _text(v)
        return value

    return check


def _bbox(value: Any) -> Any:
    if isinstance(value, str):
        if value not in BOX_OUTCOMES:
            raise _Invalid(f"must be [x, y, width, height] or one of {', '.join(BOX_OUTCOMES)}")
        return value
    if not isinstance(value, list) or len(value) != 4:
        raise _Invalid("must be [x, y, width, height] in image pixels")
    for v in value:
        if type(v) not in (int, float) or not math.isfinite(v):  # type(): bool is not a coordinate
            raise _Invalid("must be [x, y, width, height] in image pixels")
    x, y, w, h = value
    if x < 0 or y < 0 or w <= 0 or h <= 0:
        raise _Invalid("needs x, y >= 0 and width, height > 0")
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Invalid("must be true or false")
    return value


def _subset(options: tuple[str, ...]) -> Callable[[Any], list[str]]:
    def check(value: Any) -> list[str]:
        if not isinstance(value, list) or not value:
            raise _Invalid(f"must be a non-empty list drawn from {', '.join(options)}")
        bad = [v for v in value if v not in options]
        if bad:
            raise _Invalid(f"unknown value {bad[0]!r}; allowed: {', '.join(options)}")
        if len(set(value)) != len(value):
            raise _Invalid("lists a value twice")
        return value

    return check


def _options(value: Any) -> list[str]:
    if not isinstance(value, list) or len(value) < 2:
        raise _Invalid("must be a list of at least 2 option strings (A = first)")
    if len(value) > len(LETTERS):
        raise _Invalid(f"at most {len(LETTERS)} options")
    for v in value:
        _text(v)
    return value


_any_text = _text  # any non-empty string of the default maximum length


@dataclass(frozen=True)
class ProtocolSpec:
    required: dict[str, Callable[[Any], Any]]
    optional: dict[str, Callable[[Any], Any]]
    labels: dict[str, Callable[[Any], Any]]
    labels_required: tuple[str, ...]
    # Checks across fields of a complete item: returns errors.
    cross: Callable[[dict[str, Any]], list[FieldError]] | None = None

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
    return []


SPECS: dict[str, ProtocolSpec] = {
    "status": ProtocolSpec(
        required={"image_a": _media_path, "image_b": _media_path},
        optional={},
        labels={
            "state_a": _any_text,
            "state_b": _any_text,
            "change": _any_text,
            "change_distractors": _text_list(exactly=3),
            "category": _choice(STATUS_CATEGORIES),
            "difference": _choice(STATUS_DIFFERENCES),
        },
        labels_required=("state_a", "state_b", "change", "change_distractors", "category", "difference"),
    ),
    "changeit": ProtocolSpec(
        required={"image": _media_path, "object": _any_text, "state": _any_text},
        optional={"distractors": _text_list()},
        labels={"bbox": _bbox},
        labels_required=("bbox",),
    ),
    # A QA item's question (with its format and options) defines the task, so even a raw item
    # carries it; the label is the answer (plus the metadata scoring needs).
    "visualtrans": ProtocolSpec(
        required={"images": _image_list, "question": _any_text, "format": _choice(VISUALTRANS_FORMATS)},
        optional={"scene": _any_text, "options": _options, "subtask": _choice(VISUALTRANS_SUBTASKS)},
        labels={"answer": lambda v: v},  # checked against format in _visualtrans_cross
        labels_required=("answer", "subtask"),
        cross=_visualtrans_cross,
    ),
    "m3verse": ProtocolSpec(
        required={"video_before": _media_path, "video_after": _media_path, "question": _any_text, "options": _options},
        optional={
            "context": _choice(M3VERSE_CONTEXTS),
            "capabilities": _subset(M3VERSE_CAPABILITIES),
            "hallucination": _boolean,
        },
        labels={"answer": lambda v: v},  # checked against options in _m3verse_cross
        labels_required=("answer", "context", "capabilities"),
        cross=_m3verse_cross,
    ),
    "oscbench": ProtocolSpec(
        required={"video": _media_path, "prompt": _any_text},
        optional={
            "generator": _any_text,
            "scenario": _choice(OSC_SCENARIOS),
            "action": _any_text,
            "action_category": _any_text,
            "object": _any_text,
            "object_category": _any_text,
        },
        labels={},
        labels_required=(),
    ),
}
assert set(SPECS) == set(PROTOCOLS)
_ALL_FIELDS = {id(spec): set(spec.required) | set(spec.optional) | set(spec.labels) for spec in SPECS.values()}
_ALLOWED_KEYS = {p: frozenset(_ALL_FIELDS[id(spec)] | set(COMMON_KEYS) | set(EXPORT_ONLY_KEYS)) for p, spec in SPECS.items()}
_OTHER_CHECKS = {p: {**spec.optional, **spec.labels} for p, spec in SPECS.items()}
_split_match = SPLIT_RE.match
# Per protocol, what `_check_valid` walks: (required (name, check) pairs, allowed keys, optional
# and label checks by key, label names, labels required of a complete item, cross check, media fields).
_COMPILED = {
    p: (
        tuple(spec.required.items()),
        _ALLOWED_KEYS[p],
        _OTHER_CHECKS[p],
        tuple(spec.labels),
        spec.labels_required,
        spec.cross,
        tuple(MEDIA_FIELDS[p].items()),
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
    required, allowed, others, labels, labels_required, cross, media_fields = compiled
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
    except _Invalid:
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
    if gold and not complete:
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
    if not isinstance(gold, bool):
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
        except _Invalid as exc:
            errors.append(FieldError(name, exc.reason))
    # One walk over the line's keys: unknown ones are errors, optional and label fields checked.
    allowed, others = _ALLOWED_KEYS[protocol], _OTHER_CHECKS[protocol]
    for key, value in obj.items():
        check = others.get(key)
        if check is not None:
            if value is not None:
                try:
                    payload[key] = check(value)
                except _Invalid as exc:
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
    if gold and not complete:
        if not spec.labels:
            errors.append(FieldError("gold", f"{protocol} items carry no known answer, so they cannot be gold"))
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


def check_media_path(relpath: str) -> str | None:
    """Reason a relative media path is refused before touching the disk, or None when fine."""
    if "\x00" in relpath:
        return "path contains a NUL byte"
    if relpath.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", relpath):
        return "absolute paths are refused; give a path relative to the media root"
    parts = re.split(r"[/\\]", relpath)
    if any(part == ".." for part in parts):
        return "path leaves the media root ('..')"
    return None


def check_box_inside(bbox: Any, width: int | None, height: int | None) -> str | None:
    """A box must lie inside its image (boxes are stored clipped to the image)."""
    if not isinstance(bbox, list) or width is None or height is None:
        return None
    x, y, w, h = bbox
    eps = 1e-6
    if x + w > width + eps or y + h > height + eps:
        return f"box [{x}, {y}, {w}, {h}] leaves the {width}×{height} image"
    return None


# --- human annotations from elsewhere ---------------------------------------------------------


@dataclass
class CheckedAnnotation:
    item: str
    rater: str
    result: dict[str, Any]


def check_rating(obj: dict[str, Any]) -> CheckedAnnotation | list[FieldError]:
    """`{"item", "rater", "scores": {criterion: 1..5 or null}}` with every OSCBench criterion."""
    errors: list[FieldError] = []
    for key in obj:
        if key not in ("item", "rater", "scores"):
            errors.append(FieldError(key, "unknown field for a rating"))
    item, rater = obj.get("item"), obj.get("rater")
    if not isinstance(item, str) or not item:
        errors.append(FieldError("item", "required, the item id (a string)"))
    if not isinstance(rater, str) or not rater.strip() or len(rater) > 200:
        errors.append(FieldError("rater", "required, a rater id string of at most 200 characters"))
    scores = obj.get("scores")
    if not isinstance(scores, dict):
        errors.append(FieldError("scores", "required, an object criterion -> 1..5 or null"))
    else:
        for key in scores:
            if key not in OSC_CRITERIA:
                errors.append(FieldError(f"scores.{key}", f"unknown criterion; allowed: {', '.join(OSC_CRITERIA)}"))
        for criterion in OSC_CRITERIA:
            if criterion not in scores:
                errors.append(FieldError(f"scores.{criterion}", "missing (give null for N/A where allowed)"))
                continue
            value = scores[criterion]
            if value is None:
                if criterion not in OSC_NULLABLE:
                    errors.append(FieldError(f"scores.{criterion}", "may not be null (only subject and scene may be N/A)"))
            elif not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 5:
                errors.append(FieldError(f"scores.{criterion}", "must be an integer 1..5"))
    if errors:
        return errors
    return CheckedAnnotation(item=item, rater=rater, result={"scores": {c: scores[c] for c in OSC_CRITERIA}})


def check_qa_answer(obj: dict[str, Any], protocol: str, item_payload: dict[str, Any] | None) -> CheckedAnnotation | list[FieldError]:
    """`{"item", "annotator", "answer", "flags": [...]}`; the answer is checked against the item.

    A null answer is allowed only together with at least one flag (e.g. insufficient_evidence).
    """
    errors: list[FieldError] = []
    for key in obj:
        if key not in ("item", "annotator", "answer", "flags"):
            errors.append(FieldError(key, "unknown field for a QA answer"))
    item, annotator = obj.get("item"), obj.get("annotator")
    if not isinstance(item, str) or not item:
        errors.append(FieldError("item", "required, the item id (a string)"))
    if not isinstance(annotator, str) or not annotator.strip() or len(annotator) > 200:
        errors.append(FieldError("annotator", "required, an annotator id string of at most 200 characters"))
    flags = obj.get("flags", [])
    if not isinstance(flags, list) or any(f not in QA_FLAGS for f in flags) or len(set(flags)) != len(flags):
        errors.append(FieldError("flags", f"must be a list drawn from {', '.join(QA_FLAGS)}, each once"))
    answer = obj.get("answer")
    if answer is None:
        if not flags:
            errors.append(FieldError("answer", "required (null only together with a flag)"))
    elif item_payload is not None:
        reason = _qa_answer_reason(protocol, answer, item_payload)
        if reason:
            errors.append(FieldError("answer", reason))
    if errors:
        return errors
    return CheckedAnnotation(item=item, rater=annotator, result={"answer": answer, "flags": list(flags)})


def _qa_answer_reason(protocol: str, answer: Any, payload: dict[str, Any]) -> str | None:
    options = payload.get("options") or []
    allowed = LETTERS[: len(options)]
    if protocol == "m3verse":
        letters = [a.strip() for a in answer.split(",")] if isinstance(answer, str) else answer
        if not isinstance(letters, list) or not letters or not all(isinstance(a, str) and a in allowed for a in letters):
            return f"must be a list of option letters in A–{allowed[-1] if allowed else 'A'}"
        return None
    fmt = payload.get("format")
    if fmt == "choice":
        if not isinstance(answer, str) or answer.strip().upper() not in allowed:
            return f"must be one option letter in A–{allowed[-1] if allowed else 'A'}"
    elif fmt == "count":
        if not isinstance(answer, int) or isinstance(answer, bool) or answer < 0:
            return "must be a non-negative integer"
    elif fmt == "set":
        if not isinstance(answer, list) or not all(isinstance(a, str) for a in answer):
            return "must be a list of strings"
    return None


def extract_item(protocol: str, obj: dict[str, Any]) -> CheckedItem:
    """The write pass's cheap twin of `check_item` for a line that already passed it.

    Pass 1 refused unknown keys, so the payload is every key except id/split/tags/resolved whose
    value is not null — exactly what `check_item` keeps.
    """
    spec = SPECS[protocol]
    skip = set(COMMON_KEYS) | set(EXPORT_ONLY_KEYS)
    payload = {k: v for k, v in obj.items() if k not in skip and v is not None}
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
