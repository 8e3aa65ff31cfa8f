"""From plain items and answers to a scored ``ItemMatrix``, per protocol. No Django.

An item is a ``ScoringItem`` (payload in the interchange format + ``resolved`` =
annotation.protocols.resolve_queries output). Answers of one run are a mapping
``(item key, query key) -> RunAnswer``; a missing key means the model produced nothing for that
query (which matters for VisualTrans' unsupported subtasks), ``RunAnswer.value is None`` means a
prediction that failed or could not be parsed.
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Hashable, Iterable, Mapping, Sequence

import numpy as np

from . import changeit, m3verse, oscbench, status, visualtrans
from .answers import normalize_letter, parse_answer
from .common import ItemMatrix

LETTERS = string.ascii_uppercase
PERCENT_PROTOCOLS = ("status", "changeit", "visualtrans", "m3verse")
MODULES = {"status": status, "changeit": changeit, "visualtrans": visualtrans, "m3verse": m3verse, "oscbench": oscbench}


@dataclass
class ScoringItem:
    key: Hashable  # the item's primary key (or any unique key)
    external_id: str
    payload: dict[str, Any]
    resolved: dict[str, dict[str, Any]]


@dataclass
class RunAnswer:
    value: Any  # canonical parsed answer (see answers.py) or None
    options: list | None = None  # option order the model saw, when stored
    logprobs: dict | None = None


@dataclass
class ScoredRun:
    matrix: ItemMatrix
    printed: dict[str, Decimal | None]
    cis: dict[str, list[float] | None]
    extra: dict[str, Any] = field(default_factory=dict)


def main_keys(protocol: str) -> tuple[str, ...]:
    return MODULES[protocol].KEYS


def primary_key(protocol: str) -> str:
    return MODULES[protocol].PRIMARY


def _remap_index(value_index: int, seen: list | None, resolved: list) -> int | None:
    """Map an option index from the order the model saw to the release's order (by option text)."""
    if not seen or list(seen) == list(resolved):
        return value_index
    if not 0 <= value_index < len(seen):
        return None
    try:
        return list(resolved).index(seen[value_index])
    except ValueError:
        return None


def _letter_in_release(answer: RunAnswer | None, resolved_options: list) -> str | None:
    if answer is None or answer.value is None:
        return None
    letter = normalize_letter(answer.value) if isinstance(answer.value, str) else None
    if letter is None:
        return None
    idx = _remap_index(LETTERS.index(letter), answer.options, resolved_options)
    return None if idx is None else LETTERS[idx]


def score_status(items: Sequence[ScoringItem], answers: Mapping[tuple, RunAnswer]) -> ItemMatrix:
    n = len(items)
    truth = np.empty((n, 6), dtype=np.int8)
    pred = np.full((n, 6), -1, dtype=np.int8)
    p_a = np.full((n, 4), np.nan)
    have_logprobs = False
    for i, item in enumerate(items):
        for j, q in enumerate(status.QUERIES):
            spec = item.resolved[q]
            truth[i, j] = LETTERS.index(spec["answer"])
            ans = answers.get((item.key, q))
            letter = _letter_in_release(ans, spec["options"])
            if letter is not None and LETTERS.index(letter) < len(spec["options"]):
                pred[i, j] = LETTERS.index(letter)
            if j < 4 and ans is not None and ans.logprobs:
                have_logprobs = True
                p_a[i, j] = status.prob_of_a(ans.logprobs)
    matrix = status.item_matrix(
        truth,
        pred,
        categories=[it.payload.get("category") for it in items],
        differences=[it.payload.get("difference") for it in items],
    )
    if have_logprobs:
        matrix.diagnostics["reassigned"] = status.reassigned(p_a)
    return matrix


def _changeit_label_objects(items: Sequence[ScoringItem]) -> dict[str, str]:
    vocab: dict[str, set[str]] = {}
    for item in items:
        vocab.setdefault(item.payload["object"], set()).add(item.payload["state"])
    return changeit.label_object_map({k: sorted(v) for k, v in vocab.items()})


