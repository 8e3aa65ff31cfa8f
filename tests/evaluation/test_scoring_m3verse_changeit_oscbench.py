"""Hand-worked cases: M3-Verse partial credit, ChangeIt state/object accuracy, OSCBench N/A."""

from decimal import Decimal

import numpy as np
import pytest

from protocols.changeit import scoring as changeit
from protocols.kit.answers import parse_answer
from protocols.m3verse import scoring as m3verse
from protocols.oscbench import scoring as oscbench


def test_m3verse_partial_credit_and_breakdowns():
    truth = [["A", "C"], ["B"], ["A", "B", "C"], ["D"], ["A", "B", "C"]]
    answers = [["A"], ["B"], ["A", "D"], None, parse_answer("m3verse", "qa", "A,b", list("ABCD"))]
    credits = [m3verse.question_credit(p, g) for p, g in zip(answers, truth)]
    assert credits == [(1, 2), (1, 1), (0, 3), (0, 1), (2, 3)]
    m = m3verse.item_matrix(
        credits,
        ["intra", "intra", "inter", "inter", "intra"],
        [["spatial"], ["temporal", "attribute"], ["spatial"], ["reasoning"], ["spatial"]],
        [False, False, False, True, False],
        parse_failures=1,
    )
    row = m3verse.printed(m)
    assert row["overall"] == Decimal("43.33")  # (1/2 + 1 + 0 + 0 + 2/3) / 5
    assert row["intra"] == Decimal("72.22")  # (1/2 + 1 + 2/3) / 3
    assert row["inter"] == Decimal("0.00")
    assert row["intra_spatial"] == Decimal("58.33")  # (1/2 + 2/3) / 2
    assert row["intra_temporal"] == Decimal("100.00")
    assert row["inter_attribute"] is None
    assert row["hallucination"] == Decimal("0.00")
    assert row["factual"] == Decimal("54.17")  # 13/6 / 4
    assert m.parse_failures == 1


def test_changeit_state_and_object_accuracy():
    vocab = {"apple": ["whole apple", "peeled apple", "sliced apple"], "door": ["open door", "closed door"]}
    label_objects = changeit.label_object_map(vocab)
    options = ["open door", "sliced apple", "whole apple", "closed door", "peeled apple"]
    truth_number = 3  # whole apple
    answers = [
        parse_answer("changeit", "state:standard:full", "3", options),  # right state
        parse_answer("changeit", "state:standard:crop", "peeled apple", options),  # right object only
        parse_answer("changeit", "state:distractor:full", "1", options),  # wrong object
        parse_answer("changeit", "state:distractor:crop", "eleven", options),  # unparseable
    ]
    assert answers == [3, 5, 1, None]
    predicted = np.array([[a or 0 for a in answers]])
    obj = np.array([[changeit.chosen_object_correct(a, options, "apple", label_objects) for a in answers]])
    m = changeit.item_matrix(np.full((1, 4), truth_number), predicted, obj)
    row = changeit.printed(m)
    assert [str(row[k]) for k in changeit.KEYS] == [
        "100.00",
        "0.00",
        "0.00",
        "0.00",
        "100.00",
        "100.00",
        "0.00",
        "0.00",
    ]
    assert m.parse_failures == 1


