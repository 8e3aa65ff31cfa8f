"""STATUS Bench scoring (docs/protocols/status.md). Plain numpy, no Django.

Per item six queries in the fixed order ``QUERIES``; answers are letters encoded as integers
(A=0, B=1, ...; -1 = missing or unparseable, which is wrong and a parse failure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from protocols.base import LETTERS
from protocols.kit.answers import normalize_letter
from protocols.kit.bootstrap import N_BOOT
from protocols.kit.choice_columns import ChoiceAnswers, ChoiceItems, label_values
from protocols.kit.items import ModelAnswer, ScoringItem, remap_index, seen_letter
from protocols.kit.matrix import ItemMatrix, bootstrap_cis, percent, printed_means
from protocols.status import CATEGORIES, CHANCE, DIFFERENCES, QUERIES  # noqa: F401 (CHANCE: read here too)

N_OPTIONS = (2, 2, 2, 2, 2, 4)
KEYS = ("acc_osi", "acc_ir", "acc_sci", "oa", "racc_osi", "racc_ir", "racc_sci", "roa")
GROUPS = tuple(f"category:{c}" for c in CATEGORIES) + tuple(f"difference:{d}" for d in DIFFERENCES)


def encode_letters(letters: Any) -> np.ndarray:
    """Letters (str or None) -> int8 codes, -1 for None / anything that is not one letter A..Z."""
    arr = np.asarray(letters, dtype=object)
    out = np.full(arr.shape, -1, dtype=np.int8)
    flat_in, flat_out = arr.ravel(), out.ravel()
    for i, v in enumerate(flat_in):
        if isinstance(v, str) and len(v) == 1 and "A" <= v.upper() <= "Z":
            flat_out[i] = ord(v.upper()) - 65
    return out


def _metric_cells(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(num, den) of the eight metrics per item from a (N, 6) boolean correctness matrix."""
    c = c.astype(np.int8)
    osi_both = c[:, 0] & c[:, 1]
    ir_both = c[:, 2] & c[:, 3]
    num = np.stack(
        [
            c[:, 0] + c[:, 1],
            c[:, 2] + c[:, 3],
            c[:, 4],
            c[:, 0] + c[:, 1] + c[:, 2] + c[:, 3] + 2 * c[:, 4],  # (osi/2 + ir/2 + sci) / 3 over 6
            osi_both,
            ir_both,
            c[:, 5],
            osi_both & ir_both & c[:, 5],
        ],
        axis=1,
    )
    den = np.broadcast_to(np.array([2, 2, 1, 6, 1, 1, 1, 1], dtype=np.int8), num.shape)
    return num, den


def item_matrix(
    truth: np.ndarray,
    predicted: np.ndarray,
    *,
    categories: Sequence[str] | np.ndarray | None = None,
    differences: Sequence[str] | np.ndarray | None = None,
) -> ItemMatrix:
    """Scored matrix from (N, 6) truth and predicted letter codes (see ``encode_letters``).

    Columns: the eight ``KEYS`` over all items, then ``<group>:<key>`` for each category and
    difference group (den 0 outside the group). The paper's breakdowns are optional labels: a
    family (every category, or every difference) has columns only when at least one item carries
    one of its values, so a board of items without them (the authors' release as published) shows
    no empty breakdown tables.
    """
    truth = np.asarray(truth)
    predicted = np.asarray(predicted)
    correct = (predicted == truth) & (predicted >= 0)
    num, den = _metric_cells(correct)
    nums, dens, keys = [num], [den], list(KEYS)
    for labels, names, prefix in ((categories, CATEGORIES, "category"), (differences, DIFFERENCES, "difference")):
        if labels is None:
            continue
        labels = np.asarray(labels, dtype=object)
        if not carries_labels(labels, names):
            continue
        for name in names:
            member = (labels == name)[:, None]
            nums.append(np.where(member, num, 0))
            dens.append(np.where(member, den, 0))
            keys.extend(f"{prefix}:{name}:{k}" for k in KEYS)
    matrix = ItemMatrix(
        keys=tuple(keys),
        num=np.hstack(nums),
        den=np.hstack(dens),
        parse_failures=int((predicted < 0).sum()),
        n=int(truth.shape[0]),
    )
    matrix.diagnostics["same_letter"] = same_letter_bias(truth, predicted)
    return matrix


def carries_labels(labels: Sequence[Any] | np.ndarray, names: Sequence[str]) -> bool:
    """Whether any item's label is one of ``names`` (a breakdown family the board shows)."""
    allowed = set(names)
    return any(isinstance(v, str) and v in allowed for v in labels)


