"""VisualTrans scoring (docs/protocols/visualtrans.md). Plain Python + numpy, no Django.

Dimension means follow the paper's convention: the mean of the *printed* (two-decimal) subtask
accuracies, computed in decimal arithmetic and rounded half up, over the subtasks the model
could answer. Overall is item-weighted; an unsupported subtask (no prediction at all for its
questions) counts as wrong there and prints as None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal, localcontext
from typing import Any

import numpy as np

from protocols.kit.answers import normalize_int, normalize_letter
from protocols.kit.bootstrap import N_BOOT
from protocols.kit.items import ModelAnswer, ScoringItem, letter_in_release
from protocols.kit.matrix import ItemMatrix, bootstrap_cis, nanmean_rows, percent
from protocols.normalize import answer_multiset
from protocols.visualtrans import SUBTASKS

DIMENSIONS = {
    "spatial_mean": ("fine_grained", "global"),
    "procedural_mean": ("intermediate", "causal", "planning"),
}
KEYS = (
    "fine_grained",
    "global",
    "spatial_mean",
    "intermediate",
    "causal",
    "planning",
    "procedural_mean",
    "quantitative",
    "overall",
)
BASE_KEYS = SUBTASKS + ("overall",)


def is_correct(fmt: str, truth: Any, predicted: Any) -> bool:
    """Exact match of the normalized scalar (choice, count) or multiset (set). None is wrong."""
    if predicted is None:
        return False
    if fmt == "choice":
        t, p = normalize_letter(truth), normalize_letter(predicted)
        return t is not None and t == p
    if fmt == "count":
        t, p = normalize_int(truth), normalize_int(predicted)
        return t is not None and t == p
    if fmt == "set":
        t, p = answer_multiset(truth), answer_multiset(predicted)
        return t is not None and t == p
    raise ValueError(f"unknown visualtrans format {fmt!r}")


def item_matrix(
    subtasks: Sequence[str],
    correct: Sequence[bool] | np.ndarray,
    present: Sequence[bool] | np.ndarray,
    *,
    parse_failures: int = 0,
) -> ItemMatrix:
    """Scored matrix from per-question subtask, correctness and whether any prediction exists.

    ``present[i]`` is False when the model produced no prediction at all for question i; a
    subtask none of whose questions has one is unsupported (its column counts no row).
    """
    subtasks = np.asarray(subtasks)
    correct = np.asarray(correct, dtype=bool) & np.asarray(present, dtype=bool)
    present = np.asarray(present, dtype=bool)
    n = subtasks.shape[0]
    num = np.zeros((n, len(BASE_KEYS)), dtype=np.int64)
    den = np.zeros((n, len(BASE_KEYS)), dtype=np.int64)
    unsupported = []
    for j, subtask in enumerate(SUBTASKS):
        member = subtasks == subtask
        if member.any() and not present[member].any():
            unsupported.append(subtask)
            continue
        num[:, j] = np.where(member, correct, 0)
        den[:, j] = member
    num[:, -1] = correct
    den[:, -1] = 1
    matrix = ItemMatrix(keys=BASE_KEYS, num=num, den=den, parse_failures=parse_failures, n=n)
    matrix.diagnostics["unsupported"] = unsupported
    return matrix


def dimension_mean(values: Sequence[Decimal | None]) -> Decimal | None:
    """Mean of printed subtask values (Decimal) over the available ones, rounded half up."""
    avail = [v for v in values if v is not None]
    if not avail:
        return None
    with localcontext() as ctx:
        ctx.prec = 50
        mean = sum(avail, Decimal(0)) / Decimal(len(avail))
        return mean.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def printed(matrix: ItemMatrix) -> dict[str, Decimal | None]:
    exact = matrix.exact_means()
    sub = {k: (None if exact[k] is None else percent(exact[k])) for k in SUBTASKS}
    out: dict[str, Decimal | None] = {}
    for key in KEYS:
        if key in DIMENSIONS:
            out[key] = dimension_mean([sub[s] for s in DIMENSIONS[key]])
        elif key == "overall":
            out[key] = None if exact["overall"] is None else percent(exact["overall"])
        else:
            out[key] = sub[key]
    return out


def _derive(base: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {dim: nanmean_rows([base[s] for s in subs]) for dim, subs in DIMENSIONS.items()}


def cis(matrix: ItemMatrix, *, n_boot: int = N_BOOT, seed: int = 0) -> dict[str, list[float] | None]:
    return bootstrap_cis(matrix, keys=KEYS, derive=_derive, n_boot=n_boot, seed=seed)


def random_answer(
    fmt: str,
    options: Sequence[str],
    rng: np.random.Generator,
    *,
    set_pool: Sequence[str] = (),
    count_range: tuple[int, int] = (0, 10),
) -> Any:
    """A seeded random answer of the item's format (choice letter, count, non-empty subset of the pool)."""
    if fmt == "choice":
        return chr(65 + int(rng.integers(0, max(len(options), 1))))
    if fmt == "count":
        return int(rng.integers(count_range[0], count_range[1] + 1))
    pool = sorted(set(set_pool)) or ["?"]
    k = int(rng.integers(1, len(pool) + 1))
    return sorted(str(x) for x in rng.choice(pool, size=k, replace=False))


# --- one answer set -> item matrix ---------------------------------------------------------


def score(items: Sequence[ScoringItem], answers: Mapping[tuple, ModelAnswer]) -> ItemMatrix:
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
            letter = letter_in_release(ans, spec["options"])
            value = letter
        correct.append(is_correct(fmt, spec["answer"], value))
    # Missing or unparseable answers are failures, except in unsupported subtasks (reported apart).
    answered = {
        i for i, item in enumerate(items) if (a := answers.get((item.key, "qa"))) is not None and a.value is not None
    }
    supported = {s for s, p in zip(subtasks, present) if p}
    failures = sum(1 for i, s in enumerate(subtasks) if s in supported and i not in answered)
    return item_matrix(subtasks, correct, present, parse_failures=failures)


def random_answer_set(items: Sequence[ScoringItem], *, rng: np.random.Generator) -> dict[tuple, ModelAnswer]:
    """Seeded random answers in item and query order; set questions draw from the release's objects."""
    out: dict[tuple, ModelAnswer] = {}
    set_pool = [
        str(x)
        for it in items
        if (it.resolved.get("qa") or {}).get("format") == "set"
        for x in (it.resolved["qa"].get("answer") or [])
    ]
    for item in items:
        for q, spec in item.resolved.items():
            options = spec.get("options") or []
            fmt = spec.get("format") or item.payload.get("format")
            out[(item.key, q)] = ModelAnswer(random_answer(fmt, options, rng, set_pool=set_pool), list(options))
    return out