def test_oscbench_na_is_missing_never_zero():
    nan = float("nan")
    # item 1: subject N/A for everyone; object 4, 5 and one N/A. item 2: subject 5, 5, 4; object 2, 3, 3.
    scores = np.full((2, 3, 8), 3.0)
    scores[0, :, 0] = nan
    scores[0, :, 1] = [4, 5, nan]
    scores[1, :, 0] = [5, 5, 4]
    scores[1, :, 1] = [2, 3, 3]
    scores[0, :, 3] = [5, 5, 5]  # osc_accuracy
    scores[0, :, 4] = [1, 2, nan]  # osc_consistency
    sums, counts = oscbench.ratings_to_arrays(scores)
    m = oscbench.item_matrix(sums, counts, scenarios=["regular", "novel"], action_categories=["cut", "cut"])
    row = oscbench.printed(m)
    assert row["subject"] == Decimal("0.917")  # only item 2: (14/3 - 1) / 4
    assert row["object"] == Decimal("0.646")  # ((4.5 - 1)/4 + (8/3 - 1)/4) / 2
    assert row["realism"] == Decimal("0.500")
    # item 1 state change = (1 + (1.5 - 1)/4) / 2 = 0.5625; item 2 = 0.5
    assert row["state_change:scenario:regular"] == Decimal("0.563")
    assert row["state_change:scenario:novel"] == Decimal("0.500")
    assert row["state_change:scenario:compositional"] is None
    assert row["state_change:action_category:cut"] == Decimal("0.531")  # 0.53125 half up
    # Mean of criteria: subject 11/12, object 0.6458.., action 0.5, accuracy 0.75, consistency
    # (0.125 + 0.5) / 2 = 0.3125, scene, realism, aesthetics 0.5 -> 4.625 / 8 = 0.578125.
    assert row["criteria_mean"] == Decimal("0.578")


def test_oscbench_mean_of_criteria_leaves_out_a_criterion_nobody_rated():
    # Subject N/A on every video: the mean is over the seven others, never a 0 for subject.
    sums = np.array([[0, 5, 5, 5, 5, 5, 5, 5], [0, 3, 3, 3, 3, 3, 3, 3]], dtype=np.int64)
    counts = np.array([[0] + [1] * 7] * 2, dtype=np.int64)
    m = oscbench.item_matrix(sums, counts)
    row, cis = oscbench.printed(m), oscbench.cis(m, n_boot=200)
    assert row["subject"] is None and row["criteria_mean"] == Decimal("0.750")
    assert cis["criteria_mean"] == [0.5, 1.0]  # resampling the two videos: both 3s, both 5s or one of each
    assert oscbench.criteria_mean([None, 0.5, 1.0]) == 0.75 and oscbench.criteria_mean([None, None]) is None
    assert list(oscbench.KEYS[-2:]) == ["criteria_mean", "state_change"]


def test_oscbench_mean_of_criteria_interval_of_a_large_run_matches_the_joint_resample():
    # From COMPRESS_FROM rows on, columns are resampled one at a time and the mean of criteria's
    # interval comes from the normal of the column totals; it agrees with resampling rows jointly.
    from protocols.kit.matrix import COMPRESS_FROM, bootstrap_cis

    rng = np.random.default_rng(5)
    n = COMPRESS_FROM + 500
    counts = np.full((n, 8), 3, dtype=np.int64)
    counts[rng.random(n) < 0.3, 0] = 0  # subject N/A on 30 % of the videos
    quality = rng.integers(0, 3, n)[:, None]  # criteria move together, as real ratings do
    sums = np.clip(rng.integers(3, 10, size=(n, 8)) + 2 * quality, 3, 15) * (counts > 0)
    m = oscbench.item_matrix(sums, counts)
    fast = oscbench.cis(m, n_boot=400)["criteria_mean"]
    joint = bootstrap_cis(m, keys=("criteria_mean",), scale=1.0, places=3, derive=oscbench._derive, n_boot=400)[
        "criteria_mean"
    ]
    assert fast[0] < float(oscbench.printed(m)["criteria_mean"]) < fast[1]
    assert fast == pytest.approx(joint, abs=0.0015)
    assert fast[1] - fast[0] == pytest.approx(joint[1] - joint[0], rel=0.2)