def same_letter_bias(truth: np.ndarray, predicted: np.ndarray) -> dict[str, Any]:
    """Among items whose OSI (IR) pair is not both correct, the share answered with one letter twice."""
    out: dict[str, Any] = {}
    wrong_total = same_total = 0
    for name, (a, b) in (("osi", (0, 1)), ("ir", (2, 3))):
        both_correct = (predicted[:, a] == truth[:, a]) & (predicted[:, b] == truth[:, b])
        wrong = ~both_correct
        same = wrong & (predicted[:, a] == predicted[:, b]) & (predicted[:, a] >= 0)
        w, s = int(wrong.sum()), int(same.sum())
        wrong_total += w
        same_total += s
        out[name] = {"wrong_items": w, "same_letter": s, "share": None if w == 0 else percent(Fraction(s, w))}
    out["combined"] = {
        "wrong_items": wrong_total,
        "same_letter": same_total,
        "share": None if wrong_total == 0 else percent(Fraction(same_total, wrong_total)),
    }
    return out


def logprob_of_a(logprobs: Mapping[str, float] | None, letter: str = "A") -> float:
    """log P(letter) as the model gave it for its first token; -inf (probability 0) when log-probs
    were stored without that letter; NaN when none were stored.

    Not renormalized over the option letters: docs/protocols/status.md and the STATUS paper (appendix A)
    compare the model's own P(A | image_a) with P(A | image_b); renormalizing by P(A) + P(B)
    would change that comparison whenever P(B) differs between the two images.
    """
    if not logprobs:
        return float("nan")
    value = logprobs.get(letter)
    if value is None:
        return float("-inf")  # below the stored top-k: probability 0, never 1
    return float(value)


def prob_of_a(logprobs: Mapping[str, float] | None, letter: str = "A") -> float:
    """P(letter) = exp(log P(letter)); 0 when absent from stored log-probs, NaN when none stored."""
    return float(np.exp(logprob_of_a(logprobs, letter)))


def reassigned(a_scores: np.ndarray) -> dict[str, Any]:
    """Rigorous accuracy after probability reassignment, from (N, 4) P(A) (or log P(A); only the
    order matters) for osi_a, osi_b, ir_a, ir_b.

    OSI is rigorously correct iff P(A | image_a) > P(A | image_b); IR iff P(A | state_a) >
    P(A | state_b). Ties are wrong (two absent A's are a tie at 0); an item whose query has no
    stored log-probs at all (NaN) is wrong.
    """
    a_scores = np.asarray(a_scores, dtype=np.float64)
    n = a_scores.shape[0]
    with np.errstate(invalid="ignore"):
        osi = a_scores[:, 0] > a_scores[:, 1]
        ir = a_scores[:, 2] > a_scores[:, 3]
    have = ~np.isnan(a_scores).any(axis=1)
    return {
        "n": n,
        "with_logprobs": int(have.sum()),
        "racc_osi": None if n == 0 else percent(Fraction(int(osi.sum()), n)),
        "racc_ir": None if n == 0 else percent(Fraction(int(ir.sum()), n)),
    }


