"""The `utils.py` of a StateLab lmms-eval task folder (written by `export_release --format lmms-eval`).

This file is copied as it is into the task folder, where lmms-eval loads it by path
(`!function utils.<name>` in the task YAML). It must therefore stand alone: standard library and
Pillow only, no StateLab import. Its answer parsing is a copy of StateLab's own
(`protocols/kit/answers.py`: parse_choice, parse_candidate_number, parse_letter_set, normalize_int,
normalize_set), kept identical by tests/annotation/test_lmms_eval_export.py, so that the score
lmms-eval prints is the score StateLab gives the same answers when the run's `--log_samples` file
is imported back.

Every document carries `id` (the item's id in the release) and `query` (StateLab's query key),
`protocol`, `prompt` (the text shown to the model), `options`, `format`, `visuals` (media paths
relative to the task folder), `visual_kind` ("image" or "video"), `target` (the correct answer as
JSON) and `meta` (the item fields the breakdowns need, as JSON). lmms-eval 0.7 leaves `doc` out of the
`--log_samples` file; each sample carries `item`: {"id", "query"} instead (the `item` metric,
aggregated as the number of items).

Scoring (docs/protocols/<protocol>.md): a missing, empty or unparseable answer is wrong and counted in
`parse_failures`. Percentages are rounded half up to two decimals.
- status: Acc/RAcc for OSI, IR, SCI, OA and ROA, over the six queries of each item;
- changeit: per candidates × condition, state accuracy (the chosen number is the true label's) and
  object accuracy (the chosen label names the item's object: `label_objects.json`, the release's
  vocabulary, or one of the item's distractors), each over all items; a query with no document
  (a crop of an item without a usable box) is wrong and a parse failure, as a missing answer is
  in StateLab (evaluation/scoring/changeit.py);
- visualtrans: exact match per question; subtask accuracy; dimension mean = mean of the printed
  subtask values (decimal arithmetic, half up) over the subtasks present; overall over all questions;
- m3verse: per question 0 if the predicted set has a wrong letter, else |P|/|G|; question-weighted
  means overall, per context, per capability within a context, hallucination vs factual.
"""

from __future__ import annotations

import functools
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


def _match_option_text(value: Any, options: list) -> int | None:
    if not isinstance(value, str) or not options:
        return None
    norm = normalize_text(value)
    if not norm:
        return None
    hits = [i for i, opt in enumerate(options) if normalize_text(opt) == norm]
    if len(hits) == 1:
        return hits[0]
    m = re.match(r"^\s*[\(\[]?([A-Za-z])[\)\]\.:]\s*(.+)$", value.strip())
    if m:
        idx = LETTERS.find(m.group(1).upper())
        if 0 <= idx < len(options) and normalize_text(options[idx]) == normalize_text(m.group(2)):
            return idx
    contained = [i for i, opt in enumerate(options) if normalize_text(opt) and normalize_text(opt) in norm]
    if len(contained) == 1:
        return contained[0]
    return None


def parse_choice(raw: Any, options: list) -> str | None:
    n = len(options) if options else None
    if isinstance(raw, str):
        text = raw.strip().strip("*_`\"' ")
        if n is not None and len(text) == 1 and text.upper() in LETTERS[:n]:
            return text.upper()
        idx = _match_option_text(text, options or [])
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


def parse(doc: dict, raw: Any) -> Any:
    """The canonical answer StateLab reads from a model's reply, or None (unparseable)."""
    options = list(doc.get("options") or [])
    protocol = doc["protocol"]
    if protocol == "status":
        return parse_choice(raw, options)
    if protocol == "changeit":
        return parse_candidate_number(raw, options)
    if protocol == "m3verse":
        return parse_letter_set(raw, options)
    if protocol == "visualtrans":
        fmt = doc.get("format") or "choice"
        if fmt == "choice":
            return parse_choice(raw, options)
        if fmt == "count":
            return normalize_int(raw)
        return normalize_set(raw)
    raise ValueError(f"protocol {protocol!r} has no lmms-eval task")


