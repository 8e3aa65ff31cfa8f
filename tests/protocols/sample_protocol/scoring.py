"""Lid check scoring: a question is right when the answer's letter is the known one. No Django."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal

import numpy as np

from protocols.kit.bootstrap import N_BOOT
from protocols.kit.items import ModelAnswer, ScoringItem, letter_in_release
from protocols.kit.matrix import ItemMatrix, bootstrap_cis, printed_means

from .fields import STATES

KEYS = ("accuracy",) + tuple(f"acc_{state}" for state in STATES)


def score(items: Sequence[ScoringItem], answers: Mapping[tuple, ModelAnswer]) -> ItemMatrix:
    num = np.zeros((len(items), len(KEYS)), dtype=np.int64)
    den = np.zeros_like(num)
    failures = 0
    for i, item in enumerate(items):
        spec = item.resolved["qa"]
        letter = letter_in_release(answers.get((item.key, "qa")), spec["options"])
        failures += letter is None
        right = int(letter is not None and letter == spec["answer"])
        num[i, 0], den[i, 0] = right, 1
        state = item.payload.get("state")
        if state in STATES:
            j = KEYS.index(f"acc_{state}")
            num[i, j], den[i, j] = right, 1
    return ItemMatrix(keys=KEYS, num=num, den=den, parse_failures=failures, n=len(items))


def printed(matrix: ItemMatrix) -> dict[str, Decimal | None]:
    return printed_means(matrix, KEYS, places=2)


def cis(matrix: ItemMatrix, *, n_boot: int = N_BOOT, seed: int = 0) -> dict[str, list[float] | None]:
    return bootstrap_cis(matrix, keys=KEYS, n_boot=n_boot, seed=seed)


def random_answer_set(items: Sequence[ScoringItem], *, rng: np.random.Generator) -> dict[tuple, ModelAnswer]:
    """Seeded random letters, in item order."""
    return {
        (item.key, "qa"): ModelAnswer("AB"[int(rng.integers(0, 2))], list(item.resolved["qa"]["options"]))
        for item in items
    }