def score_changeit(items: Sequence[ScoringItem], answers: Mapping[tuple, RunAnswer]) -> ItemMatrix:
    n = len(items)
    label_objects = _changeit_label_objects(items)
    truth = np.zeros((n, 4), dtype=np.int64)
    pred = np.zeros((n, 4), dtype=np.int64)
    obj = np.zeros((n, 4), dtype=bool)
    for i, item in enumerate(items):
        distractors = tuple(item.payload.get("distractors") or ())
        for j, q in enumerate(changeit.QUERIES):
            spec = item.resolved[q]
            truth[i, j] = spec["answer"]
            ans = answers.get((item.key, q))
            if ans is None or ans.value is None or isinstance(ans.value, bool) or not isinstance(ans.value, int):
                continue
            idx = _remap_index(ans.value - 1, ans.options, spec["options"])
            if idx is None or not 0 <= idx < len(spec["options"]):
                continue
            pred[i, j] = idx + 1
            obj[i, j] = changeit.chosen_object_correct(idx + 1, spec["options"], item.payload["object"], label_objects, distractors)
    return changeit.item_matrix(truth, pred, obj)


def score_visualtrans(items: Sequence[ScoringItem], answers: Mapping[tuple, RunAnswer]) -> ItemMatrix:
    subtasks, correct, present = [], [], []
    for item in items:
        spec = item.resolved["qa"]
        fmt = spec.get("format") or item.payload.get("format")
        ans = answers.get((item.key, "qa"))
        subtasks.append(item.payload.get("subtask"))
        present.append(ans is not None)
        if ans is None or ans.value is None:
            correct.append(False)
            continue
        value = ans.value
        if fmt == "choice":
            letter = _letter_in_release(ans, spec["options"])
            value = letter
        correct.append(visualtrans.is_correct(fmt, spec["answer"], value))
    # Missing or unparseable answers are failures, except in unsupported subtasks (reported apart).
    answered = {i for i, item in enumerate(items) if (a := answers.get((item.key, "qa"))) is not None and a.value is not None}
    supported = {s for s, p in zip(subtasks, present) if p}
    failures = sum(1 for i, s in enumerate(subtasks) if s in supported and i not in answered)
    return visualtrans.item_matrix(subtasks, correct, present, parse_failures=failures)


def score_m3verse(items: Sequence[ScoringItem], answers: Mapping[tuple, RunAnswer]) -> ItemMatrix:
    credits, failures = [], 0
    for item in items:
        spec = item.resolved["qa"]
        ans = answers.get((item.key, "qa"))
        predicted = None
        if ans is not None and ans.value is not None:
            letters = ans.value if isinstance(ans.value, list) else [ans.value]
            mapped = [_letter_in_release(RunAnswer(v, ans.options), spec["options"]) for v in letters]
            predicted = None if any(m is None for m in mapped) else sorted(set(mapped))
        if predicted is None:
            failures += 1
        credits.append(m3verse.question_credit(predicted, spec["answer"]))
    return m3verse.item_matrix(
        credits,
        [it.payload.get("context") for it in items],
        [it.payload.get("capabilities") or [] for it in items],
        [bool(it.payload.get("hallucination")) for it in items],
        parse_failures=failures,
    )


def score_oscbench_ratings(
    items: Sequence[ScoringItem], ratings: Mapping[Hashable, Sequence[Mapping[str, int | None]]], *, parse_failures: int = 0
) -> ItemMatrix:
    """``ratings``: item key -> list of {criterion: 1..5 | None} (human raters, or one judge answer)."""
    sums, counts = oscbench.score_dicts_to_arrays([ratings.get(it.key, []) for it in items])
    return oscbench.item_matrix(
        sums,
        counts,
        scenarios=[it.payload.get("scenario") for it in items],
        action_categories=[it.payload.get("action_category") for it in items],
        parse_failures=parse_failures,
    )