def credit(doc: dict, parsed: Any) -> tuple[int, int]:
    """(numerator, denominator) of one question's score."""
    truth = json.loads(doc["target"])
    if doc["protocol"] == "m3verse":
        g = {str(t).upper() for t in truth}
        if not parsed:
            return 0, len(g)
        p = {str(x).upper() for x in parsed}
        return (0, len(g)) if p - g else (len(p), len(g))
    if parsed is None:
        return 0, 1
    if doc["protocol"] == "changeit":
        return int(parsed == truth), 1
    fmt = doc.get("format") or "choice"
    if doc["protocol"] == "status" or fmt == "choice":
        t, p = normalize_letter(truth), normalize_letter(parsed)
    elif fmt == "count":
        t, p = normalize_int(truth), normalize_int(parsed)
    else:
        t, p = normalize_set(truth), normalize_set(parsed)
    return int(t is not None and t == p), 1


# STATUS (docs/protocols/status.md): per metric, what one item adds (from its six queries' credit)
# and out of how many; the metric is the sum over items divided by that many times the item count.
_STATUS_PER_ITEM = {
    "acc_osi": (lambda x: x["osi_a"] + x["osi_b"], 2),
    "acc_ir": (lambda x: x["ir_a"] + x["ir_b"], 2),
    "acc_sci": (lambda x: x["sci2"], 1),
    "oa": (lambda x: x["osi_a"] + x["osi_b"] + x["ir_a"] + x["ir_b"] + 2 * x["sci2"], 6),
    "racc_osi": (lambda x: x["osi_a"] & x["osi_b"], 1),
    "racc_ir": (lambda x: x["ir_a"] & x["ir_b"], 1),
    "racc_sci": (lambda x: x["sci4"], 1),
    "roa": (lambda x: x["osi_a"] & x["osi_b"] & x["ir_a"] & x["ir_b"] & x["sci4"], 1),
}
STATUS_METRICS = tuple(_STATUS_PER_ITEM)
STATUS_QUERIES = ("osi_a", "osi_b", "ir_a", "ir_b", "sci2", "sci4")
VISUALTRANS_DIMENSIONS = {
    "spatial_mean": ("fine_grained", "global"),
    "procedural_mean": ("intermediate", "causal", "planning"),
}
# The leaderboard's order: each dimension's subtasks, then its mean; then quantitative and overall.
VISUALTRANS_METRICS = (
    *(key for dimension, subtasks in VISUALTRANS_DIMENSIONS.items() for key in (*subtasks, dimension)),
    "quantitative",
    "overall",
)
M3VERSE_CAPABILITIES = ("spatial", "temporal", "attribute", "reasoning")
# The paper's Table 2 order, as the leaderboard prints it: Overall; Intra-state average and its
# capabilities; Inter-state likewise; then hallucination and factual (not in Table 2).
M3VERSE_METRICS = (
    ("overall",)
    + tuple(key for c in ("intra", "inter") for key in (c, *(f"{c}_{cap}" for cap in M3VERSE_CAPABILITIES)))
    + ("hallucination", "factual")
)
CHANGEIT_QUERIES = tuple(f"state:{s}:{c}" for s in ("standard", "distractor") for c in ("full", "crop"))
CHANGEIT_METRICS = tuple(
    f"{kind}_acc_{q.split(':')[1]}_{q.split(':')[2]}" for kind in ("state", "object") for q in CHANGEIT_QUERIES
)
METRICS = {
    "status": STATUS_METRICS,
    "changeit": CHANGEIT_METRICS,
    "visualtrans": VISUALTRANS_METRICS,
    "m3verse": M3VERSE_METRICS,
}


@functools.lru_cache(maxsize=1)
def _label_objects() -> dict[str, str]:
    """label -> object of the release (the writer's label_objects.json), read once."""
    try:
        with open(os.path.join(HERE, "label_objects.json"), encoding="utf-8") as fh:
            return dict(json.load(fh))
    except OSError:
        return {}


def object_credit(doc: dict, parsed: Any) -> int:
    """Whether the chosen candidate names the item's object: a state label of that object in the
    release's vocabulary, or one of the item's own distractors (evaluation/scoring/changeit.py)."""
    options = list(doc.get("options") or [])
    if not isinstance(parsed, int) or not 1 <= parsed <= len(options):
        return 0
    meta = json.loads(doc.get("meta") or "{}")
    label = options[parsed - 1]
    return int(label in (meta.get("distractors") or []) or _label_objects().get(label) == meta.get("object"))


