"""M3-Verse scoring (docs/protocols/m3verse.md). Plain numpy, no Django.

One question: predicted set P, truth G -> 0 if P has anything outside G, else |P| / |G|.
Averages are question-weighted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal

import numpy as np

from protocols.kit.bootstrap import N_BOOT
from protocols.kit.items import ModelAnswer, ScoringItem, letter_in_release
from protocols.kit.matrix import ItemMatrix, bootstrap_cis, printed_means
from protocols.m3verse import CAPABILITIES, CONTEXTS

# The main table's columns in the paper's Table 2 order: Overall; Intra-state Avg., S. U., T. U.,
# A. R., Rs; Inter-state likewise. Hallucination and factual (not in Table 2) come last.
KEYS = (
    ("overall",)
    + tuple(key for c in CONTEXTS for key in (c, *(f"{c}_{cap}" for cap in CAPABILITIES)))
    + ("hallucination", "factual")
)


def question_credit(predicted: Sequence[str] | None, truth: Sequence[str]) -> tuple[int, int]:
    """(numerator, denominator) of one question's partial credit."""
    g = {t.upper() for t in truth}
    if not g:
        raise ValueError("a question needs at least one correct option")
    if not predicted:
        return 0, len(g)
    p = {x.upper() for x in predicted}
    if p - g:
        return 0, len(g)
    return len(p), len(g)


def item_matrix(
    credits: Sequence[tuple[int, int]] | np.ndarray,
    contexts: Sequence[str],
    capabilities: Sequence[Sequence[str]],
    hallucination: Sequence[bool],
    *,
    parse_failures: int = 0,
) -> ItemMatrix:
    credits = np.asarray(credits, dtype=np.int64).reshape(-1, 2)
    n = credits.shape[0]
    contexts = np.asarray(contexts)
    hall = np.asarray(hallucination, dtype=bool)
    caps = [set(c) for c in capabilities]
    member = np.zeros((n, len(KEYS)), dtype=bool)
    column = KEYS.index
    member[:, column("overall")] = True
    for ctx in CONTEXTS:
        in_context = contexts == ctx
        member[:, column(ctx)] = in_context
        for cap in CAPABILITIES:
            member[:, column(f"{ctx}_{cap}")] = in_context & np.array([cap in c for c in caps], dtype=bool)
    member[:, column("hallucination")] = hall
    member[:, column("factual")] = ~hall
    num = np.where(member, credits[:, :1], 0)
    den = np.where(member, credits[:, 1:], 0)
    return ItemMatrix(keys=KEYS, num=num, den=den, parse_failures=parse_failures, n=n)


def printed(matrix: ItemMatrix) -> dict[str, Decimal | None]:
    return printed_means(matrix, KEYS, places=2)


def cis(matrix: ItemMatrix, *, n_boot: int = N_BOOT, seed: int = 0) -> dict[str, list[float] | None]:
    return bootstrap_cis(matrix, keys=KEYS, n_boot=n_boot, seed=seed)


def random_answer(n_options: int, rng: np.random.Generator) -> list[str]:
    """A seeded random non-empty subset of the option letters."""
    k = int(rng.integers(1, n_options + 1))
    picked = rng.choice(n_options, size=k, replace=False)
    return sorted(chr(65 + int(i)) for i in picked)


# --- one answer set -> item matrix ---------------------------------------------------------


def score(items: Sequence[ScoringItem], answers: Mapping[tuple, ModelAnswer]) -> ItemMatrix:
    credits, failures = [], 0
    for item in items:
        spec = item.resolved["qa"]
        ans = answers.get((item.key, "qa"))
        predicted = None
        if ans is not None and ans.value is not None:
            letters = ans.value if isinstance(ans.value, list) else [ans.value]
            mapped = [letter_in_release(ModelAnswer(v, ans.options), spec["options"]) for v in letters]
            predicted = None if any(m is None for m in mapped) else sorted(set(mapped))
        if predicted is None:
            failures += 1
        credits.append(question_credit(predicted, spec["answer"]))
    return item_matrix(
        credits,
        [it.payload.get("context") for it in items],
        [it.payload.get("capabilities") or [] for it in items],
        [bool(it.payload.get("hallucination")) for it in items],
        parse_failures=failures,
    )


def random_answer_set(items: Sequence[ScoringItem], *, rng: np.random.Generator) -> dict[tuple, ModelAnswer]:
    """Seeded random answers (a random non-empty set of letters) in item and query order."""
    out: dict[tuple, ModelAnswer] = {}
    for item in items:
        for q, spec in item.resolved.items():
            options = spec.get("options") or []
            out[(item.key, q)] = ModelAnswer(random_answer(len(options), rng), list(options))
    return out
