"""The generic part of a StateLab lmms-eval task's `utils.py` (`export_release --format lmms-eval`).

The exporter (annotation/interchange/lmms_eval.py) writes this file into the task folder with the
protocol's own part appended (`protocols/<name>/lmms_utils.py`, its import of this module left
out), as one `utils.py` that lmms-eval loads by path (`!function utils.<name>` in the task YAML).
It must therefore stand alone: standard library and Pillow only, no StateLab import, and no
protocol named. Its answer parsing is a copy of StateLab's own (`protocols/kit/answers.py`:
parse_choice, parse_candidate_number, parse_letter_set, normalize_int, normalize_set), kept
identical by tests/annotation/test_lmms_eval_export.py, so that the score lmms-eval prints is the
score StateLab gives the same answers when the run's `--log_samples` file is imported back.

Every document carries `id` (the item's id in the release) and `query` (StateLab's query key),
`protocol`, `prompt` (the text shown to the model), `options`, `format`, `visuals` (media paths
relative to the task folder), `visual_kind` ("image" or "video"), `target` (the correct answer as
JSON) and `meta` (the item fields the breakdowns need, as JSON). lmms-eval 0.7 leaves `doc` out of
the `--log_samples` file; each sample carries `item`: {"id", "query"} instead (the `item` metric,
aggregated as the number of items).

Scoring (docs/protocols/<protocol>.md): a missing, empty or unparseable answer is wrong and counted
in `parse_failures`. Percentages are rounded half up to two decimals. What is particular to a
protocol is the part below marked "the protocol's part": the defaults there read and judge an
answer by the document's `format` and print question-weighted means; the protocol's lmms_utils.py,
appended after this file, defines again what its scoring needs (`METRICS` always).
"""

from __future__ import annotations

import json
import math
import os
import re
import string
from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
LETTERS = string.ascii_uppercase  # a copy: this file stands alone (see the module docstring)

# --- answer parsing: a copy of StateLab's protocols/kit/answers.py (kept identical by tests) --------

_WS = re.compile(r"\s+")
_PUNCT_EDGES = " \t\r\n.,;:!?\"'`()[]{}"


def normalize_text(value: Any) -> str:
    text = _WS.sub(" ", str(value)).strip().strip(_PUNCT_EDGES).strip()
    return text.casefold()


def normalize_set(value: Any) -> list[str] | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            try:
                loaded = json.loads(text)
            except ValueError:
                loaded = None
            if isinstance(loaded, list):
                return normalize_set(loaded)
            text = text[1:-1]
        parts: Iterable[Any] = text.split(",")
    elif isinstance(value, (list, tuple)):
        parts = value
    else:
        return None
    out = []
    for part in parts:
        if part is None or isinstance(part, (dict, list, tuple)):
            return None
        norm = normalize_text(part)
        if norm:
            out.append(norm)
    return sorted(out) or None


def normalize_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return int(value)
        return None
    if isinstance(value, str):
        text = value.strip()
        m = re.fullmatch(r"[+-]?\d+(?:\.0+)?", text)
        if m:
            return int(float(text)) if "." in text else int(text)
        found = re.findall(r"(?<![\w.])[+-]?\d+(?!\w|\.\d)", text)
        if len(set(found)) == 1:
            return int(found[0])
    return None


_LETTER_PATTERNS = (
    re.compile(r"answer\s*(?:is|:|-|=)?\s*(?:option\s*)?[\(\[]?\s*([A-Za-z])\s*[\)\]]?(?![A-Za-z])", re.I),
    re.compile(r"option\s*[\(\[]?([A-Za-z])[\)\]]?(?![A-Za-z])", re.I),
    re.compile(r"^\s*[\(\[]([A-Za-z])[\)\]]"),
    re.compile(r"^\s*([A-Za-z])(?:[\)\.:]|\s*$)"),
    re.compile(r"[\(\[]([A-Z])[\)\]]"),
)
_ALONE_AFTER = ".,;:!?)]}*_`\"'"


def normalize_letter(value: Any, n_options: int | None = None) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    allowed = LETTERS[:n_options] if n_options else LETTERS
    if len(text) == 1 and text.upper() in allowed:
        return text.upper()
    for pattern in _LETTER_PATTERNS:
        for m in pattern.finditer(text):
            letter = m.group(1)
            if letter.upper() in allowed and (letter.isupper() or _stands_alone(text, m.start(1), m.end(1))):
                return letter.upper()
    return None


def _stands_alone(text: str, start: int, end: int) -> bool:
    before = text[start - 1] if start > 0 else ""
    rest = text[end:].lstrip()
    if before in "([" and rest[:1] in (")", "]"):
        return True
    return rest == "" or rest[0] in _ALONE_AFTER


NOT_SHOWN = -1


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _word_spans(needle: str, text: str) -> list[tuple[int, int]]:
    spans = []
    start = text.find(needle)
    while start >= 0:
        end = start + len(needle)
        before_ok = start == 0 or not (_is_word_char(needle[0]) and _is_word_char(text[start - 1]))
        after_ok = end == len(text) or not (_is_word_char(needle[-1]) and _is_word_char(text[end]))
        if before_ok and after_ok:
            spans.append((start, end))
        start = text.find(needle, start + 1)
    return spans


