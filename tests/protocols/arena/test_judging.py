"""The arena judge's statistics (protocols/arena/judging.py) against figures worked out by hand."""

import math
import subprocess
import sys
from pathlib import Path

import pytest
from scipy import stats as sps

from protocols.arena import judging

# Four pairs judged once each way. Letters are what the judge answered in shown terms; the
# verdicts (item terms) are worked out beside them.
ROWS = [
    ("p1", "judge_ab", "A"),  # a shown first, first wins -> a
    ("p1", "judge_ba", "B"),  # b shown first, second wins -> a      (consistent: a)
    ("p2", "judge_ab", "A"),  # -> a
    ("p2", "judge_ba", "A"),  # b first, first wins -> b             (inconsistent: tie)
    ("p3", "judge_ab", "C"),  # tie
    ("p3", "judge_ba", "C"),  # tie                                   (consistent: tie)
    ("p4", "judge_ab", "B"),  # -> b
    ("p4", "judge_ba", None),  # unreadable                           (one ask: b)
    ("p5", "other", "A"),  # not an arena ask: left out
]


def test_asks_map_letters_back_to_the_items_sides():
    asks = judging.run_asks(ROWS)
    assert asks == {
        "p1": {"judge_ab": "a", "judge_ba": "a"},
        "p2": {"judge_ab": "a", "judge_ba": "b"},
        "p3": {"judge_ab": "tie", "judge_ba": "tie"},
        "p4": {"judge_ab": "b", "judge_ba": None},
    }
    assert judging.item_verdicts(asks) == {"p1": "a", "p2": "tie", "p3": "tie", "p4": "b"}


def test_swap_consistency_and_position_bias_by_hand():
    asks = judging.run_asks(ROWS)
    # Both asks answered: p1, p2, p3; p1 and p3 agree.
    assert judging.swap_consistency(asks) == {"rate": 2 / 3, "consistent": 2, "n": 3}
    # Asks picking a side: p1ab (a, shown first), p1ba (a, shown second), p2ab (a, first),
    # p2ba (b, first), p4ab (b, second) -> 3 of 5 picked the first shown.
    bias = judging.position_bias(asks)
    assert (bias["first"], bias["n"], bias["first_share"]) == (3, 5, 0.6)
    # 3 of 5 against 0.5: P(3) = 10/32 is the largest (with P(2)), so every outcome counts -> p = 1;
    # 4 of 5: outcomes no likelier than P(4) = 5/32 are 0, 1, 4, 5 -> p = 12/32.
    assert bias["p"] == pytest.approx(1.0)
    assert judging.binomial_p(4, 5) == pytest.approx(12 / 32)
    assert bias["p"] == pytest.approx(sps.binomtest(3, 5).pvalue)


def test_a_judge_that_always_picks_the_first_shown_is_never_consistent():
    asks = judging.run_asks([(i, k, "A") for i in range(10) for k in ("judge_ab", "judge_ba")])
    assert judging.swap_consistency(asks)["rate"] == 0.0
    bias = judging.position_bias(asks)
    assert bias["first_share"] == 1.0 and bias["n"] == 20
    assert bias["p"] == pytest.approx(2 / 2**20)
    assert set(judging.item_verdicts(asks).values()) == {"tie"}


def test_binomial_p_matches_scipy():
    for k, n in [(0, 1), (1, 1), (7, 10), (12, 40), (20, 20), (50, 100)]:
        assert judging.binomial_p(k, n) == pytest.approx(sps.binomtest(k, n).pvalue, rel=1e-9)
    assert judging.binomial_p(0, 0) is None


def test_median_of_k_and_stability_by_hand():
    runs = [
        {"x": "a", "y": "b", "z": "tie", "w": "both_bad"},
        {"x": "a", "y": "tie", "z": "both_bad", "w": "both_bad"},
        {"x": "b", "y": "b", "z": "both_bad"},
    ]
    # x: 1, 1, -1 -> median 1 -> a; y: -1, 0, -1 -> b; z: 0, 0, 0 -> zero, both bad 2 > tie 1;
    # w: two runs, 0, 0 -> both_bad.
    assert judging.median_of_k(runs) == {"x": "a", "y": "b", "z": "both_bad", "w": "both_bad"}
    found = judging.stability(runs)
    # variances: x: mean 1/3, ((2/3)^2*2 + (4/3)^2)/3 = 8/9; y: mean -2/3, ((1/3)^2*2 + (2/3)^2)/3 = 2/9;
    # z: 0; w: 0 -> mean (8/9 + 2/9) / 4 = 5/18. All verdicts equal: w only (z mixes tie and both bad).
    assert found["k"] == 3 and found["n"] == 4
    assert found["variance"]["x"] == pytest.approx(8 / 9)
    assert found["variance"]["y"] == pytest.approx(2 / 9)
    assert found["mean_variance"] == pytest.approx(5 / 18)
    assert found["consistency_rate"] == pytest.approx(1 / 4)


def test_median_of_an_even_k_leans_to_the_side_when_half_the_runs_pick_it():
    assert judging.median_of_k([{"x": "a", "y": "a", "z": "tie"}, {"x": "tie", "y": "b", "z": "tie"}]) == {
        "x": "a",  # median of 1 and 0 is 0.5
        "y": "tie",  # median of 1 and -1 is 0
        "z": "tie",
    }