def _groups(protocol: str, meta: dict) -> list[str]:
    """The question-weighted means (metric keys) one question of the item `meta` counts in."""
    if protocol == "visualtrans":
        return ["overall", meta.get("subtask") or ""]
    if protocol == "m3verse":
        context = meta.get("context") or ""
        caps = meta.get("capabilities") or []
        out = ["overall", context] + [f"{context}_{cap}" for cap in caps]
        out.append("hallucination" if meta.get("hallucination") else "factual")
        return out
    return []


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
        "groups": _groups(doc["protocol"], meta),
        "meta": meta,
    }
    if doc["protocol"] == "changeit":
        record["object"] = object_credit(doc, parsed)
    out = {key: dict(record, metric=key) for key in _task_metrics(doc["protocol"]) if key != "item"}
    # lmms-eval 0.7 drops `doc` from the --log_samples file but keeps what process_results returns:
    # `item` carries the ids StateLab's import maps the sample by.
    out["item"] = {"id": doc["id"], "query": doc["query"], "metric": "item"}
    return out


def _task_metrics(protocol: str) -> list[str]:
    """The metric keys the task YAML lists (the writer stores them in metrics.json; lmms-eval
    would report an empty value for any other key process_results returned)."""
    try:
        with open(os.path.join(HERE, "metrics.json"), encoding="utf-8") as fh:
            return list(json.load(fh))
    except OSError:
        return list(METRICS[protocol]) + ["parse_failures", "item"]


def _percent(value: Fraction | Decimal, places: int = 2) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        exact = value if isinstance(value, Decimal) else Decimal(value.numerator * 100) / Decimal(value.denominator)
        return exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def _mean(records: list[dict], group: str) -> Fraction | None:
    rows = [r for r in records if group in r["groups"]]
    if not rows:
        return None
    return sum((Fraction(r["num"], r["den"]) for r in rows), Fraction(0)) / len(rows)


def _status(records: list[dict], key: str) -> Fraction | None:
    items: dict[str, dict[str, int]] = {}
    for r in records:
        items.setdefault(r["id"], {})[r["query"]] = r["num"]
    if not items:
        return None
    per_item, out_of = _STATUS_PER_ITEM[key]  # an unknown key raises KeyError(key)
    credits = [{q: row.get(q, 0) for q in STATUS_QUERIES} for row in items.values()]
    return Fraction(sum(per_item(x) for x in credits), out_of * len(items))


def _changeit(records: list[dict], key: str) -> Fraction:
    """State or object accuracy over every item (a query without a record counts as wrong)."""
    kind, _, rest = key.split("_", 2)
    query = "state:" + rest.replace("_", ":")
    field = "num" if kind == "state" else "object"
    n = len({r["id"] for r in records})
    return Fraction(sum(r[field] for r in records if r["query"] == query), n)


def printed(records: list[dict], key: str) -> Decimal | None:
    """The value StateLab prints for metric `key` over these records (None: no question counts)."""
    if not records:
        return None
    protocol = records[0]["protocol"]
    if protocol == "status":
        value = _status(records, key)
        return None if value is None else _percent(value)
    if protocol == "changeit":
        return _percent(_changeit(records, key))
    if key in VISUALTRANS_DIMENSIONS and protocol == "visualtrans":
        subs = [printed(records, s) for s in VISUALTRANS_DIMENSIONS[key]]
        avail = [s for s in subs if s is not None]
        if not avail:
            return None
        with localcontext() as ctx:
            ctx.prec = 50
            return (sum(avail, Decimal(0)) / Decimal(len(avail))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    value = _mean(records, key)
    return None if value is None else _percent(value)


def aggregate(records: list[dict]) -> float:
    """lmms-eval's aggregation for every metric: the printed percentage as a float."""
    key = records[0]["metric"]
    if key == "item":
        return len({r["id"] for r in records})
    if key == "parse_failures":
        missing = 0
        if records[0]["protocol"] == "changeit":  # the crop queries of items without a usable box
            missing = len(CHANGEIT_QUERIES) * len({r["id"] for r in records}) - len(records)
        return sum(1 for r in records if r["parse_failure"]) + missing
    value = printed(records, key)
    return float("nan") if value is None else float(value)
