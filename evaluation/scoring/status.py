"""STATUS Bench scoring (PROTOCOLS.md §1). Plain numpy, no Django.

Per item six queries in the fixed order ``QUERIES``; answers are letters encoded as integers
(A=0, B=1, ...; -1 = missing or unparseable, which is wrong and a parse failure).
"""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any, Mapping, Sequence

import numpy as np

from .common import ItemMatrix, bootstrap_cis, percent, printed_means

QUERIES = ("osi_a", "osi_b", "ir_a", "ir_b", "sci2", "sci4")
N_OPTIONS = (2, 2, 2, 2, 2, 4)
KEYS = ("acc_osi", "acc_ir", "acc_sci", "oa", "racc_osi", "racc_ir", "racc_sci", "roa")
CATEGORIES = ("positional", "functional", "other")
DIFFERENCES = ("slight", "significant")
GROUPS = tuple(f"category:{c}" for c in CATEGORIES) + tuple(f"difference:{d}" for d in DIFFERENCES)
# Chance per metric (percent), shown on every table.
CHANCE = {
    "acc_osi": Decimal("50.00"), "acc_ir": Decimal("50.00"), "acc_sci": Decimal("50.00"), "oa": Decimal("50.00"),
    "racc_osi": Decimal("25.00"), "racc_ir": Decimal("25.00"), "racc_sci": Decimal("25.00"), "roa": Decimal("1.56"),
}


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
    difference group (den 0 outside the group).
    """
    truth = np.asarray(truth)
    predicted = np.asarray(predicted)
    correct = (predicted == truth) & (predicted >= 0)
    num, den = _metric_cells(correct)
    nums, dens, keys = [num], [den], list(KEYS)
    for labels, names, prefix in ((categories, CATEGORIES, "category"), (differences, DIFFERENCES, "difference")):
        if labels is None:
            continue
        labels = np.asarray(labels)
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

    Not renormalized over the option letters: PROTOCOLS.md §1 and the STATUS paper (appendix A)
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


def all_keys(matrix: ItemMatrix) -> tuple[str, ...]:
    return matrix.keys


def printed(matrix: ItemMatrix) -> dict[str, Decimal | None]:
    return printed_means(matrix, matrix.keys, places=2)


def cis(matrix: ItemMatrix, *, n_boot: int = 1000, seed: int = 0) -> dict[str, list[float] | None]:
    return bootstrap_cis(matrix, keys=matrix.keys, n_boot=n_boot, seed=seed)

