"""The one stored form of annotators' answers: QA answers, QA flags, rating scores and an item's
known QA answer. Plain Python, no Django.

A submit and an import check a value by one rule: a blind QA answer by annotation.results
validate_qa, a rating's scores (and a gold rating item's expected scores) by
protocols.fields.rating_score_errors (the import's side: annotation.importing.annotation_lines
and the protocol's fields.py). An item's known QA answer, which only an item import gives, is
checked by the protocol's item fields (annotation.importing.formats).
Both then store what these functions return, so an answer imported as "b" and one submitted as
"b" are the same "B" in the database. Migration 0006 rewrote the rows stored before.

- QA answer to a choice item: one upper-case letter ("B"); the sorted list of letters
  (["A", "C"]) when the item takes several letters (or an import gives several);
- to a count item: an int; to a set item: the object names, whitespace collapsed, blanks dropped,
  in the order given; no answer (None, "" or [], or a set that names no object): None. An empty
  set is no answer: a set question's truth names at least one object (the item import refuses an
  empty one), so "none of them" is not a choice; an annotator who finds no object flags the item;
- QA flags: each at most once, in QA_FLAGS order;
- ratings: {criterion: 1..5 or None} with every criterion, in criteria order;
- an item's known answer (the import format): as its protocol's ``known_answer_form`` says, e.g.
  always the sorted list of its letters where the protocol's answers are lists (one correct
  option too); a gold rating item's expected scores: the criteria given, in criteria order
  (protocols.fields.ordered_scores).

Comparing answers (agreement, gold) stays annotation.agreement's job: a truth may be a list
where a single-answer submit is one letter, and set answers compare without order or case.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from protocols import registry
from protocols.fields import is_score

from .protocols import QA_FLAGS, qa_shape

__all__ = ["is_score", "option_letters", "payload_answer", "qa_answer", "qa_flags", "qa_result_answer", "rating_scores"]

_LETTER_SEPARATORS = re.compile(r"[\s,;]+")


def option_letters(value: Any) -> list[str] | None:
    """Option letters as given ("b", "a, c", "A;C", ["c", "a"]): stripped and upper-cased, in the
    order given; None when the value is neither text nor a list of texts."""
    if isinstance(value, str):
        value = [part for part in _LETTER_SEPARATORS.split(value.strip()) if part]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return [v.strip().upper() for v in value]


def qa_answer(answer: Any, *, fmt: str, multiple: bool = False) -> Any:
    """The stored form of a QA answer its caller has checked (see the module docstring).

    A value of the wrong type comes back unchanged, for its caller's check to refuse.
    """
    if answer is None or answer == "" or answer == []:
        return None
    if fmt == "choice":
        letters = option_letters(answer)
        if not letters:
            return answer
        return sorted(letters) if multiple or len(letters) != 1 else letters[0]
    if fmt == "count":
        if isinstance(answer, str) and answer.strip().isdigit():
            return int(answer.strip())
        return answer
    if fmt == "set":
        names = answer.split(",") if isinstance(answer, str) else answer
        if isinstance(names, list) and all(isinstance(v, str) for v in names):
            return [" ".join(v.split()) for v in names if v.strip()] or None
        return answer
    return answer


def qa_result_answer(
    answer: Any, *, protocol: str, payload: Mapping[str, Any], project_settings: Mapping[str, Any] | None = None
) -> Any:
    """The stored form of an annotator's answer to this item (its shape from the item's payload and
    its project's settings, as the annotator's form had it)."""
    shape = qa_shape(protocol=protocol, payload=dict(payload), project_settings=project_settings)
    return qa_answer(answer, fmt=shape["format"], multiple=shape["multiple"])


def qa_flags(flags: Iterable[str]) -> list[str]:
    """Known flags, each once, in QA_FLAGS order."""
    given = set(flags)
    return [f for f in QA_FLAGS if f in given]


def payload_answer(protocol: str, payload: Mapping[str, Any]) -> Any:
    """The stored form of an item's known QA answer (None when it has none)."""
    answer = payload.get("answer")
    form = registry.get(protocol).known_answer_form(payload)
    return answer if form is None else qa_answer(answer, **form)


def rating_scores(scores: Mapping[str, Any], criteria: Iterable[str]) -> dict[str, Any]:
    """Every criterion's score (or None for N/A), in criteria order."""
    return {c: scores[c] for c in criteria}
