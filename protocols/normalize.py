"""How text is made comparable, one named function per rule. Plain Python, no Django.

There are two rules, because two different things are compared:

- **answer text** (``answer_text``, ``answer_multiset``): an answer checked for an exact match
  against a known answer or an option — a model's reply, an annotator's blind answer, a set
  question's object names. Case, runs of whitespace and punctuation around the text are ignored;
  every word counts, articles included ("a cup" is not "cup"), because the protocols score these
  answers by exact match (the spec of a protocol scored this way says so, under "Scoring"). Used
  by the parsing of model answers for every protocol, by set-answer scoring, and by the agreement and gold
  checks of blind QA answers, so that an answer agreeing with the truth on the agreement page is
  also right on the leaderboard.
- **description text** (``description_text``): two annotators' free-text descriptions of the same
  thing (a quintuplet's two states, its change and the change's distractors). Case, all
  punctuation and the articles a / an / the are ignored, so "The closed jar." and "closed jar"
  agree (the "Agreement" section of the spec page of a protocol that uses it, docs/protocols/). Never
  used to score an answer.

lmms-eval task folders carry a standalone copy of the answer rule
(annotation/interchange/lmms_task_utils.py), kept identical by tests.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Iterable
from typing import Any

_WS = re.compile(r"\s+")
PUNCT_EDGES = " \t\r\n.,;:!?\"'`()[]{}"  # what answer_text strips around an answer
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans({c: " " for c in string.punctuation})


def answer_text(value: Any) -> str:
    """The answer rule: case folded, whitespace collapsed, surrounding punctuation stripped."""
    text = _WS.sub(" ", str(value)).strip().strip(PUNCT_EDGES).strip()
    return text.casefold()


def answer_multiset(value: Any) -> list[str] | None:
    """A set answer as a sorted list of ``answer_text`` forms (order, case, whitespace ignored).

    A multiset: duplicates are kept so that "a, a" differs from "a". Accepts a list or a
    comma-separated string (a JSON list in a string too). Returns None for anything else or for an
    empty answer.
    """
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
                return answer_multiset(loaded)
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
        norm = answer_text(part)
        if norm:
            out.append(norm)
    return sorted(out) or None


def description_text(text: Any) -> str:
    """The description rule: lower case, punctuation and articles removed, whitespace collapsed."""
    lowered = str(text or "").lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", lowered).split())