def random_answers(n_items: int, *, seed: int) -> np.ndarray:
    """Seeded uniformly random letter codes (N, 6) over each query's options."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, k, size=n_items) for k in N_OPTIONS], axis=1).astype(np.int8)


def printed(matrix: ItemMatrix) -> dict[str, Decimal | None]:
    return printed_means(matrix, matrix.keys, places=2)


def cis(matrix: ItemMatrix, *, n_boot: int = N_BOOT, seed: int = 0) -> dict[str, list[float] | None]:
    return bootstrap_cis(matrix, keys=matrix.keys, n_boot=n_boot, seed=seed)


# --- one answer set -> item matrix ---------------------------------------------------------

_LETTER_CODE = {letter: i for i, letter in enumerate(LETTERS)}


def _status_code(ans: ModelAnswer, options: list) -> int:
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
        mapped = remap_index(code, seen, options)
        if mapped is None:
            return -1
        code = mapped
    return code if code < len(options) else -1


def _status_scan(items: Sequence[ScoringItem], answers: Mapping[tuple, ModelAnswer]):
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
    logprob_a = logprob_of_a
    queries = tuple(enumerate(QUERIES))
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
                seen_a = "A" if same_order else seen_letter(0, seen, options)
                lp_where.append(i * 4 + j)
                lp_values.append(logprob_a(logprobs, seen_a) if seen_a else float("nan"))
    return truth_codes, pred_codes, lp_where, lp_values


def score(items: Sequence[ScoringItem], answers: Mapping[tuple, ModelAnswer]) -> ItemMatrix:
    """One pass over the stored answers into flat code lists (the only per-answer Python work),
    then the numpy scoring of ``item_matrix``."""
    n = len(items)
    truth_codes, pred_codes, lp_where, lp_values = _status_scan(items, answers)
    truth = np.array(truth_codes, dtype=np.int8).reshape(n, 6)
    pred = np.array(pred_codes, dtype=np.int8).reshape(n, 6)
    matrix = item_matrix(
        truth,
        pred,
        categories=[it.payload.get("category") for it in items],
        differences=[it.payload.get("difference") for it in items],
    )
    if lp_where:
        p_a = np.full(n * 4, np.nan)
        p_a[np.array(lp_where, dtype=np.int64)] = lp_values
        matrix.diagnostics["reassigned"] = reassigned(p_a.reshape(n, 4))
    return matrix


def random_answer_set(items: Sequence[ScoringItem], *, rng: np.random.Generator) -> dict[tuple, ModelAnswer]:
    """Seeded random answers: one draw per query, in item and query order."""
    out: dict[tuple, ModelAnswer] = {}
    sizes = [len(item.resolved[q].get("options") or []) for item in items for q in item.resolved]
    picks = rng.integers(0, np.maximum(sizes, 1)).tolist() if sizes else []
    it = iter(picks)
    for item in items:
        for q, spec in item.resolved.items():
            options = list(spec.get("options") or [])
            out[(item.key, q)] = ModelAnswer(LETTERS[next(it)], options)
    return out


# --- the board's array form (protocols/kit/choice_columns.py) ------------------------------
# The same scores as ``score`` and ``random_answer_set`` + ``score``, from arrays read straight from
# the database (evaluation/scoring/arrays.py) instead of records and answer objects.

COLUMN_LABELS = {"category": CATEGORIES, "difference": DIFFERENCES}  # payload fields read as label codes
LOGPROB_COLUMNS = 4  # the OSI and IR queries: their log P(A) feeds the reassigned accuracies


def column_answer(ans: ModelAnswer, options: list, column: int) -> tuple[int, bool, float]:
    """One stored answer that the array reader could not map by itself (an answer that is not a
    bare letter, an option order other than the release's, odd log-probs): (letter code in the
    release's order, whether log-probs count, log P(release option A)), as ``_status_scan`` reads it."""
    code = _status_code(ans, options)
    logprobs = ans.logprobs
    if column >= LOGPROB_COLUMNS or not logprobs:
        return code, False, float("nan")
    seen = ans.options
    seen_a = "A" if not seen or seen == options else seen_letter(0, seen, options)
    return code, True, logprob_of_a(logprobs, seen_a) if seen_a else float("nan")


def score_columns(items: ChoiceItems, answers: ChoiceAnswers) -> ItemMatrix:
    """``score`` of the same items and answers, given as arrays."""
    if items.queries != QUERIES:
        raise ValueError(f"STATUS columns must be {QUERIES}, got {items.queries}")
    matrix = item_matrix(
        items.truth,
        answers.predicted,
        categories=label_values(items.labels["category"], CATEGORIES),
        differences=label_values(items.labels["difference"], DIFFERENCES),
    )
    has = answers.has_logprobs[:, :LOGPROB_COLUMNS]
    if has.any():
        matrix.diagnostics["reassigned"] = reassigned(np.where(has, answers.logprob_a[:, :LOGPROB_COLUMNS], np.nan))
    return matrix


def random_columns(items: ChoiceItems, *, rng: np.random.Generator) -> ChoiceAnswers:
    """``random_answer_set``'s draws as arrays: one draw per query in item and stored query order,
    over the query's options, seen in the release's order."""
    order = np.asarray(items.key_order, dtype=np.intp)
    sizes = items.n_options[:, order].astype(np.int64).ravel()
    picks = rng.integers(0, np.maximum(sizes, 1)).reshape(items.n, len(order)) if sizes.size else sizes
    predicted = np.full(items.truth.shape, -1, dtype=np.int8)
    shown = items.n_options[:, order]
    predicted[:, order] = np.where(picks < shown, picks, -1).reshape(items.n, len(order))
    empty = np.zeros(items.truth.shape, dtype=bool)
    return ChoiceAnswers(predicted=predicted, has_logprobs=empty, logprob_a=np.full(items.truth.shape, np.nan))
