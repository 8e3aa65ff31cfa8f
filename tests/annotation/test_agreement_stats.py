"""Agreement statistics (pure functions, no database)."""

from __future__ import annotations

import random
from itertools import combinations, permutations

import pytest

from annotation import agreement as ag
from annotation import reliability
from protocols.normalize import description_text
from protocols.oscbench import CRITERIA as OSC_CRITERIA

N = None
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 observers, 12 units,
# values 1-5, with missing data. Published: nominal .743, ordinal .815, interval .849, ratio .797.
CANONICAL = list(
    zip(
        [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
        [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
    )
)


@pytest.mark.parametrize(
    "metric,published", [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)]
)
def test_alpha_reproduces_krippendorffs_published_example(metric, published):
    assert round(reliability.krippendorff_alpha(CANONICAL, metric), 3) == published


def test_coincidence_matrix_of_the_canonical_example():
    m = reliability.coincidence_matrix(CANONICAL)
    # Hand-counted from the paper's table: n_1 = 9, n_2 = 13, n_3 = 10, n_4 = 5, n_5 = 3; n = 40.
    marginals = {c: round(sum(v for (a, _b), v in m.items() if a == c), 6) for c in range(1, 6)}
    assert marginals == {1: 9.0, 2: 13.0, 3: 10.0, 4: 5.0, 5: 3.0}
    # Units 3 and 4 hold four 3s each: 12 ordered pairs at weight 1/3, twice: o_33 = 8.
    assert round(m[(1, 1)], 6) == 7.0 and round(m[(3, 3)], 6) == 8.0


def test_alpha_small_examples_computed_by_hand():
    # Units (1,2), (2,3), (1,3): n_c = 2 each; d2_12 = d2_23 = 4, d2_13 = 16; D_o = 8, D_e = 6.4.
    assert reliability.krippendorff_alpha([(1, 2), (2, 3), (1, 3)], "ordinal") == pytest.approx(-0.25)
    # Units (1,1), (2,2), (1,2): alpha = 1 - (1/3) / 0.6 = 4/9 for nominal and ordinal alike.
    assert reliability.krippendorff_alpha([(1, 1), (2, 2), (1, 2)], "nominal") == pytest.approx(4 / 9)
    assert reliability.krippendorff_alpha([(1, 1), (2, 2), (1, 2)], "ordinal") == pytest.approx(4 / 9)
    assert reliability.krippendorff_alpha([(3, 3), (5, 5), (1, 1, N)], "ordinal") == 1.0


def test_alpha_is_undefined_without_pairs_or_variation():
    assert reliability.krippendorff_alpha([(1, N), (N, 4)], "ordinal") is None
    assert reliability.krippendorff_alpha([(2, 2), (2, 2, 2)], "ordinal") is None


def _alpha_pairwise(units, metric):
    """Independent route: D_o and D_e from value pairs directly, not from a coincidence matrix."""
    pairable = [[v for v in u if v is not None] for u in units]
    pairable = [u for u in pairable if len(u) >= 2]
    values = [v for u in pairable for v in u]
    n = len(values)
    counts = {v: values.count(v) for v in set(values)}
    order = sorted(counts)

    def d2(c, k):
        if metric == "interval":
            return (c - k) ** 2
        lo, hi = sorted((c, k))
        return (sum(counts[g] for g in order if lo <= g <= hi) - (counts[c] + counts[k]) / 2) ** 2

    d_o = sum(d2(a, b) / (len(u) - 1) for u in pairable for a, b in permutations(u, 2)) / n
    d_e = sum(d2(a, b) for a, b in permutations(values, 2)) / (n * (n - 1))
    return 1 - d_o / d_e


@pytest.mark.parametrize(
    "units",
    [
        CANONICAL,
        [(1, 5, 3), (2, 2, N), (4, 5, 5), (1, N, N), (3, 3, 1), (5, 4, 4)],
        [(1, 2), (2, 3), (3, 4), (4, 5), (5, 1), (2, 2)],
    ],
)
@pytest.mark.parametrize("metric", ["ordinal", "interval"])
def test_alpha_matches_an_independent_pairwise_computation(units, metric):
    assert reliability.krippendorff_alpha(units, metric) == pytest.approx(_alpha_pairwise(units, metric), abs=1e-12)


def test_rating_summary_per_criterion_with_n_items():
    items = [
        [{"scores": {"subject": 1, "object": 4}}, {"scores": {"subject": 2, "object": 4}}],
        [{"scores": {"subject": 2, "object": 5}}, {"scores": {"subject": 3, "object": 5}}],
        [{"scores": {"subject": 1, "object": None}}, {"scores": {"subject": 3, "object": 2}}],
    ]
    out = ag.rating_summary(items, criteria=("subject", "object"))["criteria"]
    assert out["subject"] == {"alpha": round(reliability.krippendorff_alpha([(1, 2), (2, 3), (1, 3)]), 4), "n_items": 3}
    assert out["subject"]["alpha"] == -0.25
    assert out["object"] == {"alpha": 1.0, "n_items": 2}


def test_box_iou_and_summary():
    assert ag.box_iou([0, 0, 10, 10], [5, 0, 10, 10]) == pytest.approx(50 / 150)
    assert ag.box_iou([0, 0, 10, 10], [0, 0, 10, 10]) == 1.0
    assert ag.box_iou([0, 0, 10, 10], [20, 20, 5, 5]) == 0.0
    items = [
        [{"bbox": [0, 0, 10, 10], "state": "s"}, {"bbox": [1, 0, 10, 10], "state": "s"}],  # IoU 9/11
        [{"bbox": [0, 0, 10, 10], "state": "s"}, {"bbox": [5, 0, 10, 10], "state": "s"}],  # IoU 1/3
        [{"outcome": "nothing_to_label"}, {"outcome": "nothing_to_label"}],
        [{"outcome": "cannot_determine"}, {"bbox": [0, 0, 1, 1], "state": "s"}],  # IoU counted as 0
        [{"bbox": [0, 0, 10, 10], "state": "s"}],  # one annotation: no pair
    ]
    assert ag.box_summary(items) == {
        "items": 4,
        "pairs_with_boxes": 3,
        "mean_iou": round((9 / 11 + 1 / 3 + 0) / 3, 4),
        "consistent_share": 0.5,
        "consistent_at": 0.5,
    }


def test_qa_normalization_accuracy_and_pairwise_agreement():
    assert ag.normalize_qa_answer("b") == ("B",)
    assert ag.normalize_qa_answer(["c", "A"]) == ag.normalize_qa_answer("A, C") == ("A", "C")
    assert ag.normalize_qa_answer("07") == 7
    assert ag.normalize_qa_answer(["Big  Bowl", "cup"]) == ag.normalize_qa_answer(["cup", "big bowl"])
    items = [("B", ["b", "B", "C"]), (3, [3, "3", None]), (None, ["A", "A"])]
    assert ag.qa_summary(items) == {
        "answers_scored": 6,
        "accuracy": round(4 / 6, 4),
        "pairs": 7,
        "pairwise_agreement": round(3 / 7, 4),
    }


def test_quintuplet_agreement_after_normalization():
    a = {
        "state_a": "The closed jar.",
        "state_b": "an open jar",
        "change": "Open the jar!",
        "change_distractors": ["close jar", "fill the jar", "break the jar"],
        "category": "functional",
        "difference": "slight",
    }
    b = {
        "state_a": "closed jar",
        "state_b": "a jar, opened",
        "change": "open jar",
        "change_distractors": ["break jar", "Close the jar", "fill jar"],
        "category": "functional",
        "difference": "significant",
    }
    assert description_text("  The Closed, jar. ") == "closed jar"
    assert ag.quintuplet_summary([[a, b]]) == {
        "pairs": 1,
        "fields": {
            "state_a": 1.0,
            "state_b": 0.0,
            "change": 1.0,
            "change_distractors": 1.0,
            "category": 1.0,
            "difference": 0.0,
        },
    }
    assert ag.pair_agreement("quintuplet", a, b) == pytest.approx(4 / 6)


def test_field_disagreements_highlight_fields_that_differ():
    out = ag.field_disagreements(
        "box", [(1, {"bbox": [0, 0, 10, 10], "state": "s"}), (2, {"bbox": [5, 0, 10, 10], "state": "s"})]
    )
    assert out["bbox"] == {
        "values": [{"annotation": 1, "value": [0, 0, 10, 10]}, {"annotation": 2, "value": [5, 0, 10, 10]}],
        "min_iou": 0.3333,
        "agree": False,
    }
    assert out["state"]["agree"] is True
    rating = ag.field_disagreements(
        "rating", [(1, {"scores": {"object": 2, "scene": None}}), (2, {"scores": {"object": 3, "scene": 4}})]
    )
    assert (rating["scores.object"]["agree"], rating["scores.scene"]["agree"]) == (True, False)
    qa = ag.field_disagreements("qa", [(1, {"answer": "a", "flags": []}), (2, {"answer": "A", "flags": ["ambiguous"]})])
    assert (qa["answer"]["agree"], qa["flags"]["agree"]) == (True, False)


def test_results_agree_and_consensus():
    assert ag.results_agree("qa", [{"answer": "A", "flags": []}, {"answer": "a", "flags": []}])
    assert not ag.results_agree("qa", [{"answer": "A", "flags": ["ambiguous"]}, {"answer": "A", "flags": []}])
    assert not ag.results_agree("qa", [{"answer": "A", "flags": []}])
    assert ag.results_agree(
        "rating", [{"scores": {"object": 3, "scene": None}}, {"scores": {"object": 4, "scene": None}}]
    )
    assert not ag.results_agree("rating", [{"scores": {"object": 2}}, {"scores": {"object": 4}}])
    boxes = [{"bbox": [10, 20, 100, 80], "state": "s"}, {"bbox": [12, 20, 100, 81], "state": "s"}]
    assert ag.results_agree("box", boxes)
    assert ag.consensus_result("box", boxes) == {"bbox": [11.0, 20.0, 100.0, 80.5], "state": "s"}


def test_gold_correct_per_workflow_and_median_seconds():
    assert ag.gold_correct("qa", {"answer": ["A", "C"]}, {"answer": ["C", "A"]}) is True
    assert ag.gold_correct("qa", {"answer": 4}, {"answer": None}) is False
    assert (
        ag.gold_correct("box", {"bbox": [0, 0, 10, 10], "state": "s"}, {"bbox": [1, 1, 10, 10], "state": "s"}) is True
    )
    assert ag.gold_correct("box", {"bbox": [0, 0, 10, 10], "state": "s"}, {"outcome": "cannot_determine"}) is False
    # The import format keeps a "nothing to label" answer in bbox itself.
    assert ag.gold_correct("box", {"bbox": "nothing_to_label", "state": "s"}, {"outcome": "nothing_to_label"}) is True
    assert (
        ag.gold_correct("box", {"bbox": "nothing_to_label", "state": "s"}, {"bbox": [0, 0, 5, 5], "state": "s"})
        is False
    )
    assert (
        ag.gold_correct(
            "quintuplet", {"category": "other", "difference": "slight"}, {"category": "other", "difference": "slight"}
        )
        is True
    )
    assert ag.gold_correct("rating", {"gold_scores": {"object": 5}}, {"scores": {"object": 3}}) is False
    assert ag.gold_correct("rating", {}, {"scores": {"object": 3}}) is None
    assert ag.median_seconds([3000, 1000, 2000, 10000]) == 2.5
    assert ag.median_seconds([]) is None


def test_two_missing_qa_answers_are_not_agreement_in_every_view():
    # Two annotators who both flagged the question instead of answering it.
    none_a = {"answer": None, "flags": ["insufficient_evidence"]}
    none_b = {"answer": None, "flags": ["ambiguous"]}

    assert ag.qa_answers_agree(None, None) is False
    assert ag.qa_answers_agree("a", None) is False
    assert ag.qa_answers_agree("a", "A") is True
    assert ag.pair_agreement("qa", none_a, none_b) == 0.0  # per-annotator rows
    assert ag.qa_summary([(None, [None, None])])["pairwise_agreement"] == 0.0  # summary
    assert ag.field_disagreements("qa", [(1, none_a), (2, none_b)])["answer"]["agree"] is False  # review highlight
    assert not ag.results_agree("qa", [{"answer": None, "flags": []}, {"answer": None, "flags": []}])  # auto-verify
    stream = ag.ProjectAgreement("qa")
    stream.add_item([("ann0", none_a), ("ann1", none_b)])
    assert stream.summary()["pairwise_agreement"] == 0.0
    assert stream.annotator_agreement("ann0") == stream.annotator_agreement("ann1") == (0.0, 1)


@pytest.mark.parametrize("workflow", ["box", "qa", "quintuplet", "rating"])
def test_streamed_project_agreement_matches_the_list_summaries(workflow):
    rng = random.Random(7)

    def result():
        if workflow == "box":
            if rng.random() < 0.2:
                return {"outcome": rng.choice(["nothing_to_label", "cannot_determine"])}
            return {"bbox": [rng.randint(0, 5), rng.randint(0, 5), 10, 10], "state": rng.choice(["s", "t"])}
        if workflow == "qa":
            return {"answer": rng.choice(["A", "b", None, ["A", "C"]]), "flags": []}
        if workflow == "quintuplet":
            return {
                "state_a": rng.choice(["The jar.", "jar"]),
                "state_b": "x",
                "change": "open",
                "change_distractors": ["a", "b", "c"],
                "category": rng.choice(["functional", "other"]),
                "difference": "slight",
            }
        return {"scores": {c: rng.choice([1, 2, 3, 4, 5, None]) for c in OSC_CRITERIA}}

    items = [[result() for _ in range(rng.randint(1, 4))] for _ in range(40)]
    stream = ag.ProjectAgreement(workflow)
    for results in items:
        stream.add_item([(f"ann{n}", r) for n, r in enumerate(results)])

    if workflow == "qa":
        expected = ag.qa_summary([(None, [r["answer"] for r in results]) for results in items])
        pairs = [ag.pair_agreement("qa", a, b) for results in items for a, b in combinations(results, 2)]
        assert expected["pairwise_agreement"] == round(sum(pairs) / len(pairs), 4)
    else:
        expected = {"box": ag.box_summary, "quintuplet": ag.quintuplet_summary, "rating": ag.rating_summary}[workflow](
            items
        )
    assert stream.summary() == expected
    if workflow == "rating":
        for c in OSC_CRITERIA:
            units = [[(r["scores"]).get(c) for r in results] for results in items]
            alpha = reliability.krippendorff_alpha(units, "ordinal")
            assert expected["criteria"][c]["alpha"] == (None if alpha is None else round(alpha, 4))
    # ann0 is in every item with a second annotator: its mean over its pairs, computed directly.
    scores = [ag.pair_agreement(workflow, results[0], other) for results in items for other in results[1:]]
    scores = [s for s in scores if s is not None]
    assert stream.annotator_agreement("ann0") == (
        (round(sum(scores) / len(scores), 4) if scores else None),
        len(scores),
    )


def test_group_by_item_yields_each_items_rows_in_order():
    rows = [(1, "a"), (1, "b"), (2, "c"), (5, "d"), (5, "e")]
    assert list(ag.group_by_item(iter(rows))) == [(1, [(1, "a"), (1, "b")]), (2, [(2, "c")]), (5, [(5, "d"), (5, "e")])]
