"""STATUS scoring reproduces the paper's NVILA row from predictions with the same counts."""

from decimal import Decimal

import numpy as np

from protocols.kit.answers import parse_answer
from protocols.status import scoring as status

N = 404


def nvila_like_predictions():
    """Letters per item in QUERIES order with NVILA's counts (Table 2, N = 404).

    OSI: 91 items both correct, 295 one correct (answered "A" twice), 18 both wrong;
    IR: 3 both correct, 400 one correct; SCI2: 210 correct; SCI4: 110 correct;
    exactly one item (item 0) has OSI, IR and SCI4 all correct.
    """
    truth = [["A", "B", "A", "B", "B", "C"] for _ in range(N)]
    pred = []
    for i in range(N):
        t = truth[i]
        p = ["B", "A", "B", "A", "A", "A"]  # all wrong, different letters within each pair
        if i < 91:
            p[0], p[1] = "A", "B"
        elif i < 91 + 295:
            p[0], p[1] = "A", "A"
        if i < 3:
            p[2], p[3] = "A", "B"
        elif i < 403:
            p[2], p[3] = "A", "A"
        if i < 210:
            p[4] = t[4]
        if i == 0 or 3 <= i < 112:
            p[5] = t[5]
        pred.append(p)
    pred[403][4] = None  # an unparseable answer is wrong and counted
    return truth, pred


def test_nvila_row_digit_for_digit():
    truth, pred = nvila_like_predictions()
    matrix = status.item_matrix(status.encode_letters(truth), status.encode_letters(pred))
    row = status.printed(matrix)
    assert [str(row[k]) for k in status.KEYS] == ["59.03", "50.25", "51.98", "53.75", "22.52", "0.74", "27.23", "0.25"]
    assert matrix.n == 404
    assert matrix.parse_failures == 1


def test_same_letter_bias_counts_wrong_pairs_answered_with_one_letter():
    truth, pred = nvila_like_predictions()
    matrix = status.item_matrix(status.encode_letters(truth), status.encode_letters(pred))
    bias = matrix.diagnostics["same_letter"]
    assert bias["osi"] == {"wrong_items": 313, "same_letter": 295, "share": Decimal("94.25")}
    assert bias["ir"] == {"wrong_items": 401, "same_letter": 400, "share": Decimal("99.75")}
    assert bias["combined"]["share"] == Decimal("97.34")  # 695 / 714 = 97.338


def test_breakdown_by_category_uses_only_that_group():
    truth = status.encode_letters([["A", "B", "A", "B", "A", "A"]] * 4)
    pred = status.encode_letters(
        [
            ["A", "B", "A", "B", "A", "A"],  # positional, all right
            ["A", "A", "A", "B", "B", "A"],  # positional
            ["B", "A", "B", "A", "B", "B"],  # functional, all wrong
            ["A", "B", "A", "B", "A", "B"],  # other
        ]
    )
    m = status.item_matrix(
        truth,
        pred,
        categories=["positional", "positional", "functional", "other"],
        differences=["slight", "significant", "slight", "slight"],
    )
    row = status.printed(m)
    assert row["category:positional:racc_osi"] == Decimal("50.00")
    assert row["category:positional:acc_osi"] == Decimal("75.00")
    assert row["category:positional:roa"] == Decimal("50.00")
    assert row["category:functional:acc_osi"] == Decimal("0.00")
    assert row["category:other:roa"] == Decimal("0.00")
    assert row["difference:slight:acc_sci"] == Decimal("66.67")
    assert row["difference:significant:racc_ir"] == Decimal("100.00")


def test_probability_reassignment_reproduces_table5_counts():
    # NVILA, Table 5: RAcc_OSI 72.28 (292 / 404), RAcc_IR 44.06 (178 / 404).
    rng = np.random.default_rng(1)
    p_a = np.empty((N, 4))
    base = rng.uniform(0.2, 0.8, size=N)
    p_a[:, 0] = base
    p_a[:, 1] = np.where(np.arange(N) < 292, base - 0.1, base + 0.1)
    p_a[:, 2] = base
    p_a[:, 3] = np.where(np.arange(N) < 178, base - 0.05, base)  # the rest tie: wrong
    p_a[10, 0] = np.nan  # missing log-probs: wrong
    p_a[10, 1] = 0.1
    out = status.reassigned(p_a)
    assert out["racc_osi"] == Decimal("72.03")  # 291 / 404 once item 10 lost its log-probs
    p_a[10, 0] = 0.9
    out = status.reassigned(p_a)
    assert (out["racc_osi"], out["racc_ir"]) == (Decimal("72.28"), Decimal("44.06"))


def test_prob_of_a_is_the_models_own_probability_and_zero_when_absent():
    assert abs(status.prob_of_a({"A": np.log(0.2), "B": np.log(0.6)}) - 0.2) < 1e-12  # not 0.25
    assert status.prob_of_a({"B": -0.1}) == 0.0  # stored without A: probability 0, never 1
    assert np.isnan(status.prob_of_a(None))