def _named_text(norm: str, texts: Iterable[str]) -> str | None:
    found = {t: spans for t in set(texts) if t and (spans := _word_spans(t, norm))}
    if len(found) > 1:
        found = {
            t: spans
            for t, spans in found.items()
            if not all(
                any(u != t and us <= s and e <= ue for u, u_spans in found.items() for us, ue in u_spans)
                for s, e in spans
            )
        }
    return next(iter(found)) if len(found) == 1 else None


def _match_option_text(value: Any, options: list, unshown: Iterable[Any] = ()) -> int | None:
    if not isinstance(value, str) or not options:
        return None
    norm = normalize_text(value)
    if not norm:
        return None
    shown = [normalize_text(opt) for opt in options]
    hidden = {normalize_text(t) for t in unshown} - set(shown)
    hits = [i for i, opt in enumerate(shown) if opt == norm]
    if len(hits) == 1:
        return hits[0]
    if not hits and norm in hidden:
        return NOT_SHOWN
    m = re.match(r"^\s*[\(\[]?([A-Za-z])[\)\]\.:]\s*(.+)$", value.strip())
    if m:
        idx = LETTERS.find(m.group(1).upper())
        if 0 <= idx < len(options) and shown[idx] == normalize_text(m.group(2)):
            return idx
    named = _named_text(norm, [*shown, *hidden])
    if named is None:
        return None
    if named in hidden:
        return NOT_SHOWN
    at = [i for i, opt in enumerate(shown) if opt == named]
    return at[0] if len(at) == 1 else None


def parse_choice(raw: Any, options: list, *, unshown: Iterable[Any] = ()) -> str | None:
    n = len(options) if options else None
    if isinstance(raw, str):
        text = raw.strip().strip("*_`\"' ")
        if n is not None and len(text) == 1 and text.upper() in LETTERS[:n]:
            return text.upper()
        idx = _match_option_text(text, options or [], unshown)
        if idx == NOT_SHOWN:
            return None
        if idx is not None:
            return LETTERS[idx]
        return normalize_letter(text, n)
    return None


def parse_candidate_number(raw: Any, options: list) -> int | None:
    n = len(options) if options else None
    if isinstance(raw, str):
        idx = _match_option_text(raw, options or [])
        if idx is not None and not re.fullmatch(r"\s*\d+\s*\.?\s*", raw):
            return idx + 1
    number = normalize_int(raw)
    if number is None:
        return None
    if number < 1 or (n is not None and number > n):
        return None
    return number


def parse_letter_set(raw: Any, options: list) -> list[str] | None:
    n = len(options) if options else None
    allowed = LETTERS[:n] if n else LETTERS
    if raw is None or isinstance(raw, bool):
        return None
    if isinstance(raw, str):
        text = raw.strip()
        if text.startswith("["):
            try:
                loaded = json.loads(text)
            except ValueError:
                loaded = None
            if isinstance(loaded, list):
                return parse_letter_set(loaded, options)
        m = re.search(r"(?:answers?|options?|choices?)\s*(?:is|are|:)\s*(.+)$", text, re.I | re.S)
        if m:
            text = m.group(1)
        tokens = [t for t in re.split(r"\s*(?:,|;|/|\band\b|&|\s)\s*", text) if t]
        letters = []
        for token in tokens:
            token = token.strip(_PUNCT_EDGES)
            if len(token) == 1 and token.upper() in allowed:
                letters.append(token.upper())
            elif token:
                letters = None
                break
        if letters:
            return sorted(set(letters))
        parts = [p for p in raw.split(",") if p.strip()]
        idxs = [_match_option_text(p, options or []) for p in parts]
        if idxs and all(i is not None for i in idxs):
            return sorted({LETTERS[i] for i in idxs})
        return None
    if isinstance(raw, (list, tuple)):
        out = []
        for entry in raw:
            if not isinstance(entry, str):
                return None
            t = entry.strip()
            if len(t) == 1 and t.upper() in allowed:
                out.append(t.upper())
                continue
            idx = _match_option_text(t, options or [])
            if idx is None:
                return None
            out.append(LETTERS[idx])
        return sorted(set(out)) or None
    return None


# --- the protocol's part: defaults, defined again by the protocol's lmms_utils.py (appended) ----

METRICS: tuple[str, ...] = ()  # the protocol's metric keys, in its leaderboard's order


def parse(doc: dict, raw: Any) -> Any:
    """The canonical answer StateLab reads from a model's reply (None: unparseable), by the
    document's format: a letter, a candidate number, a set of letters, a count or a set of texts."""
    options = list(doc.get("options") or [])
    fmt = doc.get("format") or "choice"
    if fmt == "choice":
        # "unshown": the item's candidates the question leaves out (a document may name them).
        return parse_choice(raw, options, unshown=doc.get("unshown") or ())
    if fmt == "number":
        return parse_candidate_number(raw, options)
    if fmt == "letters":
        return parse_letter_set(raw, options)
    if fmt == "count":
        return normalize_int(raw)
    if fmt == "set":
        return normalize_set(raw)
    raise ValueError(f"document {doc.get('id')!r}: no answer format {fmt!r}")


