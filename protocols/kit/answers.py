"""Reading a reply (a model's or a blind annotator's) into its canonical answer: the parsers of
every answer kind, shared by inference (raw model output), imports of predictions and scoring.

Plain Python, no Django. Every parser returns the canonical form of an answer or None when the
output cannot be read; None is scored as wrong and counted as a parse failure.

A protocol says which parser reads its replies (``Protocol.answer_kind``, protocols/base.py);
the canonical form of each kind (``PARSERS`` below):
- ``choice``: one upper-case letter ("A", "B", ...);
- ``candidate``: the 1-based number of a candidate label (int);
- ``qa``: by the item's format: ``choice`` a letter, ``count`` an int, ``set`` a sorted list of
  normalized strings (``protocols.normalize.answer_multiset``);
- ``letters``: sorted list of distinct upper-case letters;
- ``judge``: dict criterion -> int 1..5 or None (N/A), one entry per criterion of the protocol.

A reply may name an option by its text (``_match_option_text``): the whole text, a letter and the
text, or free text naming it as whole words, the most specific (longest) text winning over the
texts it holds. A query that shows only some of an item's candidates may list the others
(``unshown``, kept with its resolved options); a reply naming one of them reads as no option.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from protocols import registry
from protocols.base import LETTERS
from protocols.normalize import PUNCT_EDGES, answer_multiset, answer_text


def normalize_int(value: Any) -> int | None:
    """An integer from an int, an integral float or a string holding one number."""
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
        # Free text: accept exactly one integer ("Answer: 3", "There are 3 apples.").
        found = re.findall(r"(?<![\w.])[+-]?\d+(?!\w|\.\d)", text)
        if len(set(found)) == 1:
            return int(found[0])
    return None


_LETTER_PATTERNS = (
    # "Answer: (B)", "answer is B", "Final answer - b"
    re.compile(r"answer\s*(?:is|:|-|=)?\s*(?:option\s*)?[\(\[]?\s*([A-Za-z])\s*[\)\]]?(?![A-Za-z])", re.I),
    re.compile(r"option\s*[\(\[]?([A-Za-z])[\)\]]?(?![A-Za-z])", re.I),
    re.compile(r"^\s*[\(\[]([A-Za-z])[\)\]]"),  # leading "(B)", "[B]"
    re.compile(r"^\s*([A-Za-z])(?:[\)\.:]|\s*$)"),  # leading "B.", "B)", "B:"
    re.compile(r"[\(\[]([A-Z])[\)\]]"),  # "(B)" anywhere, upper case only
)


def normalize_letter(value: Any, n_options: int | None = None) -> str | None:
    """One option letter from a bare letter or from free text ("Answer: (B)"); indices are not letters."""
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


_ALONE_AFTER = ".,;:!?)]}*_`\"'"


def _stands_alone(text: str, start: int, end: int) -> bool:
    """A lower-case letter is an option only in brackets or with nothing but punctuation after it.

    "answer: b", "answer is (a) ...", "answer is b." are letters; "The answer is a cabinet" and
    "Answer: a half-open cabinet" use the article "a" and are not.
    """
    before = text[start - 1] if start > 0 else ""
    rest = text[end:].lstrip()
    if before in "([" and rest[:1] in (")", "]"):
        return True
    return rest == "" or rest[0] in _ALONE_AFTER


# What _match_option_text gives for a reply that names a candidate of the item which the query did
# not show (``unshown``): no option of this query, so the reply is not credited.
NOT_SHOWN = -1


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _word_spans(needle: str, text: str) -> list[tuple[int, int]]:
    """Where ``needle`` occurs in ``text`` as whole words: a letter or digit at either end of the
    needle may not continue a word of the text ("fully open" is not in "carefully open")."""
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
    """The one candidate text a free-text reply names: among the texts occurring in it as whole
    words, those whose every occurrence lies inside the occurrence of a longer one are left out
    (the reply "almost fully retract the tape measure" names that text, not "fully retract the tape
    measure"); None unless exactly one text remains."""
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
    """0-based index of the option a reply names by its text (answer rule), or None.

    The reply is the option's text, or a letter followed by that option's text, or free text
    naming exactly one option as whole words, the most specific (longest) text winning over the
    texts it contains. ``unshown``: texts of the item's other candidates that this query did not
    show; a reply naming one of them gives ``NOT_SHOWN``, never the shown option it contains.
    """
    if not isinstance(value, str) or not options:
        return None
    norm = answer_text(value)
    if not norm:
        return None
    shown = [answer_text(opt) for opt in options]
    hidden = {answer_text(t) for t in unshown} - set(shown)
    hits = [i for i, opt in enumerate(shown) if opt == norm]
    if len(hits) == 1:
        return hits[0]
    if not hits and norm in hidden:
        return NOT_SHOWN
    # "B. a slightly opened door" / "(B) a slightly opened door": letter prefix plus text.
    m = re.match(r"^\s*[\(\[]?([A-Za-z])[\)\]\.:]\s*(.+)$", value.strip())
    if m:
        idx = LETTERS.find(m.group(1).upper())
        if 0 <= idx < len(options) and shown[idx] == answer_text(m.group(2)):
            return idx
    # Free text naming one candidate.
    named = _named_text(norm, [*shown, *hidden])
    if named is None:
        return None
    if named in hidden:
        return NOT_SHOWN
    at = [i for i, opt in enumerate(shown) if opt == named]
    return at[0] if len(at) == 1 else None


def parse_choice(raw: Any, options: list, *, unshown: Iterable[Any] = ()) -> str | None:
    """A letter for a multiple-choice query: the letter, or the option's text. A reply naming one of
    ``unshown`` (candidates of the item this query did not show) reads as no option."""
    n = len(options) if options else None
    if isinstance(raw, str):
        text = raw.strip().strip("*_`\"' ")  # markdown emphasis and quotes around a bare answer
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
    """1-based candidate number for a candidate-label query: the number or the label text."""
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
    """Sorted distinct letters for a question with several correct options: ["A", "C"], "A,C", "A and C",
    or option texts."""
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
            token = token.strip(PUNCT_EDGES)
            if len(token) == 1 and token.upper() in allowed:
                letters.append(token.upper())
            elif token:
                letters = None
                break
        if letters:
            return sorted(set(letters))
        # Comma-separated option texts.
        parts = [p for p in raw.split(",") if p.strip()]
        idxs = [_match_option_text(p, options or []) for p in parts]
        if idxs and all(i is not None for i in idxs):
            return sorted({LETTERS[i] for i in idxs})  # type: ignore[index]
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


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


def _extract_json_object(text: str) -> dict | None:
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for cand in candidates:
        cand = cand.strip()
        try:
            loaded = json.loads(cand)
            if isinstance(loaded, dict):
                return loaded
        except ValueError:
            pass
        # The outermost {...} span (tolerates prose before and after).
        start, end = cand.find("{"), cand.rfind("}")
        if 0 <= start < end:
            try:
                loaded = json.loads(cand[start : end + 1])
                if isinstance(loaded, dict):
                    return loaded
            except ValueError:
                # Trailing commas are the most common slip of JSON-writing models.
                fixed = re.sub(r",\s*([}\]])", r"\1", cand[start : end + 1])
                try:
                    loaded = json.loads(fixed)
                    if isinstance(loaded, dict):
                        return loaded
                except ValueError:
                    pass
    return None


def _score_value(value: Any) -> tuple[bool, int | None]:
    """(valid, score) for one criterion value: int 1..5, None / "N/A" as missing."""
    if isinstance(value, dict):
        for key in ("score", "rating", "value"):
            if key in value:
                return _score_value(value[key])
        return False, None
    if value is None:
        return True, None
    if isinstance(value, str) and answer_text(value) in {"n/a", "na", "null", "none", "not applicable", ""}:
        return True, None
    number = normalize_int(value)
    if number is None or not 1 <= number <= 5:
        return False, None
    return True, number


def parse_judge(raw: Any, criteria: Iterable[str]) -> dict[str, int | None] | None:
    """criterion -> 1..5 or None from a judge's JSON (object, or text with code fences / prose),
    for the rating protocol's ``criteria``.

    Accepted shapes: {"object": 4, ...}; {"scores": {...}, "evidence": ...};
    {"object": {"evidence": "...", "score": 4}, ...}. A criterion absent from the answer is None;
    a value outside 1..5 makes the whole answer unparseable. Returns None when no criterion is
    readable.
    """
    criteria = tuple(criteria)
    obj: Any = raw
    if isinstance(raw, str):
        obj = _extract_json_object(raw)
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("scores"), dict):
        obj = obj["scores"]
    out: dict[str, int | None] = {}
    seen = 0
    for criterion in criteria:
        if criterion not in obj:
            out[criterion] = None
            continue
        valid, score = _score_value(obj[criterion])
        if not valid:
            return None
        seen += 1
        out[criterion] = score
    if seen == 0:
        return None
    return out


