"""ChangeIt-Frames state recognition scoring (docs/protocols/changeit.md). Plain numpy, no Django.

Per item four queries ``state:<strategy>:<condition>``; the model answers a 1-based candidate
number. State accuracy: the chosen candidate is the true label. Object accuracy: the chosen
label names the item's object (any state of the right object). Random chance = 10 %.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal

import numpy as np

from protocols.changeit import CONDITIONS, N_CANDIDATES, QUERIES, STRATEGIES
from protocols.kit.bootstrap import N_BOOT
from protocols.kit.items import ModelAnswer, ScoringItem, remap_index
from protocols.kit.matrix import ItemMatrix, bootstrap_cis, printed_means

KEYS = tuple(f"state_acc_{s}_{c}" for s in STRATEGIES for c in CONDITIONS) + tuple(
    f"object_acc_{s}_{c}" for s in STRATEGIES for c in CONDITIONS
)


def label_object_map(vocabulary: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """label -> object from an object -> labels vocabulary."""
    out: dict[str, str] = {}
    for obj, labels in vocabulary.items():
        for label in labels:
            out.setdefault(label, obj)
    return out


def chosen_object_correct(
    chosen: int | None,
    options: Sequence[str],
    item_object: str,
    label_objects: Mapping[str, str],
    distractors: Sequence[str] = (),
) -> bool:
    """Whether the chosen candidate (1-based) names the item's object.

    A label counts for the item's object when the vocabulary maps it there or it is one of the
    item's own distractors (wrong states of the same object).
    """
    if chosen is None or not 1 <= chosen <= len(options):
        return False
    label = options[chosen - 1]
    return label in distractors or label_objects.get(label) == item_object


def item_matrix(truth: np.ndarray, predicted: np.ndarray, object_correct: np.ndarray) -> ItemMatrix:
    """Scored matrix from (N, 4) truth numbers, predicted numbers (0 = missing) and object hits.

    Columns follow ``QUERIES``: state accuracies first, then object accuracies.
    """
    truth = np.asarray(truth, dtype=np.int64).reshape(-1, len(QUERIES))
    predicted = np.asarray(predicted, dtype=np.int64).reshape(-1, len(QUERIES))
    object_correct = np.asarray(object_correct, dtype=bool).reshape(-1, len(QUERIES))
    state = (predicted == truth) & (predicted > 0)
    num = np.hstack([state, object_correct & (predicted > 0)]).astype(np.int64)
    den = np.ones_like(num)
    return ItemMatrix(keys=KEYS, num=num, den=den, parse_failures=int((predicted <= 0).sum()), n=truth.shape[0])


def printed(matrix: ItemMatrix) -> dict[str, Decimal | None]:
    return printed_means(matrix, KEYS, places=2)


def cis(matrix: ItemMatrix, *, n_boot: int = N_BOOT, seed: int = 0) -> dict[str, list[float] | None]:
    return bootstrap_cis(matrix, keys=KEYS, n_boot=n_boot, seed=seed)


def random_answers(n_items: int, *, seed: int, n_candidates: int = N_CANDIDATES) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(1, n_candidates + 1, size=(n_items, len(QUERIES)))


# --- one answer set -> item matrix ---------------------------------------------------------


def label_objects(items: Sequence[ScoringItem]) -> dict[str, str]:
    vocab: dict[str, set[str]] = {}
    for item in items:
        vocab.setdefault(item.payload["object"], set()).add(item.payload["state"])
    return label_object_map({k: sorted(v) for k, v in vocab.items()})


def score(items: Sequence[ScoringItem], answers: Mapping[tuple, ModelAnswer]) -> ItemMatrix:
    n = len(items)
    objects_of = label_objects(items)
    truth = np.zeros((n, 4), dtype=np.int64)
    pred = np.zeros((n, 4), dtype=np.int64)
    obj = np.zeros((n, 4), dtype=bool)
    for i, item in enumerate(items):
        distractors = tuple(item.payload.get("distractors") or ())
        for j, q in enumerate(QUERIES):
            spec = item.resolved[q]
            truth[i, j] = spec["answer"]
            ans = answers.get((item.key, q))
            if ans is None or ans.value is None or isinstance(ans.value, bool) or not isinstance(ans.value, int):
                continue
            idx = remap_index(ans.value - 1, ans.options, spec["options"])
            if idx is None or not 0 <= idx < len(spec["options"]):
                continue
            pred[i, j] = idx + 1
            obj[i, j] = chosen_object_correct(idx + 1, spec["options"], item.payload["object"], objects_of, distractors)
    return item_matrix(truth, pred, obj)


def random_answer_set(items: Sequence[ScoringItem], *, rng: np.random.Generator) -> dict[tuple, ModelAnswer]:
    """Seeded random answers: a candidate number per query, in item and query order."""
    out: dict[tuple, ModelAnswer] = {}
    for item in items:
        for q, spec in item.resolved.items():
            options = spec.get("options") or []
            out[(item.key, q)] = ModelAnswer(int(rng.integers(1, len(options) + 1)), list(options))
    return out