def _status_item(key):
    from evaluation.scoring.answer_sets import ScoringItem

    states = ["a closed box", "an open box"]
    resolved = {q: {"options": states, "answer": "A" if q.endswith("_a") else "B"} for q in status.QUERIES[:4]}
    resolved["sci2"] = {"options": ["open", "lift"], "answer": "A"}
    resolved["sci4"] = {"options": ["open", "lift", "shake", "close"], "answer": "A"}
    return ScoringItem(
        key=key, external_id=str(key), payload={"category": "other", "difference": "slight"}, resolved=resolved
    )


def test_reassignment_compares_raw_p_a_between_images_as_the_spec_says():
    from evaluation.scoring.answer_sets import ModelAnswer
    from protocols.status.scoring import score as score_status

    items = [_status_item(k) for k in range(4)]
    lp = np.log
    logprobs = {
        # 0: P(A|a) = .4 < P(A|b) = .5 -> wrong; renormalizing (.8 vs .5) would call it right.
        0: ({"A": lp(0.4), "B": lp(0.1)}, {"A": lp(0.5), "B": lp(0.5)}),
        # 1: A absent for image_b: probability 0 < P(A|a) -> right (it was NaN, i.e. wrong).
        1: ({"A": lp(0.3), "B": lp(0.6)}, {"B": lp(0.9)}),
        # 2: equal P(A): a tie is wrong.
        2: ({"A": lp(0.5), "B": lp(0.2)}, {"A": lp(0.5), "B": lp(0.1)}),
        # 3: A absent on image_a: 0 is never above anything -> wrong (never read as P = 1).
        3: ({"B": lp(0.2)}, {"A": lp(0.1), "B": lp(0.8)}),
    }
    answers = {}
    for k, (on_a, on_b) in logprobs.items():
        for q in status.QUERIES:
            answers[(k, q)] = ModelAnswer("A")
        answers[(k, "osi_a")] = ModelAnswer("A", logprobs=on_a)
        answers[(k, "osi_b")] = ModelAnswer("A", logprobs=on_b)
        answers[(k, "ir_a")] = ModelAnswer("A", logprobs=on_a)
        answers[(k, "ir_b")] = ModelAnswer("A", logprobs=on_b)
    out = score_status(items, answers).diagnostics["reassigned"]
    assert (out["n"], out["with_logprobs"]) == (4, 4)
    assert out["racc_osi"] == Decimal("25.00") and out["racc_ir"] == Decimal("25.00")  # item 1 only


def test_reassignment_follows_the_option_order_the_model_saw():
    from evaluation.scoring.answer_sets import ModelAnswer
    from protocols.status.scoring import score as score_status

    item = _status_item(0)
    states = item.resolved["osi_a"]["options"]
    answers = {(0, q): ModelAnswer("A") for q in status.QUERIES}
    # The model saw the states swapped for osi_b, so release option A was its letter "B" there.
    answers[(0, "osi_a")] = ModelAnswer("A", options=states, logprobs={"A": np.log(0.6), "B": np.log(0.4)})
    answers[(0, "osi_b")] = ModelAnswer("A", options=states[::-1], logprobs={"A": np.log(0.7), "B": np.log(0.3)})
    out = score_status([item], answers).diagnostics["reassigned"]
    assert out["racc_osi"] == Decimal("100.00")  # P(state_a | image_b) = .3 < .6


def test_free_text_and_option_text_answers_score_like_letters():
    options = ["a closed cabinet", "an open cabinet"]
    assert parse_answer("status", "osi_b", "Answer: (B)", options) == "B"
    assert parse_answer("status", "osi_b", "an open cabinet", options) == "B"
    assert parse_answer("status", "osi_b", "C", options) is None


def test_random_answers_are_seeded_and_in_range():
    a = status.random_answers(1000, seed=7)
    assert np.array_equal(a, status.random_answers(1000, seed=7))
    assert a[:, :5].max() == 1 and a[:, 5].max() == 3 and a.min() == 0


def test_bootstrap_interval_contains_point_and_is_seeded():
    truth, pred = nvila_like_predictions()
    m = status.item_matrix(status.encode_letters(truth), status.encode_letters(pred))
    ci = status.cis(m, n_boot=300, seed=3)
    assert ci == status.cis(m, n_boot=300, seed=3)
    assert ci["acc_osi"][0] < 59.03 < ci["acc_osi"][1]
    assert ci["roa"][0] == 0.0


def test_grouped_bootstrap_for_large_runs_matches_the_binomial_width():
    # 30,000 items go through the grouped (multinomial) bootstrap; for acc_sci with p = 0.3 the
    # 95 % interval must be about p +- 1.96 * sqrt(p (1 - p) / n) = 0.3 +- 0.00519.
    n = 30_000
    truth = np.zeros((n, 6), dtype=np.int8)
    pred = np.ones((n, 6), dtype=np.int8)
    pred[: int(0.3 * n), 4] = 0
    m = status.item_matrix(truth, pred)
    ci = status.cis(m, n_boot=2000, seed=0)
    assert abs(ci["acc_sci"][0] - (30 - 0.519)) < 0.06
    assert abs(ci["acc_sci"][1] - (30 + 0.519)) < 0.06
    assert ci["roa"] == [0.0, 0.0]
