"""From plain items and an answer set (one model's answers) to its scores, through each protocol's
scoring module (``Protocol.scoring``: protocols/base.py). No Django.

Items and answers: protocols/kit/items.py (``ScoringItem``, ``ModelAnswer``, re-exported here).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np

from protocols import registry
from protocols.kit.answers import answer_parser
from protocols.kit.bootstrap import N_BOOT
from protocols.kit.items import ModelAnswer, ScoringItem
from protocols.kit.matrix import ItemMatrix

__all__ = [
    "ModelAnswer",
    "ScoredAnswers",
    "ScoringItem",
    "chance",
    "finish",
    "main_keys",
    "random_answers",
    "score",
    "score_blind_answers",
]


@dataclass
class ScoredAnswers:
    matrix: ItemMatrix
    printed: dict[str, Decimal | None]
    cis: dict[str, list[float] | None]
    extra: dict[str, Any] = field(default_factory=dict)


def main_keys(protocol: str) -> tuple[str, ...]:
    return registry.get(protocol).scoring.KEYS


def chance(protocol: str, key: str) -> Decimal | None:
    """Chance level (percent) of a metric or breakdown key ("category:positional:roa" -> roa's), as
    the protocol states it (``Protocol.chance``); None where no fixed chance exists: the Random row
    shows it empirically."""
    return registry.get(protocol).chance(key.rsplit(":", 1)[-1])


def is_percent(protocol: str) -> bool:
    """Whether the protocol's figures are percentages (else 0-1 scores, e.g. video ratings)."""
    return registry.get(protocol).percent


def score(
    protocol: str,
    items: Sequence[ScoringItem],
    answers: Mapping[tuple, ModelAnswer],
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> ScoredAnswers:
    matrix = registry.get(protocol).scoring.score(items, answers)
    return finish(protocol, matrix, n_boot=n_boot, seed=seed)


def finish(protocol: str, matrix: ItemMatrix, *, n_boot: int = N_BOOT, seed: int = 0) -> ScoredAnswers:
    module = registry.get(protocol).scoring
    return ScoredAnswers(
        matrix=matrix, printed=module.printed(matrix), cis=module.cis(matrix, n_boot=n_boot, seed=seed)
    )


# --- Random rows ----------------------------------------------------------------------------


def random_answers(protocol: str, items: Sequence[ScoringItem], *, seed: int) -> dict[tuple, ModelAnswer]:
    """Seeded random answers for every query, scored through the same code as any model."""
    return registry.get(protocol).scoring.random_answer_set(items, rng=np.random.default_rng(seed))


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
    answers: dict[tuple, ModelAnswer] = {}
    owner: list[int] = []
    answered_items = 0
    parse_answer = answer_parser(protocol)
    for item in items:
        given = list(blind.get(item.key, ()))
        if not given:
            continue
        for k, raw in enumerate(given):
            key = (item.key, k)
            rows.append(
                ScoringItem(key=key, external_id=item.external_id, payload=item.payload, resolved=item.resolved)
            )
            owner.append(answered_items)
            spec = item.resolved["qa"]
            value = None
            if raw not in (None, "", []):
                fmt = spec.get("format") or item.payload.get("format")
                value = parse_answer("qa", raw, spec.get("options") or [], fmt=fmt)
            answers[(key, "qa")] = ModelAnswer(value)
        answered_items += 1
    per_answer = registry.get(protocol).scoring.score(rows, answers)
    owners = np.asarray(owner, dtype=np.int64)
    num = np.zeros((answered_items, len(per_answer.keys)), dtype=np.int64)
    den = np.zeros_like(num)
    np.add.at(num, owners, per_answer.num.astype(np.int64))
    np.add.at(den, owners, per_answer.den.astype(np.int64))
    matrix = ItemMatrix(
        keys=per_answer.keys, num=num, den=den, parse_failures=per_answer.parse_failures, n=answered_items
    )
    matrix.diagnostics = {k: v for k, v in per_answer.diagnostics.items() if k != "unsupported"}
    matrix.diagnostics["blind_answers"] = {
        "answers": len(rows),
        "items": answered_items,
        "combined": "mean score of an item's answers, items weighted equally",
    }
    return matrix


def protocol_has_human_row(protocol: str) -> bool:
    return registry.get(protocol).human_row