def credit(doc: dict, parsed: Any) -> tuple[int, int]:
    """(numerator, denominator) of one question's score: 1 for the correct answer, by format."""
    if parsed is None:
        return 0, 1
    truth = json.loads(doc["target"])
    fmt = doc.get("format") or "choice"
    if fmt == "choice":
        t, p = normalize_letter(truth), normalize_letter(parsed)
    elif fmt == "count":
        t, p = normalize_int(truth), normalize_int(parsed)
    elif fmt in ("set", "letters"):
        t, p = normalize_set(truth), normalize_set(parsed)
    else:
        return int(parsed == truth), 1
    return int(t is not None and t == p), 1


def groups(meta: dict) -> list[str]:
    """The question-weighted means (metric keys) one question of the item `meta` counts in."""
    return []


def extra(doc: dict, parsed: Any) -> dict:
    """Fields the protocol's scoring adds to a question's record."""
    return {}


def missing(records: list[dict]) -> int:
    """Questions without a document (a query the export could not ask): each counts as a parse
    failure, as a missing answer does in StateLab."""
    return 0


def printed(records: list[dict], key: str) -> Decimal | None:
    """The value StateLab prints for metric `key` over these records (None: no question counts)."""
    return mean_printed(records, key)


# --- the lmms-eval task functions ----------------------------------------------------------------


def doc_to_visual(doc: dict) -> list:
    """Images as upright RGB PIL images (EXIF orientation applied, as StateLab shows them to people
    and models), videos as file paths (what lmms-eval's video models take)."""
    paths = [os.path.join(HERE, p) for p in doc.get("visuals") or []]
    if doc.get("visual_kind") == "video":
        return paths
    from PIL import Image, ImageOps

    out = []
    for path in paths:
        with Image.open(path) as img:
            out.append(ImageOps.exif_transpose(img).convert("RGB"))
    return out


def doc_to_text(doc: dict, lmms_eval_specific_kwargs: dict | None = None) -> str:
    kwargs = lmms_eval_specific_kwargs or {}
    return f"{kwargs.get('pre_prompt', '')}{doc['prompt']}{kwargs.get('post_prompt', '')}"


def doc_to_target(doc: dict) -> str:
    """The correct answer as text (a list of answers joined by commas)."""
    target = json.loads(doc["target"])
    if isinstance(target, list):
        return ",".join(str(v) for v in target)
    return "" if target is None else str(target)


def process_results(doc: dict, results: list) -> dict:
    """One record per metric key: the question's credit, what it counts in, whether it parsed."""
    raw = results[0] if results else None
    while isinstance(raw, list):
        raw = raw[0] if raw else None
    parsed = parse(doc, raw)
    num, den = credit(doc, parsed)
    meta = json.loads(doc.get("meta") or "{}")
    record = {
        "id": doc["id"],
        "query": doc["query"],
        "protocol": doc["protocol"],
        "num": num,
        "den": den,
        "parsed": parsed,
        "parse_failure": parsed is None,
        "groups": groups(meta),
        "meta": meta,
    }
    record.update(extra(doc, parsed))
    out = {key: dict(record, metric=key) for key in _task_metrics() if key != "item"}
    # lmms-eval 0.7 drops `doc` from the --log_samples file but keeps what process_results returns:
    # `item` carries the ids StateLab's import maps the sample by.
    out["item"] = {"id": doc["id"], "query": doc["query"], "metric": "item"}
    return out


def _task_metrics() -> list[str]:
    """The metric keys the task YAML lists (the writer stores them in metrics.json; lmms-eval
    would report an empty value for any other key process_results returned)."""
    try:
        with open(os.path.join(HERE, "metrics.json"), encoding="utf-8") as fh:
            return list(json.load(fh))
    except OSError:
        return list(METRICS) + ["parse_failures", "item"]


def percent(value: Fraction | Decimal, places: int = 2) -> Decimal:
    """An exact share as the percentage StateLab prints (rounded half up)."""
    with localcontext() as ctx:
        ctx.prec = 60
        exact = value if isinstance(value, Decimal) else Decimal(value.numerator * 100) / Decimal(value.denominator)
        return exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def question_mean(records: list[dict], group: str) -> Fraction | None:
    """The mean credit of the questions that count in `group` (None: none does)."""
    rows = [r for r in records if group in r["groups"]]
    if not rows:
        return None
    return sum((Fraction(r["num"], r["den"]) for r in rows), Fraction(0)) / len(rows)


def mean_printed(records: list[dict], group: str) -> Decimal | None:
    value = question_mean(records, group)
    return None if value is None else percent(value)


def aggregate(records: list[dict]) -> float:
    """lmms-eval's aggregation for every metric: the printed percentage as a float."""
    key = records[0]["metric"]
    if key == "item":
        return len({r["id"] for r in records})
    if key == "parse_failures":
        return sum(1 for r in records if r["parse_failure"]) + missing(records)
    value = printed(records, key)
    return float("nan") if value is None else float(value)
