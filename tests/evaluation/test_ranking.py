"""The one definition of leaderboard order (evaluation/ranking.py): headline metric descending, ties
to the paper's next summary figures, then the model name; ranks on the headline respect intervals."""

import pytest

from evaluation import ranking


def row(model, ci_width=1.0, **metrics):
    return {
        "model": model,
        "n": 10,
        "parse_failures": 0,
        "metrics": metrics,
        "ci": {k: None if v is None else [v - ci_width, v + ci_width] for k, v in metrics.items()},
    }


def order(rows, protocol, choice=None):
    return [r["model"] for r in ranking.order_and_rank(rows, protocol, choice)]


def test_status_ranks_by_roa_where_oa_disagrees():
    # "broad" has the best OA and the worst ROA: it ranks last, whatever its OA.
    rows = [row("broad", oa=90.0, roa=0.0), row("rigorous", oa=40.0, roa=30.0), row("middle", oa=60.0, roa=10.0)]
    ordered = ranking.order_and_rank(rows, "status")
    assert [(r["model"], r["rank"]) for r in ordered] == [("rigorous", 1), ("middle", 2), ("broad", 3)]


def test_status_ties_go_to_oa_then_to_the_model_name():
    rows = [
        row("zeta", oa=50.0, roa=20.0),
        row("beta", oa=50.0, roa=20.0),
        row("alpha", oa=40.0, roa=20.0),
        row("omega", oa=70.0, roa=20.0),
    ]
    ordered = ranking.order_and_rank(rows, "status")
    assert [r["model"] for r in ordered] == ["omega", "beta", "zeta", "alpha"]
    assert {r["rank"] for r in ordered} == {1}  # equal ROA, equal rank: the tie-break orders, it does not rank


def test_missing_headline_sorts_last_without_a_rank():
    rows = [row("none", oa=99.0, roa=None), row("zero", oa=10.0, roa=0.0)]
    ordered = ranking.order_and_rank(rows, "status")
    assert [(r["model"], r["rank"]) for r in ordered] == [("zero", 1), ("none", None)]


def test_equal_values_with_different_interval_ranks_keep_the_rank_column_in_order():
    # "narrow" is separated from "top", "wide" is not: equal ROA, ranks 2 and 1. The rank decides
    # before the tie-break (OA), so the printed ranks never go down the table.
    rows = [
        row("narrow", oa=90.0, roa=50.0),
        row("wide", ci_width=40.0, oa=10.0, roa=50.0),
        row("top", ci_width=5.0, oa=50.0, roa=70.0),
    ]
    rows[0]["ci"]["roa"] = [49.0, 51.0]
    ordered = ranking.order_and_rank(rows, "status")
    assert [(r["model"], r["rank"]) for r in ordered] == [("top", 1), ("wide", 1), ("narrow", 2)]


@pytest.mark.parametrize(
    "protocol, rows, expected",
    [
        # ChangeIt: state accuracy standard/full, then standard/crop, distractor/full, distractor/crop (Table 4).
        (
            "changeit",
            [
                row(
                    "b",
                    state_acc_standard_full=60.0,
                    state_acc_standard_crop=50.0,
                    state_acc_distractor_full=10.0,
                    state_acc_distractor_crop=10.0,
                    object_acc_standard_full=99.0,
                ),
                row(
                    "a",
                    state_acc_standard_full=60.0,
                    state_acc_standard_crop=50.0,
                    state_acc_distractor_full=20.0,
                    state_acc_distractor_crop=0.0,
                    object_acc_standard_full=0.0,
                ),
                row(
                    "c",
                    state_acc_standard_full=70.0,
                    state_acc_standard_crop=0.0,
                    state_acc_distractor_full=0.0,
                    state_acc_distractor_crop=0.0,
                    object_acc_standard_full=0.0,
                ),
            ],
            ["c", "a", "b"],
        ),
        # VisualTrans: overall, then the spatial, procedural and quantitative figures (Table 2's order).
        (
            "visualtrans",
            [
                row("p", overall=40.0, spatial_mean=30.0, procedural_mean=20.0, quantitative=90.0, fine_grained=99.0),
                row("q", overall=40.0, spatial_mean=30.0, procedural_mean=25.0, quantitative=0.0, fine_grained=0.0),
                row("r", overall=30.0, spatial_mean=90.0, procedural_mean=90.0, quantitative=90.0, fine_grained=99.0),
            ],
            ["q", "p", "r"],
        ),
        # M3-Verse: overall, then intra, then inter (Table 2's first columns).
        (
            "m3verse",
            [
                row("x", overall=50.0, intra=40.0, inter=60.0, hallucination=99.0),
                row("y", overall=50.0, intra=45.0, inter=10.0, hallucination=0.0),
                row("z", overall=49.0, intra=99.0, inter=99.0, hallucination=99.0),
            ],
            ["y", "x", "z"],
        ),
        # OSCBench: the state-change score, then accuracy, then consistency.
        (
            "oscbench",
            [
                row("genA", state_change=0.5, osc_accuracy=1.0, osc_consistency=0.0, aesthetics=1.0),
                row("genB", state_change=0.75, osc_accuracy=0.75, osc_consistency=0.75, aesthetics=0.0),
                row("genC", state_change=0.5, osc_accuracy=0.5, osc_consistency=0.5, aesthetics=1.0),
            ],
            ["genB", "genA", "genC"],
        ),
    ],
)
def test_each_protocol_orders_by_its_headline_then_its_tie_break(protocol, rows, expected):
    assert order(rows, protocol) == expected


