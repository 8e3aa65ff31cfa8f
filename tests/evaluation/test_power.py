"""Items, raters and paired units a study needs (protocols/kit/power.py, evaluation/power.py): each
formula against a hand computation, then the API, the page and the command on a seeded board."""

import json
import math

import pytest
from django.core.management import CommandError
from django.http import HttpRequest

from annotation.models import Annotation, Role
from protocols.kit import power
from tests.helpers.items import run_command

from .factories import counting_board, make_release, rate

Z95 = 1.959963984540054  # the normal quantile at 0.975
Z80 = 0.8416212335729143  # at 0.80


def test_normal_quantiles():
    assert power.z_two_sided(0.95) == pytest.approx(Z95, abs=1e-12)
    assert power.z_power(0.80) == pytest.approx(Z80, abs=1e-12)


def test_items_for_a_half_width_match_a_hand_computation():
    # Two clusters of three, all right / all wrong, on the percent scale: mean 50, deviations ±50.
    # sd² = 6 · 2500 / 5 = 3000. Cluster sums ±150: se_clustered² = 2/1 · 2 · 150² / 6² = 2500, se² = 500,
    # design effect 5. Half-width 10: (1.96 · √3000 / 10)² · 5 = 3.8415 · 150 = 576.2 -> 577 items,
    # in clusters of three: 192.3 -> 193 clusters. Now: 1.96 · √2500 = 98.0.
    plan = power.plan_mean([100.0, 100.0, 100.0, 0.0, 0.0, 0.0], [0, 0, 0, 1, 1, 1], half_width=10)

    assert (plan["n"], plan["clusters"], plan["cluster_size"]) == (6, 2, 3.0)
    assert plan["sd"] == pytest.approx(math.sqrt(3000), abs=1e-9)
    assert plan["design_effect"] == pytest.approx(5.0, abs=1e-12) == plan["design_effect_used"]
    assert plan["half_width_now"] == pytest.approx(Z95 * 50, abs=1e-9)
    assert Z95**2 * 3000 / 100 * 5 == pytest.approx(576.22, abs=0.01)
    assert plan["items_needed"] == 577
    assert plan["clusters_needed"] == 193
    assert "note" not in plan
    # The other way round: items now × (half-width now / X)².
    assert 6 * (plan["half_width_now"] / 10) ** 2 == pytest.approx(576.22, abs=0.01)


def test_a_design_effect_below_one_is_taken_as_one():
    # Clusters {1,1,0}, {1,0}, {0,0}: design effect (93/49) / 2 = 0.949 (test_clustered_stats), sd² = 2/7.
    plan = power.plan_mean([100.0, 100.0, 0.0, 100.0, 0.0, 0.0, 0.0], [0, 0, 0, 1, 1, 2, 2], half_width=10)

    assert plan["design_effect"] == pytest.approx(93 / 98, abs=1e-12)
    assert plan["design_effect_used"] == 1.0
    assert plan["items_needed"] == math.ceil(Z95**2 * (2 / 7 * 10_000) / 100) == 110
    assert plan["note"] == "the measured design effect 0.949 is below 1 and is taken as 1"


def test_a_pilot_that_cannot_say_gives_no_number_and_says_why():
    one = power.plan_mean([50.0], [0], half_width=2)
    assert one["items_needed"] is None and one["note"] == "1 score: at least two are needed to measure the spread"
    same = power.plan_mean([100.0, 100.0, 100.0], [0, 1, 2], half_width=2)
    assert same["sd"] == 0 and same["items_needed"] is None and "every pilot score is the same" in same["note"]
    single_cluster = power.plan_mean([100.0, 0.0, 100.0], [7, 7, 7], half_width=50)
    assert single_cluster["design_effect"] is None and single_cluster["design_effect_used"] == 1.0
    assert single_cluster["items_needed"] == math.ceil(Z95**2 * (10_000 / 3) / 2500)  # sd² = 3333.3
    assert "fewer than two clusters" in single_cluster["note"]
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="half_width: expected a number above 0"):
            power.plan_mean([1.0, 0.0], [0, 1], half_width=bad)


# Three items rated twice on a 0–1 scale: (0, 0.25), (0.5, 0.75), (1, 0.75).
RATER_SCORES = [[0.0, 0.25], [0.5, 0.75], [1.0, 0.75]]