def parse_answer(
    protocol: str, query: str, raw: Any, options: list, *, fmt: str | None = None, unshown: Iterable[Any] = ()
) -> Any:
    """The canonical answer of one prediction, or None when unparseable, read as the protocol's
    ``answer_kind`` says (protocols/base.py; PARSERS below).

    ``options`` is the list of option texts in the order shown to the model (letters follow
    position; candidate labels are numbered from 1). ``fmt`` is a QA item's format ("choice",
    "count" or "set") where the protocol has several. ``unshown``: the texts of the item's
    candidates that this query did not show (a resolved query's ``"unshown"``, where the protocol
    records one): a reply naming one of them is not read as the shown option it contains.
    """
    found = registry.get(protocol)
    kind = found.answer_kind
    # Called once per prediction: the common kinds are dispatched directly (no keyword dicts).
    if kind == "choice":
        return parse_choice(raw, options, unshown=unshown)
    if kind == "candidate":
        return parse_candidate_number(raw, options)
    if kind == "qa":
        return parse_qa(raw, options, fmt=fmt, unshown=unshown)
    return PARSERS[kind](raw, options, fmt=fmt, criteria=found.criteria, unshown=unshown)


def answer_parser(protocol: str) -> Callable[..., Any]:
    """``parse_answer`` with the protocol looked up once: ``parser(query, raw, options, fmt=None,
    unshown=())`` gives what ``parse_answer(protocol, query, raw, options, ...)`` gives. For a loop
    over one protocol's outputs (an import of predictions, a set of blind answers), where the
    registry lookup per output would cost as much as a bare letter's parse."""
    found = registry.get(protocol)
    kind = found.answer_kind
    if kind == "choice":
        return lambda query, raw, options, *, fmt=None, unshown=(): parse_choice(raw, options, unshown=unshown)
    if kind == "candidate":
        return lambda query, raw, options, *, fmt=None, unshown=(): parse_candidate_number(raw, options)
    if kind == "qa":
        return lambda query, raw, options, *, fmt=None, unshown=(): parse_qa(raw, options, fmt=fmt, unshown=unshown)
    parser, criteria = PARSERS[kind], found.criteria
    return lambda query, raw, options, *, fmt=None, unshown=(): parser(
        raw, options, fmt=fmt, criteria=criteria, unshown=unshown
    )