def test_oscbench_videos_without_an_action_category_are_in_no_category_group():
    sums = np.array([[5] * 8, [1] * 8, [3] * 8], dtype=np.int64)
    counts = np.ones_like(sums)
    m = oscbench.item_matrix(sums, counts, scenarios=["regular", None, "novel"], action_categories=["cut", None, ""])
    row = oscbench.printed(m)
    assert [k for k in m.keys if k.startswith("state_change:action_category:")] == ["state_change:action_category:cut"]
    assert row["state_change:action_category:cut"] == Decimal("1.000")
    assert row["state_change"] == Decimal("0.500")  # every video counts in the overall figure
    none_at_all = oscbench.item_matrix(sums, counts, action_categories=[None, None, None])
    assert not any(k.startswith("state_change:action_category:") for k in none_at_all.keys)


def test_oscbench_judge_answers_parse_with_na():
    parsed = parse_answer(
        "oscbench", "judge", 'Scores:\n```json\n{"scores": {"subject": "N/A", "object": 4, "scene": null}}\n```', []
    )
    assert parsed["subject"] is None and parsed["object"] == 4 and parsed["scene"] is None
    assert parse_answer("oscbench", "judge", '{"object": 6}', []) is None
    assert parse_answer("oscbench", "judge", "no json here", []) is None
    sums, counts = oscbench.score_dicts_to_arrays([[parsed]])
    assert counts[0].tolist() == [0, 1, 0, 0, 0, 0, 0, 0]


def test_interval_bounds_round_half_up_like_the_values():
    # Every video: raters gave 1, 1, 1, 2 -> mean 1.25 -> normalized 1/16 = 0.0625 exactly, which
    # prints 0.063 half up; round() on the float gives 0.062 (half to even).
    sums = np.full((50, len(oscbench.CRITERIA)), 5)
    counts = np.full((50, len(oscbench.CRITERIA)), 4)
    m = oscbench.item_matrix(sums, counts)
    assert str(oscbench.printed(m)["object"]) == "0.063"
    assert oscbench.cis(m, n_boot=50)["object"] == [0.063, 0.063]


def test_random_judge_matrix_equals_scoring_its_answers():
    # The OSCBench Random row skips the answer dicts; it must score exactly like them.
    from evaluation.scoring import answer_sets

    items = [
        answer_sets.ScoringItem(
            key=i,
            external_id=f"v{i}",
            payload={"scenario": ("regular", "novel")[i % 2], "action_category": f"c{i % 3}"},
            resolved={"judge": {}},
        )
        for i in range(50)
    ]
    via_answers = answer_sets.finish(
        "oscbench", oscbench.score(items, answer_sets.random_answers("oscbench", items, seed=11)), n_boot=50
    )
    direct = answer_sets.finish("oscbench", oscbench.random_matrix(items, seed=11), n_boot=50)
    assert direct.printed == via_answers.printed and direct.cis == via_answers.cis
    assert direct.matrix.parse_failures == 0
    other_seed = answer_sets.finish("oscbench", oscbench.random_matrix(items, seed=12), n_boot=50)
    assert other_seed.printed != direct.printed


@pytest.mark.parametrize("leave_one_out", [False, True])
def test_score_dicts_to_arrays_sums_and_counts_every_given_score(leave_one_out):
    """Both reading paths (every rating complete; some rating lacking a criterion) give the sums
    and counts a plain loop gives: None and missing are not given, items without ratings are 0."""
    import random

    rng = random.Random(5)
    per_item = []
    for i in range(300):
        ratings = []
        for _ in range(rng.randint(0, 4)):
            ratings.append({c: rng.choice([None, 1, 2, 3, 4, 5]) for c in oscbench.CRITERIA})
        per_item.append(ratings)
    if leave_one_out:
        per_item[7].append({})  # an empty rating
        per_item[11].append({"object": 3})
    sums, counts = oscbench.score_dicts_to_arrays(per_item)
    for i, ratings in enumerate(per_item):
        for j, c in enumerate(oscbench.CRITERIA):
            given = [r[c] for r in ratings if r.get(c) is not None]
            assert (sums[i, j], counts[i, j]) == (sum(given), len(given)), (i, c)