def test_variance_components_match_a_hand_computation():
    # Within items: squared deviations 2 · 0.125² per item, 3 · 0.03125 = 0.09375 over 3 degrees of
    # freedom = 1/32. Item means 0.125, 0.625, 0.875: variance 7/48; less (1/32) · mean(1/k) = 1/64:
    # item variance 25/192.
    components = power.variance_components(RATER_SCORES)
    assert components["rater_variance"] == pytest.approx(1 / 32, abs=1e-15)
    assert components["item_variance"] == pytest.approx(25 / 192, abs=1e-15)
    assert (components["items"], components["rated_twice"], components["mean_raters"]) == (3, 3, 2.0)
    # Items rated once add to the item means, not to the raters' spread.
    more = power.variance_components(RATER_SCORES + [[0.5]])
    assert more["rater_variance"] == pytest.approx(1 / 32, abs=1e-15) and more["rated_twice"] == 3
    assert power.variance_components([[0.5], [0.25]])["rater_variance"] is None


def test_the_rater_plan_matches_a_hand_computation():
    components = power.variance_components(RATER_SCORES)
    plan = power.plan_raters(components, half_width=0.1, raters=(1, 2, 3))
    # (1.96 / 0.1)² · (25/192 + (1/32) / k): k = 1: 384.15 · 31/192 = 62.02; k = 2: · 28/192 = 56.02;
    # k = 3: · 27/192 = 54.02.
    expected = [math.ceil((Z95 / 0.1) ** 2 * (25 + 6 / k) / 192) for k in (1, 2, 3)]
    assert expected == [63, 57, 55]
    assert plan == [
        {"raters": 1, "items_needed": 63, "ratings_needed": 63},
        {"raters": 2, "items_needed": 57, "ratings_needed": 114},
        {"raters": 3, "items_needed": 55, "ratings_needed": 165},
    ]
    # With the pilot's two raters the plan agrees with the plan of the item means (variance 7/48 = 28/192).
    means = [sum(s) / len(s) for s in RATER_SCORES]
    assert power.plan_mean(means, [0, 1, 2], half_width=0.1)["items_needed"] == 57
    # A design effect of 2 doubles every count before rounding: 2 · 62.02 = 124.05 -> 125.
    doubled = power.plan_raters(components, half_width=0.1, design_effect=2.0, raters=(1,))
    assert doubled[0]["items_needed"] == math.ceil(2 * (Z95 / 0.1) ** 2 * 31 / 192) == 125


def test_paired_units_match_a_hand_computation():
    # Differences (percent) 100, 0, 0, 100, 0, 0 (units their own clusters): mean 33.3, sd² = 4/15 · 10⁴,
    # design effect 1. D = 10: ((1.96 + 0.84) · sd / 10)² = 7.8489 · 26.667 = 209.3 -> 210 units.
    model = [100.0, 100.0, 0.0, 100.0, 100.0, 0.0]
    baseline = [0.0, 100.0, 0.0, 0.0, 100.0, 0.0]
    plan = power.plan_difference(model, baseline, list(range(6)), difference=10)

    assert plan["difference_now"] == pytest.approx(100 / 3)
    assert plan["sd_difference"] == pytest.approx(math.sqrt(4 / 15 * 10_000), abs=1e-9)
    assert plan["design_effect"] == pytest.approx(1.0, abs=1e-12)
    assert (Z95 + Z80) ** 2 == pytest.approx(7.8489, abs=1e-4)
    assert plan["units_needed"] == math.ceil((Z95 + Z80) ** 2 * (4 / 15 * 10_000) / 100) == 210
    assert plan["detectable_now"] == pytest.approx((Z95 + Z80) * math.sqrt(4 / 15 * 10_000 / 6), abs=1e-9)
    same = power.plan_difference([1.0, 0.0], [1.0, 0.0], [0, 1], difference=1)
    assert same["units_needed"] is None and same["note"].endswith("same amount on every unit: no spread")


# --- the board: API, page, command --------------------------------------------------------------


@pytest.fixture
def counting_project(make_project, make_user):
    """16 VisualTrans counting questions, two per scene; bad right on 2, mid on 4, good on all."""
    researcher = make_user("res")
    project = make_project("vtp", "visualtrans", members={researcher: Role.RESEARCHER})
    counting_board(project)
    return project