def test_the_headline_may_live_in_the_breakdowns():
    # The ranking key is read like any column: from the main metrics or, failing that, the breakdowns.
    rows = [row("low", osc_accuracy=1.0), row("high", osc_accuracy=0.0)]
    rows[0]["breakdowns"] = {"state_change": {"value": 0.5, "ci": [0.4, 0.6]}}
    rows[1]["breakdowns"] = {"state_change": {"value": 0.7, "ci": [0.65, 0.75]}}
    assert [(r["model"], r["rank"]) for r in ranking.order_and_rank(rows, "oscbench")] == [("high", 1), ("low", 2)]


def test_the_cache_signature_names_the_ordering():
    assert ranking.signature("status") == "order:roa,oa,model"
    assert len({ranking.signature(p) for p in ranking.RANKING}) == len(ranking.RANKING)


# --- the researcher's choice of ranking (OSCBench: the state-change score or the mean of criteria) ---


def osc_rows():
    # "changer" gets the state change right and little else; "looker" the other way round.
    return [
        row("changer", state_change=0.9, criteria_mean=0.4, osc_accuracy=0.9, osc_consistency=0.9),
        row("looker", state_change=0.3, criteria_mean=0.8, osc_accuracy=0.3, osc_consistency=0.3),
        row("middle", ci_width=0.01, state_change=0.5, criteria_mean=0.6, osc_accuracy=0.5, osc_consistency=0.5),
    ]


def test_each_protocol_has_its_default_and_oscbench_the_mean_of_criteria_besides():
    assert {p: list(ranking.choices(p)) for p in ranking.RANKING} == {
        "status": ["roa"],
        "changeit": ["state_acc_standard_full"],
        "visualtrans": ["overall"],
        "m3verse": ["overall"],
        "oscbench": ["state_change", "criteria_mean"],
        "arena": ["rating"],
    }
    assert ranking.resolve("oscbench", None) == ranking.resolve("oscbench", "") == "state_change"
    assert ranking.ranking_keys("oscbench", "criteria_mean") == (
        "criteria_mean",
        "state_change",
        "osc_accuracy",
        "osc_consistency",
    )
    assert ranking.headline("oscbench", "criteria_mean") == "criteria_mean"
    assert (
        ranking.ranking_keys("oscbench")
        == ranking.ranking_keys("oscbench", "state_change")
        == ranking.RANKING["oscbench"]
    )


@pytest.mark.parametrize(
    "protocol, value, allowed",
    [
        ("oscbench", "aesthetics", "state_change, criteria_mean"),
        ("oscbench", "CRITERIA_MEAN", "state_change, criteria_mean"),
        ("status", "criteria_mean", "roa"),
    ],
)
def test_an_unknown_ranking_names_the_parameter_and_the_allowed_values(protocol, value, allowed):
    with pytest.raises(ranking.UnknownRanking) as exc:
        ranking.resolve(protocol, value)
    assert (
        str(exc.value) == f"rank_by: {value!r} is not a ranking of {protocol} leaderboards; allowed values: {allowed}"
    )


def test_the_two_oscbench_rankings_order_the_same_rows_differently():
    assert order(osc_rows(), "oscbench") == ["changer", "middle", "looker"]
    assert order(osc_rows(), "oscbench", "state_change") == order(osc_rows(), "oscbench")
    by_mean = ranking.order_and_rank(osc_rows(), "oscbench", "criteria_mean")
    assert [(r["model"], r["rank"]) for r in by_mean] == [("looker", 1), ("middle", 1), ("changer", 1)]
    # Narrow intervals separate the ranks as well.
    narrow = [dict(r, ci={k: [v - 0.01, v + 0.01] for k, v in r["metrics"].items()}) for r in osc_rows()]
    assert [(r["model"], r["rank"]) for r in ranking.order_and_rank(narrow, "oscbench", "criteria_mean")] == [
        ("looker", 1),
        ("middle", 2),
        ("changer", 3),
    ]


def test_a_reordered_board_keeps_every_value_and_changes_only_order_and_ranks():
    board = {
        "project": "p",
        "release": None,
        "protocol": "oscbench",
        "rows": ranking.order_and_rank(osc_rows(), "oscbench"),
    }
    before = [dict(r) for r in board["rows"]]
    by_mean = ranking.reordered(board, "criteria_mean")
    assert by_mean["rank_by"] == "criteria_mean"
    assert by_mean["ranked_by"] == ["criteria_mean", "state_change", "osc_accuracy", "osc_consistency", "model"]
    assert [r["model"] for r in by_mean["rows"]] == ["looker", "middle", "changer"]
    strip = lambda rows: sorted(({k: v for k, v in r.items() if k != "rank"} for r in rows), key=lambda r: r["model"])  # noqa: E731
    assert strip(by_mean["rows"]) == strip(before)
    assert board["rows"] == before  # the board it came from is untouched
    with pytest.raises(ranking.UnknownRanking):
        ranking.reordered(board, "realism")


def test_each_ranking_has_its_own_cache_signature():
    assert ranking.signature("oscbench") == "order:state_change,osc_accuracy,osc_consistency,model"
    assert (
        ranking.signature("oscbench", "criteria_mean")
        == "order:criteria_mean,state_change,osc_accuracy,osc_consistency,model"
    )