def test_human_majority():
    assert judging.human_majority(["a", "a", "b"]) == "a"
    assert judging.human_majority(["a", "b"]) is None  # split
    assert judging.human_majority(["tie", "tie", "a"]) == "tie"
    assert judging.human_majority(["both_bad", "left"]) == "both_bad"  # an unknown word is no vote
    assert judging.human_majority([]) is None


def test_cohen_kappa_by_hand():
    judge = ["a", "a", "b", "b", "tie", "a"]
    human = ["a", "b", "b", "b", "tie", "a"]
    # p_o = 5/6; marginals judge a3 b2 t1, human a2 b3 t1 -> p_e = (6 + 6 + 1) / 36 = 13/36.
    expected = (5 / 6 - 13 / 36) / (1 - 13 / 36)
    assert judging.cohen_kappa(judge, human) == pytest.approx(expected)
    assert judging.cohen_kappa([], []) is None
    assert judging.cohen_kappa(["a", "a"], ["a", "a"]) is None  # p_e = 1: undefined
    with pytest.raises(ValueError, match="equally long"):
        judging.cohen_kappa(["a"], [])


def test_human_agreement_by_hand():
    judge = {"p1": "a", "p2": "tie", "p3": "b", "p4": "b", "p5": "a"}
    majority = {"p1": "a", "p2": "a", "p3": "tie", "p4": "b", "p6": "b", "p7": None}
    found = judging.human_agreement(judge, majority)
    # Non-tie majorities with a judge verdict: p1 (right), p2 (judge tie: wrong), p4 (right).
    assert (found["correct"], found["n_accuracy"], found["accuracy"]) == (2, 3, 2 / 3)
    # kappa over p1..p4: judge a, tie, b, b / human a, a, tie, b: p_o = 2/4;
    # judge a1 t1 b2, human a2 t1 b1 -> p_e = (2 + 1 + 2) / 16.
    assert found["n_kappa"] == 4
    assert found["kappa"] == pytest.approx((0.5 - 5 / 16) / (1 - 5 / 16))
    assert found["disagreements"] == ["p2", "p3"]


def test_judge_report_of_two_runs():
    majority = {"p1": "a", "p2": "b", "p3": "tie", "p4": "b"}
    run1 = judging.run_asks(ROWS)
    run2 = judging.run_asks(
        [
            ("p1", "judge_ab", "A"),
            ("p1", "judge_ba", "B"),  # a
            ("p2", "judge_ab", "B"),
            ("p2", "judge_ba", "A"),  # b, b -> b
            ("p3", "judge_ab", "A"),
            ("p3", "judge_ba", "B"),  # a, a -> a
            ("p4", "judge_ab", "B"),
            ("p4", "judge_ba", "A"),  # b
        ]
    )
    report = judging.judge_report([run1, run2], majority)
    assert report["k"] == 2
    # pooled: run 1 2 of 3, run 2 4 of 4.
    assert report["swap_consistency"] == {"rate": 6 / 7, "consistent": 6, "n": 7}
    # run 2 sided asks: 8, first-shown picks: p1ab, p2ba, p3ab, p4ba = 4 -> pooled 7 of 13.
    assert (report["position_bias"]["first"], report["position_bias"]["n"]) == (7, 13)
    # median of K: p1 a,a -> a; p2 tie,b (0,-1 -> -0.5) -> b; p3 tie,a -> a; p4 b,b -> b.
    assert report["verdicts"] == {"p1": "a", "p2": "b", "p3": "a", "p4": "b"}
    assert report["agreement"]["accuracy"] == 1.0 and report["agreement"]["n_accuracy"] == 3
    assert report["agreement"]["disagreements"] == ["p3"]
    assert report["runs"][0]["agreement"]["accuracy"] == pytest.approx(2 / 3)  # p1 right, p2 tie, p4 right
    assert report["stability"]["n"] == 4
    # variances: p1 0, p2 (0,-1) 1/4, p3 (0,1) 1/4, p4 0 -> mean 1/8; all equal: p1, p4.
    assert report["stability"]["mean_variance"] == pytest.approx(1 / 8)
    assert report["stability"]["consistency_rate"] == pytest.approx(1 / 2)
    single = judging.judge_report([run1], majority)
    assert single["stability"] is None and single["verdicts"] == judging.item_verdicts(run1)
    with pytest.raises(ValueError):
        judging.judge_report([], majority)


def test_kendall_tau_matches_scipy():
    cases = [([1, 2, 3, 4], [1, 3, 2, 4]), ([1, 1, 2, 3], [2, 1, 3, 3]), ([5, 4, 3], [1, 2, 3])]
    for x, y in cases:
        assert judging.kendall_tau(x, y) == pytest.approx(sps.kendalltau(x, y, variant="b").statistic)
    assert judging.kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert judging.kendall_tau([1], [2]) is None
    assert judging.kendall_tau([1, 1], [1, 2]) is None
    assert not math.isnan(judging.kendall_tau([1, 2], [1, 2]))


def test_the_statistics_and_prompts_import_nothing_from_django():
    code = (
        "import sys\nimport protocols.arena.judging, protocols.arena.prompts\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == "[]"