@pytest.fixture
def signed_in(client, counting_project):
    client.login(request=HttpRequest(), username="res", password="pw")
    return client


@pytest.mark.django_db
def test_api_plans_items_per_row_from_the_clustered_spread(signed_in, counting_project):
    response = signed_in.get("/api/projects/vtp/power/?half_width=10")
    assert response.status_code == 200
    plan = response.json()
    assert (plan["release"], plan["metric"], plan["half_width"], plan["unit"]) == (
        "v1",
        "overall",
        10.0,
        "percentage points",
    )
    assert [row["model"] for row in plan["rows"]] == ["good", "mid", "bad"]  # the board's order; Random: no plan
    assert "spatial_mean" not in plan["metrics"] and "overall" in plan["metrics"]
    mid = next(row for row in plan["rows"] if row["model"] == "mid")["metrics"]["overall"]
    # mid: right on 4 of 16 (scenes 0 and 1): sd² = 0.2 · 10⁴, design effect 15/7 (the board's 2.143).
    # (1.96 · √2000 / 10)² · 15/7 = 164.6 -> 165 items; clusters of two: 82.3 -> 83.
    assert mid["sd"] == pytest.approx(math.sqrt(2000), abs=1e-9)
    assert mid["design_effect"] == pytest.approx(15 / 7, abs=1e-12)
    assert mid["items_needed"] == math.ceil(Z95**2 * 2000 * 15 / 7 / 100) == 165
    assert mid["clusters_needed"] == 83
    good = next(row for row in plan["rows"] if row["model"] == "good")["metrics"]["overall"]
    assert good["items_needed"] is None and "every pilot score is the same" in good["note"]
    assert "paired" not in plan


@pytest.mark.django_db
def test_api_plans_paired_units_against_a_baseline(signed_in, counting_project):
    plan = signed_in.get("/api/projects/vtp/power/?baseline=bad&difference=10").json()["paired"]
    assert (plan["baseline"], plan["metric"], plan["units"], plan["difference"]) == ("bad", "overall", "items", 10.0)
    by_model = {c["model"]: c for c in plan["comparisons"]}
    assert set(by_model) == {"mid", "good"}
    # mid − bad: 100 on q2, q3 (scene 1), else 0: sd² = 1.75/15 · 10⁴, design effect 15/7, so
    # sd² · DE = 2500 and ((1.96 + 0.84) · 50 / 10)² = 7.8489 · 25 = 196.2 -> 197 items.
    mid = by_model["mid"]
    assert mid["difference_now"] == pytest.approx(12.5)
    assert mid["sd_difference"] ** 2 * mid["design_effect"] == pytest.approx(2500, abs=1e-9)
    assert mid["units_needed"] == math.ceil((Z95 + Z80) ** 2 * 25) == 197
    assert mid["detectable_now"] == pytest.approx((Z95 + Z80) * 12.5, abs=1e-9)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query, field, found",
    [
        ("half_width=abc", "half_width", "'abc'"),
        ("half_width=0", "half_width", "'0'"),
        ("half_width=-2", "half_width", "'-2'"),
        ("half_width=nan", "half_width", "'nan'"),
        ("half_width=101", "half_width", "'101'"),
        ("difference=inf", "difference", "'inf'"),
        ("metric=spatial_mean", "metric", "'spatial_mean'"),
        ("metric=nope", "metric", "'nope'"),
        ("baseline=nobody", "baseline", "'nobody'"),
    ],
)
def test_bad_input_is_a_400_naming_what_was_found_and_expected(signed_in, counting_project, query, field, found):
    before = Annotation.objects.count()
    response = signed_in.get(f"/api/projects/vtp/power/?{query}")
    assert response.status_code == 400
    message = response.json()[field][0]
    assert found in message
    if field in ("half_width", "difference"):
        assert "expected a number of percentage points above 0 and at most 100" in message
    elif field == "metric":
        assert "expected a metric of this board with item scores" in message and "overall" in message
    else:
        assert "is not a row of this board" in message and "mid" in message
    page = signed_in.get(f"/projects/vtp/power/?{query}")
    assert page.status_code == 400
    assert found.encode() in page.content.replace(b"&#x27;", b"'")
    assert Annotation.objects.count() == before


