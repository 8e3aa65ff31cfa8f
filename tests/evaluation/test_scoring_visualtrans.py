"""VisualTrans rows of the paper's Table 2 from predictions with the same counts."""

from decimal import Decimal
from fractions import Fraction

import numpy as np

from protocols.kit.answers import parse_answer
from protocols.kit.matrix import percent
from protocols.visualtrans import scoring as visualtrans

SIZES = {"fine_grained": 168, "global": 50, "intermediate": 88, "causal": 86, "planning": 42, "quantitative": 63}


def run(correct_counts, unsupported=()):
    subtasks, correct, present = [], [], []
    for subtask, size in SIZES.items():
        for i in range(size):
            subtasks.append(subtask)
            present.append(subtask not in unsupported)
            correct.append(subtask not in unsupported and i < correct_counts.get(subtask, 0))
    matrix = visualtrans.item_matrix(subtasks, correct, present)
    return matrix, visualtrans.printed(matrix)


def test_gpt4o_row_digit_for_digit():
    counts = dict(zip(SIZES, [51, 15, 28, 31, 19, 36]))
    _, row = run(counts)
    assert [str(row[k]) for k in visualtrans.KEYS] == [
        "30.36",
        "30.00",
        "30.18",
        "31.82",
        "36.05",
        "45.24",
        "37.70",
        "57.14",
        "36.22",
    ]


def test_phi4_row_with_unsupported_intermediate():
    counts = {"fine_grained": 32, "global": 10, "causal": 28, "planning": 6, "quantitative": 15}
    matrix, row = run(counts, unsupported=("intermediate",))
    # 32/168 = 19.048, 10/50, (19.05 + 20.00) / 2 = 19.525, -, 28/86 = 32.558, 6/42 = 14.286,
    # (32.56 + 14.29) / 2 = 23.425, 15/63 = 23.810, 91/497 = 18.310 (the paper's Table 2 row).
    assert [None if row[k] is None else str(row[k]) for k in visualtrans.KEYS] == [
        "19.05",
        "20.00",
        "19.53",
        None,
        "32.56",
        "14.29",
        "23.43",
        "23.81",
        "18.31",
    ]
    assert matrix.diagnostics["unsupported"] == ["intermediate"]
    assert matrix.n == 497
    # Averaging the unrounded subtask accuracies would print 23.42: the printed convention matters.
    assert percent((Fraction(28, 86) + Fraction(6, 42)) / 2) == Decimal("23.42")


def test_unparseable_answer_keeps_subtask_supported():
    from evaluation.scoring.answer_sets import ModelAnswer, ScoringItem
    from protocols.visualtrans.scoring import score as score_visualtrans

    items = [
        ScoringItem(
            key=k,
            external_id=k,
            payload={"subtask": subtask, "format": "count"},
            resolved={"qa": {"format": "count", "answer": 2}},
        )
        for k, subtask in (("q1", "fine_grained"), ("q2", "global"), ("q3", "global"))
    ]
    raw = parse_answer("visualtrans", "qa", "two or three", [], fmt="count")
    assert raw is None  # unparseable
    answers = {("q1", "qa"): ModelAnswer(raw), ("q2", "qa"): ModelAnswer(2)}  # q3: no prediction at all
    matrix = score_visualtrans(items, answers)
    row = visualtrans.printed(matrix)
    assert row["fine_grained"] == Decimal("0.00")  # answered, unreadable: supported and wrong
    assert row["global"] == Decimal("50.00")
    assert matrix.diagnostics["unsupported"] == []
    assert matrix.parse_failures == 2  # the unreadable answer and the missing one in a supported subtask


def test_formats_normalize_before_exact_match():
    assert visualtrans.is_correct(
        "choice", "b", parse_answer("visualtrans", "qa", "Answer: (B)", ["x", "y"], fmt="choice")
    )
    assert visualtrans.is_correct("count", 3, parse_answer("visualtrans", "qa", " 3 ", [], fmt="count"))
    assert visualtrans.is_correct(
        "set", ["Apple", "pear"], parse_answer("visualtrans", "qa", "pear,  apple", [], fmt="set")
    )
    assert not visualtrans.is_correct("set", ["apple", "pear"], ["apple"])
    assert not visualtrans.is_correct("set", ["apple", "pear"], ["apple", "pear", "fig"])
    assert not visualtrans.is_correct("set", ["apple", "apple"], ["apple"])  # a multiset
    assert not visualtrans.is_correct("count", 3, None)


def test_human_row_combines_answers_per_item_and_resamples_items():
    from evaluation.scoring.answer_sets import ScoringItem, score_blind_answers
    from protocols.kit.matrix import bootstrap_means

    items = [
        ScoringItem(
            key=k,
            external_id=k,
            payload={"subtask": "global", "format": "count"},
            resolved={"qa": {"format": "count", "answer": 2}},
        )
        for k in ("q1", "q2")
    ]
    # q1: three annotators, all right; q2: one annotator, wrong. Pooling answers would give 3/4.
    matrix = score_blind_answers("visualtrans", items, {"q1": [2, "2", 2], "q2": [5]})
    assert matrix.n == 2 and matrix.num.shape[0] == 2
    assert visualtrans.printed(matrix)["overall"] == Decimal("50.00")
    assert matrix.diagnostics["blind_answers"]["answers"] == 4
    # Resampling items can only give 0, 1/2 or 1 (resampling answers would also give 1/4, 3/4).
    samples = bootstrap_means(matrix, n_boot=200, seed=1)[:, matrix.column("overall")]
    assert set(np.round(samples, 12)) <= {0.0, 0.5, 1.0}
    assert len(set(np.round(samples, 12))) == 3