def score_oscbench_judge(items: Sequence[ScoringItem], answers: Mapping[tuple, RunAnswer]) -> ItemMatrix:
    ratings, failures = {}, 0
    for item in items:
        ans = answers.get((item.key, "judge"))
        if ans is None or not isinstance(ans.value, dict):
            failures += 1
            continue
        ratings[item.key] = [ans.value]
    return score_oscbench_ratings(items, ratings, parse_failures=failures)


SCORERS = {
    "status": score_status,
    "changeit": score_changeit,
    "visualtrans": score_visualtrans,
    "m3verse": score_m3verse,
    "oscbench": score_oscbench_judge,
}


def score(protocol: str, items: Sequence[ScoringItem], answers: Mapping[tuple, RunAnswer], *, n_boot: int = 1000, seed: int = 0) -> ScoredRun:
    matrix = SCORERS[protocol](items, answers)
    return finish(protocol, matrix, n_boot=n_boot, seed=seed)


def finish(protocol: str, matrix: ItemMatrix, *, n_boot: int = 1000, seed: int = 0) -> ScoredRun:
    module = MODULES[protocol]
    return ScoredRun(matrix=matrix, printed=module.printed(matrix), cis=module.cis(matrix, n_boot=n_boot, seed=seed))


# --- Random rows ----------------------------------------------------------------------------

def random_answers(protocol: str, items: Sequence[ScoringItem], *, seed: int) -> dict[tuple, RunAnswer]:
    """Seeded random answers for every query, scored through the same code as any model."""
    rng = np.random.default_rng(seed)
    out: dict[tuple, RunAnswer] = {}
    set_pool = [
        str(x) for it in items if (it.resolved.get("qa") or {}).get("format") == "set" for x in (it.resolved["qa"].get("answer") or [])
    ]
    for item in items:
        for q, spec in item.resolved.items():
            options = spec.get("options") or []
            if protocol in ("status",):
                value: Any = LETTERS[int(rng.integers(0, len(options)))]
            elif protocol == "changeit":
                value = int(rng.integers(1, len(options) + 1))
            elif protocol == "visualtrans":
                fmt = spec.get("format") or item.payload.get("format")
                value = visualtrans.random_answer(fmt, options, rng, set_pool=set_pool)
            elif protocol == "m3verse":
                value = m3verse.random_answer(len(options), rng)
            elif protocol == "oscbench":
                value = {c: int(rng.integers(1, 6)) for c in oscbench.CRITERIA}
            else:
                raise ValueError(protocol)
            out[(item.key, q)] = RunAnswer(value, list(options))
    return out


# --- Human rows (blind QA answers scored against the final truth) ---------------------------

def score_blind_answers(
    protocol: str, items: Sequence[ScoringItem], blind: Mapping[Hashable, Sequence[Any]]
) -> ItemMatrix:
    """Every blind answer is one scored row (pooled over annotators); ``blind``: item key -> answers."""
    rows: list[ScoringItem] = []
    answers: dict[tuple, RunAnswer] = {}
    for item in items:
        for k, raw in enumerate(blind.get(item.key, ())):
            key = (item.key, k)
            rows.append(ScoringItem(key=key, external_id=item.external_id, payload=item.payload, resolved=item.resolved))
            spec = item.resolved["qa"]
            value = None
            if raw not in (None, "", []):
                value = parse_answer(protocol, "qa", raw, spec.get("options") or [], fmt=spec.get("format") or item.payload.get("format")) if protocol == "visualtrans" else parse_answer(protocol, "qa", raw, spec.get("options") or [])
            answers[(key, "qa")] = RunAnswer(value)
    matrix = SCORERS[protocol](rows, answers)
    matrix.n = len(rows)
    return matrix


def protocol_has_human_row(protocol: str) -> bool:
    return protocol in ("visualtrans", "m3verse")


def iter_keys(matrix: ItemMatrix) -> Iterable[str]:
    return matrix.keys