@pytest.mark.django_db
def test_page_spells_out_the_formula_with_the_numbers(signed_in, counting_project):
    html = signed_in.get("/projects/vtp/power/?half_width=10&baseline=bad&difference=10").content.decode()
    assert "items needed = (1.96 × sd ÷ X)² × design effect" in html
    assert 'data-model="mid"' in html and 'data-items-needed="165"' in html
    assert 'id="power-paired"' in html and 'data-units-needed="197"' in html
    assert 'id="power-raters"' not in html  # model answers: no raters to plan
    # The example spells out the first row with an answer (good is right everywhere: no spread).
    example = html.split('id="power-example">', 1)[1].split("</p>", 1)[0]
    assert example == (
        "For example, mid on Overall: (1.96 × 44.721 ÷ 10)² × 2.143 → <strong>165</strong> items "
        "(it has 16, for a half-width of 32.077 now)."
    )
    assert Z95 * math.sqrt(2000 * 15 / 7 / 16) == pytest.approx(32.077, abs=5e-4)


@pytest.mark.django_db
def test_markdown_and_the_command_print_the_same_plan(signed_in, counting_project):
    markdown = signed_in.get("/api/projects/vtp/power/?half_width=10&fmt=markdown").content.decode()
    assert "| mid | 16 | 8 | 44.721 | 2.143 |" in markdown and "| 165 | 83 |" in markdown
    printed = run_command("power", "vtp", "--half-width", "10", "--format", "markdown")
    assert printed == markdown
    as_json = json.loads(run_command("power", "vtp", "--half-width", "10", "--baseline", "bad"))
    assert as_json["paired"]["comparisons"][0]["model"] in ("mid", "good")
    with pytest.raises(CommandError, match="half_width: expected a number of percentage points above 0"):
        run_command("power", "vtp", "--half-width", "0")
    with pytest.raises(CommandError, match="'nobody' is not a row of this board"):
        run_command("power", "vtp", "--baseline", "nobody")


@pytest.mark.django_db
def test_raters_are_planned_from_each_raters_own_scores(client, make_project, make_user):
    researcher = make_user("res2")
    project = make_project("oscp", "oscbench", members={researcher: Role.RESEARCHER})
    payloads = {
        f"v{i}": {
            "video": f"g1_{i}.mp4",
            "prompt": f"prompt {i}",
            "generator": "g1",
            "scenario": "regular",
            "action": "cut",
            "action_category": "cutting",
            "object": "apple",
            "object_category": "fruit",
        }
        for i in range(3)
    }
    make_release(project, payloads)
    # osc_accuracy 1..5 -> (r − 1) / 4: the items score (0, 0.25), (0.5, 0.75), (1, 0.75) (RATER_SCORES).
    for item, (a, b) in {"v0": (1, 2), "v1": (3, 4), "v2": (5, 4)}.items():
        rate(item, project, "ann-a", {"osc_accuracy": a, "osc_consistency": 3})
        rate(item, project, "ann-b", {"osc_accuracy": b, "osc_consistency": 3})
    client.login(request=HttpRequest(), username="res2", password="pw")
    signed_in = client

    plan = signed_in.get("/api/projects/oscp/power/?half_width=0.1&metric=osc_accuracy").json()
    assert plan["unit"] == "points of the 0–1 scale"
    g1 = plan["rows"][0]["metrics"]["osc_accuracy"]
    assert plan["rows"][0]["model"] == "g1" and len(plan["rows"]) == 1
    assert g1["raters"]["rater_variance"] == pytest.approx(1 / 32, abs=1e-12)
    assert g1["raters"]["item_variance"] == pytest.approx(25 / 192, abs=1e-12)
    assert [e["items_needed"] for e in g1["raters"]["plan"]] == [63, 57, 55, 54, 53]
    assert g1["items_needed"] == 57  # two raters per item, as the pilot
    html = signed_in.get("/projects/oscp/power/?half_width=0.1&metric=osc_accuracy").content.decode()
    assert 'id="power-raters"' in html and '<td data-raters="3">55 (165)</td>' in html
    # A judge's scores: no raters.
    assert signed_in.get("/api/projects/oscp/power/?judge=nobody").status_code == 404
