"""VisualTrans rows of the paper's Table 2 from predictions with the same counts."""
from decimal import Decimal
from fractions import Fraction

from evaluation.scoring import visualtrans
from evaluation.scoring.answers import parse_answer
from evaluation.scoring.common import percent

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
        "30.36", "30.00", "30.18", "31.82", "36.05", "45.24", "37.70", "57.14", "36.22"
    ]


def test_phi4_row_with_unsupported_intermediate():
    counts = {"fine_grained": 32, "global": 10, "causal": 28, "planning": 6, "quantitative": 15}
    matrix, row = run(counts, unsupported=("intermediate",))
    assert row["intermediate"] is None
    assert row["procedural_mean"] == Decimal("23.43")  # (32.56 + 14.29) / 2 = 23.425, half up
    assert row["overall"] == Decimal("18.31")  # 91 / 497, the unsupported subtask counted wrong
    assert row["spatial_mean"] == Decimal("19.53")  # (19.05 + 20.00) / 2
    assert matrix.diagnostics["unsupported"] == ["intermediate"]
    # Averaging the unrounded subtask accuracies would print 23.42: the printed convention matters.
    assert percent((Fraction(28, 86) + Fraction(6, 42)) / 2) == Decimal("23.42")


def test_unparseable_answer_keeps_subtask_supported():
    matrix, row = run({"fine_grained": 0})
    assert row["fine_grained"] == Decimal("0.00")
    assert matrix.diagnostics["unsupported"] == []


def test_formats_normalize_before_exact_match():
    assert visualtrans.is_correct("choice", "b", parse_answer("visualtrans", "qa", "Answer: (B)", ["x", "y"], fmt="choice"))
    assert visualtrans.is_correct("count", 3, parse_answer("visualtrans", "qa", " 3 ", [], fmt="count"))
    assert visualtrans.is_correct("set", ["Apple", "pear"], parse_answer("visualtrans", "qa", "pear,  apple", [], fmt="set"))
    assert not visualtrans.is_correct("set", ["apple", "pear"], ["apple"])
    assert not visualtrans.is_correct("set", ["apple", "pear"], ["apple", "pear", "fig"])
    assert not visualtrans.is_correct("set", ["apple", "apple"], ["apple"])  # a multiset
    assert not visualtrans.is_correct("count", 3, None)