def parse_qa(raw: Any, options: list, *, fmt: str | None = None, unshown: Iterable[Any] = ()) -> Any:
    """A QA answer in one of the three formats; ``fmt`` omitted: choice when options are given,
    else count for an integer-looking answer, else set."""
    if fmt is None:
        if options:
            fmt = "choice"
        elif normalize_int(raw) is not None:
            fmt = "count"
        else:
            fmt = "set"
    if fmt == "choice":
        return parse_choice(raw, options, unshown=unshown)
    if fmt == "count":
        return normalize_int(raw)
    if fmt == "set":
        return answer_multiset(raw)
    raise ValueError(f"unknown QA format {fmt!r}")


# answer kind (Protocol.answer_kind) -> (raw, options, *, fmt, criteria, unshown) -> canonical answer or None
PARSERS = {
    "choice": lambda raw, options, *, unshown=(), **_: parse_choice(raw, options, unshown=unshown),
    "candidate": lambda raw, options, **_: parse_candidate_number(raw, options),
    "qa": lambda raw, options, *, fmt, unshown=(), **_: parse_qa(raw, options, fmt=fmt, unshown=unshown),
    "letters": lambda raw, options, **_: parse_letter_set(raw, options),
    "judge": lambda raw, options, *, criteria, **_: parse_judge(raw, criteria),
}


def answer_type_error(kind: str, raw: Any, *, fmt: str | None = None) -> str | None:
    """Why an imported answer (not a string: strings are parsed, and failures count as parse
    failures) cannot be one of this answer kind, or None when its type fits."""
    if raw is None or isinstance(raw, str):
        return None
    if kind == "judge":
        return None if isinstance(raw, dict) else "a judge answer is an object criterion -> 1..5 or null"
    if kind == "candidate":
        return (
            None
            if isinstance(raw, int) and not isinstance(raw, bool)
            else "answer with the candidate's number or its label text"
        )
    if kind == "letters":
        return (
            None
            if isinstance(raw, list) and all(isinstance(x, str) for x in raw)
            else 'answer with a list of letters or "A,C"'
        )
    if kind == "qa":
        if fmt == "count" and isinstance(raw, int) and not isinstance(raw, bool):
            return None
        if fmt == "set" and isinstance(raw, list) and all(isinstance(x, str) for x in raw):
            return None
        return f"answer of the wrong type for a {fmt} question"
    return "answer with a letter or the option's text"
