"""From plain items and answers to a scored ``ItemMatrix``, per protocol. No Django.

An item is a ``ScoringItem`` (payload in the interchange format + ``resolved`` =
annotation.protocols.resolve_queries output). Answers of one run are a mapping
``(item key, query key) -> RunAnswer``; a missing key means the model produced nothing for that
query (which matters for VisualTrans' unsupported subtasks), ``RunAnswer.value is None`` means a
prediction that failed or could not be parsed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Hashable, Iterable, Mapping, Sequence

import numpy as np

from annotation.protocols import LETTERS

from . import changeit, m3verse, oscbench, status, visualtrans
from .answers import normalize_letter, parse_answer
from .common import ItemMatrix

PERCENT_PROTOCOLS = ("status", "changeit", "visualtrans", "m3verse")
MODULES = {"status": status, "changeit": changeit, "visualtrans": visualtrans, "m3verse": m3verse, "oscbench": oscbench}


@dataclass(slots=True)
class ScoringItem:
    key: Hashable  # the item's primary key (or any unique key)
    external_id: str
    payload: dict[str, Any]
    resolved: dict[str, dict[str, Any]]


@dataclass(slots=True)  # millions per board: no per-instance dict, faster attribute reads
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


def chance(protocol: str, key: str) -> Decimal | None:
    """Chance level (percent) of a metric or breakdown key ("category:positional:roa" -> roa's).

    STATUS: 50 / 25 / 1.56 (PROTOCOLS.md §1); ChangeIt state accuracy: 10 (one of 10 candidates).
    None where no fixed chance exists (ChangeIt object accuracy depends on how many candidates
    name the object; the other protocols): their Random row shows it empirically.
    """
    metric = key.rsplit(":", 1)[-1]
    if protocol == "status":
        return status.CHANCE.get(metric)
    if protocol == "changeit" and metric.startswith("state_acc_"):
        return Decimal("10.00")
    return None


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


def _seen_letter(release_index: int, seen: list | None, resolved: list) -> str | None:
    """The letter under which the model saw the release's option ``release_index``."""
    if not seen or list(seen) == list(resolved):
        return LETTERS[release_index]
    try:
        return LETTERS[list(seen).index(resolved[release_index])]
    except (ValueError, IndexError):
        return None


def _letter_in_release(answer: RunAnswer | None, resolved_options: list) -> str | None:
    if answer is None or answer.value is None:
        return None
    letter = normalize_letter(answer.value) if isinstance(answer.value, str) else None
    if letter is None:
        return None
    idx = _remap_index(LETTERS.index(letter), answer.options, resolved_options)
    return None if idx is None else LETTERS[idx]


_LETTER_CODE = {letter: i for i, letter in enumerate(LETTERS)}


def _status_code(ans: RunAnswer, options: list) -> int:
    """Release letter code of a stored STATUS answer; -1 when missing, unreadable or out of range."""
    value = ans.value
    code = _LETTER_CODE.get(value) if isinstance(value, str) else None  # canonical answers: one dict lookup
    if code is None:
        letter = normalize_letter(value) if isinstance(value, str) else None
        if letter is None:
            return -1
        code = _LETTER_CODE[letter]
    seen = ans.options
    if seen and seen != options:
        mapped = _remap_index(code, seen, options)
        if mapped is None:
            return -1
        code = mapped
    return code if code < len(options) else -1


def _status_scan(items: Sequence[ScoringItem], answers: Mapping[tuple, RunAnswer]):
    """The one pass over the stored answers: (truth codes, predicted codes, log-prob flat index,
    log P(release option A)) as flat lists (millions of live tuples would keep the cyclic
    garbage collector scanning the heap)."""
    truth_codes: list[int] = []
    pred_codes: list[int] = []
    lp_where: list[int] = []
    lp_values: list[float] = []
    get = answers.get
    code_of, code_get = _LETTER_CODE, _LETTER_CODE.get
    truth_append, pred_append = truth_codes.append, pred_codes.append
    logprob_of_a = status.logprob_of_a
    queries = tuple(enumerate(status.QUERIES))
    for i, item in enumerate(items):
        resolved, key = item.resolved, item.key
        for j, q in queries:
            spec = resolved[q]
            options = spec["options"]
            truth_append(code_of[spec["answer"]])
            ans = get((key, q))
            if ans is None:
                pred_append(-1)
                continue
            value, seen = ans.value, ans.options
            # Fast path, inlined: a canonical letter seen in the release's own option order.
            same_order = not seen or seen == options
            if value is None:
                pred_append(-1)
            elif same_order and (code := code_get(value) if type(value) is str else None) is not None:
                pred_append(code if code < len(options) else -1)
            else:
                pred_append(_status_code(ans, options))
            if j < 4 and (logprobs := ans.logprobs):
                # P of release option A (state_a / image_a) under the letter the model saw it as.
                seen_a = "A" if same_order else _seen_letter(0, seen, options)
                lp_where.append(i * 4 + j)
                lp_values.append(logprob_of_a(logprobs, seen_a) if seen_a else float("nan"))
    return truth_codes, pred_codes, lp_where, lp_values


def score_status(items: Sequence[ScoringItem], answers: Mapping[tuple, RunAnswer]) -> ItemMatrix:
    """One pass over the stored answers into flat code lists (the only per-answer Python work),
    then the numpy scoring of ``status.item_matrix``."""
    n = len(items)
    truth_codes, pred_codes, lp_where, lp_values = _status_scan(items, answers)
    truth = np.array(truth_codes, dtype=np.int8).reshape(n, 6)
    pred = np.array(pred_codes, dtype=np.int8).reshape(n, 6)
    matrix = status.item_matrix(
        truth,
        pred,
        categories=[it.payload.get("category") for it in items],
        differences=[it.payload.get("difference") for it in items],
    )
    if lp_where:
        p_a = np.full(n * 4, np.nan)
        p_a[np.array(lp_where, dtype=np.int64)] = lp_values
        matrix.diagnostics["reassigned"] = status.reassigned(p_a.reshape(n, 4))
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

def random_oscbench_matrix(items: Sequence[ScoringItem], *, seed: int) -> ItemMatrix:
    """The Random judge's item matrix: the very draws of ``random_answers("oscbench", ...)``
    (one 1-5 score per criterion and video), handed to the scoring as arrays instead of 100k
    answer dicts that would only be read back into the same arrays."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(1, 6, size=(len(items), len(oscbench.CRITERIA))).astype(np.int64)
    return oscbench.item_matrix(
        draws,
        np.ones_like(draws),
        scenarios=[it.payload.get("scenario") for it in items],
        action_categories=[it.payload.get("action_category") for it in items],
    )


def random_answers(protocol: str, items: Sequence[ScoringItem], *, seed: int) -> dict[tuple, RunAnswer]:
    """Seeded random answers for every query, scored through the same code as any model."""
    rng = np.random.default_rng(seed)
    out: dict[tuple, RunAnswer] = {}
    if protocol == "oscbench":  # one draw for all videos: the rating tables are large
        draws = rng.integers(1, 6, size=(len(items), len(oscbench.CRITERIA))).tolist()
        for item, row in zip(items, draws):
            out[(item.key, "judge")] = RunAnswer(dict(zip(oscbench.CRITERIA, row)), [])
        return out
    if protocol == "status":  # one draw per query, in item and query order
        sizes = [len(item.resolved[q].get("options") or []) for item in items for q in item.resolved]
        picks = rng.integers(0, np.maximum(sizes, 1)).tolist() if sizes else []
        it = iter(picks)
        for item in items:
            for q, spec in item.resolved.items():
                options = list(spec.get("options") or [])
                out[(item.key, q)] = RunAnswer(LETTERS[next(it)], options)
        return out
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
    """The Human row: one scored row per *item* that has blind answers; ``blind``: item key -> answers.

    Each blind answer is scored like a model's answer; an item's cell is then the mean score of
    its answers (sum of their numerators over sum of their denominators, which is the mean
    because every answer to one item has the same denominator), i.e. the expected score of a
    randomly picked annotator on that item. Items therefore weigh equally however many people
    answered them, the bootstrap resamples items, and ``n`` counts items. An empty or
    unparseable blind answer scores 0 for its share and counts in ``parse_failures``.
    """
    rows: list[ScoringItem] = []
    answers: dict[tuple, RunAnswer] = {}
    owner: list[int] = []
    answered_items = 0
    for item in items:
        given = list(blind.get(item.key, ()))
        if not given:
            continue
        for k, raw in enumerate(given):
            key = (item.key, k)
            rows.append(ScoringItem(key=key, external_id=item.external_id, payload=item.payload, resolved=item.resolved))
            owner.append(answered_items)
            spec = item.resolved["qa"]
            value = None
            if raw not in (None, "", []):
                fmt = (spec.get("format") or item.payload.get("format")) if protocol == "visualtrans" else None
                value = parse_answer(protocol, "qa", raw, spec.get("options") or [], fmt=fmt)
            answers[(key, "qa")] = RunAnswer(value)
        answered_items += 1
    per_answer = SCORERS[protocol](rows, answers)
    owners = np.asarray(owner, dtype=np.int64)
    num = np.zeros((answered_items, len(per_answer.keys)), dtype=np.int64)
    den = np.zeros_like(num)
    np.add.at(num, owners, per_answer.num.astype(np.int64))
    np.add.at(den, owners, per_answer.den.astype(np.int64))
    matrix = ItemMatrix(keys=per_answer.keys, num=num, den=den, parse_failures=per_answer.parse_failures, n=answered_items)
    matrix.diagnostics = {k: v for k, v in per_answer.diagnostics.items() if k != "unsupported"}
    matrix.diagnostics["blind_answers"] = {"answers": len(rows), "items": answered_items, "combined": "mean score of an item's answers, items weighted equally"}
    return matrix


def protocol_has_human_row(protocol: str) -> bool:
    return protocol in ("visualtrans", "m3verse")


def iter_keys(matrix: ItemMatrix) -> Iterable[str]:
    return matrix.keys
