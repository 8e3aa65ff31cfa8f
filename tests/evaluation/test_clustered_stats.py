"""Clustered standard errors and paired comparisons against a baseline (protocols/kit/clustered.py,
protocols/kit/paired.py, evaluation/paired.py): the formulas against hand computations and an
independent sandwich estimator, then the board's JSON, the API and the command with a baseline."""

import json
import math

import numpy as np
import pytest
from django.core.management import CommandError
from django.http import HttpRequest
from django.template.loader import render_to_string

from annotation.models import Role
from protocols.kit import clustered, paired
from protocols.kit.matrix import ItemMatrix
from tests.helpers.items import run_command

from .factories import COUNTING_ITEMS, counting_board

# --- standard errors ----------------------------------------------------------------------------

SCORES = [1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0]
CLUSTERS = [0, 0, 0, 1, 1, 2, 2]


def test_se_clustered_matches_a_hand_computation():
    # mean 3/7; deviations 4/7 (x3), -3/7 (x4). Cluster sums of deviations: 4/7+4/7-3/7 = 5/7,
    # 4/7-3/7 = 1/7, -6/7; squares 25/49 + 1/49 + 36/49 = 62/49; C = 3.
    # se_clustered = sqrt(3/2 * 62/49) / 7 = sqrt(93/49) / 7.
    # se: sum of squared deviations = 3*16/49 + 4*9/49 = 84/49 = 12/7; sd^2 = (12/7)/6 = 2/7;
    # se = sqrt(2/7) / sqrt(7) = sqrt(2) / 7.
    result = clustered.standard_errors(SCORES, CLUSTERS)

    assert result["n"] == 7 and result["clusters"] == 3
    assert result["se_clustered"] == pytest.approx(math.sqrt(93 / 49) / 7, abs=1e-15)
    assert result["se"] == pytest.approx(math.sqrt(2) / 7, abs=1e-15)
    assert result["design_effect"] == pytest.approx((93 / 49) / 2, abs=1e-12)


def test_se_clustered_equals_the_sandwich_variance_of_the_mean():
    # Independent route: least squares of the scores on a constant, cluster-robust (sandwich)
    # covariance with the C/(C-1) factor: V = c * (X'X)^-1 (sum_c X_c' e_c e_c' X_c) (X'X)^-1.
    rng = np.random.default_rng(4)
    s = rng.integers(0, 2, size=40).astype(float)
    groups = rng.integers(0, 9, size=40)
    x = np.ones((40, 1))
    beta = np.linalg.lstsq(x, s, rcond=None)[0]
    e = s - x @ beta
    bread = np.linalg.inv(x.T @ x)
    meat = np.zeros((1, 1))
    for g in np.unique(groups):
        score = x[groups == g].T @ e[groups == g]
        meat += np.outer(score, score)
    c = np.unique(groups).size
    sandwich = c / (c - 1) * bread @ meat @ bread

    result = clustered.standard_errors(s, groups)

    assert result["clusters"] == c
    assert result["se_clustered"] == pytest.approx(math.sqrt(sandwich[0, 0]), rel=1e-12)


def test_clusters_of_one_item_give_the_naive_error_times_the_small_sample_factor():
    s = np.array([0.2, 0.9, 0.4, 0.4, 1.0, 0.0])
    n = s.size
    population_se = s.std(ddof=0) / math.sqrt(n)  # sd with n in the denominator

    result = clustered.standard_errors(s, np.arange(n))

    assert result["clusters"] == n
    assert result["se_clustered"] == pytest.approx(population_se * math.sqrt(n / (n - 1)), rel=1e-12)
    # ... which is the naive error with the sample sd: the design effect is 1 without clustering
    assert result["se_clustered"] == pytest.approx(result["se"], rel=1e-12)
    assert result["design_effect"] == pytest.approx(1.0, rel=1e-12)


def test_undefined_errors_are_none():
    assert clustered.standard_errors([1.0], [0])["se"] is None
    one_cluster = clustered.standard_errors([1.0, 0.0, 1.0], [5, 5, 5])
    assert one_cluster["se"] is not None and one_cluster["se_clustered"] is None
    assert one_cluster["design_effect"] is None


def test_matrix_errors_read_counted_rows_only_and_skip_derived_keys():
    # column "a" counts rows 0-3 (scores 1, 0, 1/2, 1); row 4 is outside it (den 0)
    matrix = ItemMatrix(keys=("a",), num=[[1], [0], [1], [2], [0]], den=[[1], [1], [2], [2], [0]])
    out = clustered.matrix_standard_errors(matrix, [0, 0, 1, 1, 2], ["a", "derived"], scale=100.0)

    assert set(out) == {"a"}
    expected = clustered.standard_errors([100.0, 0.0, 50.0, 100.0], [0, 0, 1, 1])
    assert out["a"] == expected and out["a"]["n"] == 4 and out["a"]["clusters"] == 2


def test_cluster_keys_read_dotted_paths_and_tuples():
    payload = {"scene": "kitchen", "extra": {"video_id": "v7"}, "video_before": "s1/a.mp4", "video_after": "s1/b.mp4"}
    assert clustered.cluster_value(payload, "scene") == "kitchen"
    assert clustered.cluster_value(payload, "extra.video_id") == "v7"
    assert clustered.cluster_value(payload, ("video_before", "video_after")) == ("s1/a.mp4", "s1/b.mp4")
    assert clustered.cluster_value(payload, "extra.missing") is None
    assert clustered.cluster_value({"extra": "not a mapping"}, "extra.video_id") is None
    # an item without a value is a cluster of its own
    labels = clustered.cluster_labels([{"scene": "x"}, {}, {}, {"scene": "x"}], ["i0", "i1", "i2", "i3"], "scene")
    codes, count = clustered.cluster_codes(labels)
    assert count == 3 and codes.tolist() == [0, 1, 2, 0]


def test_protocols_declare_their_cluster_keys():
    from protocols import registry

    keys = {
        name: registry.get(name).cluster_key for name in ("visualtrans", "m3verse", "status", "changeit", "oscbench")
    }
    assert keys == {
        "visualtrans": "scene",
        "m3verse": ("video_before", "video_after"),
        "status": "extra.video_id",
        "changeit": "extra.video",
        "oscbench": "prompt",
    }


# --- paired tests -------------------------------------------------------------------------------


def test_mcnemar_p_is_the_binomial_tail_of_the_discordant_items():
    # 10 items: 6 where only the model is right, 1 where only the baseline is, 3 concordant.
    model = np.array([1, 1, 1, 1, 1, 1, 0, 1, 0, 1], dtype=float)
    baseline = np.array([0, 0, 0, 0, 0, 0, 1, 1, 0, 1], dtype=float)
    better, worse, p = paired.mcnemar_exact(model, baseline)
    # two-sided: 2 * P(X <= 1), X ~ Binomial(7, 1/2) = 2 * (1 + 7) / 128
    assert (better, worse) == (6, 1)
    assert p == pytest.approx(16 / 128, abs=1e-15)
    assert paired.mcnemar_exact(model, model)[2] == 1.0  # no discordant item


def test_holm_matches_a_hand_computation():
    # sorted: 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04, raised to 0.06)
    assert paired.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02], abs=1e-15)
    assert paired.holm([0.5, None, 0.9]) == [pytest.approx(1.0), None, pytest.approx(1.0)]  # capped at 1, m = 2


def test_paired_t_and_binary_switch():
    model = np.array([0.5, 0.75, 1.0, 0.25, 0.5])
    baseline = np.array([0.25, 0.5, 0.5, 0.25, 0.0])
    d = model - baseline  # 0.25, 0.25, 0.5, 0, 0.5: mean 0.3, squared deviations sum 0.175, sd^2 = 0.04375
    t = 0.3 / math.sqrt(0.04375 / 5)
    from scipy import stats

    result = paired.compare(model, baseline, np.arange(5), n_boot=200)
    assert result["test"] == "paired_t" and "discordant" not in result
    assert result["difference"] == pytest.approx(d.mean())
    assert result["p"] == pytest.approx(2 * stats.t.sf(t, 4), rel=1e-10)
    assert paired.paired_t(np.zeros(3), np.zeros(3)) == 1.0


def test_paired_bootstrap_resamples_whole_clusters():
    # one cluster: every resample draws it, so the interval collapses onto the difference
    model, baseline = np.array([1.0, 0.0, 1.0, 1.0]), np.array([0.0, 0.0, 1.0, 0.0])
    one = paired.compare(model, baseline, [3, 3, 3, 3], n_boot=100)
    assert one["ci"] == [0.5, 0.5] and one["clusters"] == 1
    items = paired.compare(model, baseline, [0, 1, 2, 3], n_boot=500)
    assert items["ci"][0] < 0.5 < items["ci"][1]
    assert items["test"] == "mcnemar_exact" and items["discordant"] == [2, 0]


# --- the board, the API and the command ---------------------------------------------------------

N_ITEMS = COUNTING_ITEMS


@pytest.fixture
def counting_project(make_project, make_user):
    """16 VisualTrans counting questions, two per scene; three models imported (factories.counting_board)."""
    researcher = make_user("res")
    project = make_project("vtc", "visualtrans", members={researcher: Role.RESEARCHER})
    counting_board(project)
    return project


@pytest.mark.django_db
def test_board_rows_carry_naive_and_clustered_errors(counting_project):
    board = json.loads(run_command("leaderboard", "vtc", "--boot", "100"))
    mid = next(r for r in board["rows"] if r["model"] == "mid")

    assert board["cluster_key"] == "scene"
    # mid: right on 4 of 16 (scenes 0 and 1). se = sqrt(3/15)/4 = 0.1118; cluster sums of the
    # deviations: 1.5, 1.5 and -0.5 (x6) -> se_clustered = sqrt(8/7 * 6) / 16 = 0.16366 (percent)
    assert mid["metrics"]["overall"] == 25.0
    assert mid["se"]["overall"] == 11.18
    assert mid["se_clustered"]["overall"] == 16.366
    assert mid["design_effect"]["overall"] == 2.143  # (8/7 * 6 / 256) / (0.2 / 16)
    # derived metrics (a mean of subtask means) have no item scores: no error
    assert "spatial_mean" not in mid["se"] and "quantitative" in mid["se"]


@pytest.mark.django_db
def test_api_compares_every_row_with_the_baseline(client, counting_project):
    client.login(request=HttpRequest(), username="res", password="pw")
    response = client.get("/api/projects/vtc/leaderboard/?baseline=bad")
    assert response.status_code == 200
    result = response.json()["paired"]
    assert (result["baseline"], result["metric"], result["resampled"]) == ("bad", "overall", "clusters")
    by_model = {c["model"]: c for c in result["comparisons"]}
    assert set(by_model) == {"good", "mid", "Random"}
    good, mid = by_model["good"], by_model["mid"]
    assert good["difference"] == 87.5 and good["n"] == N_ITEMS and good["clusters"] == 8
    assert good["test"] == "mcnemar_exact" and good["discordant"] == [14, 0]
    assert good["p"] == pytest.approx(2 * 0.5**14, rel=1e-12)
    assert mid["discordant"] == [2, 0] and mid["p"] == pytest.approx(0.5, rel=1e-12)
    # Holm across the three comparisons, from their own p values
    expected = paired.holm([c["p"] for c in result["comparisons"]])
    assert [c["p_holm"] for c in result["comparisons"]] == pytest.approx(expected)
    assert good["significant"] is True and mid["significant"] is False
    lo, hi = good["ci"]
    assert lo <= 87.5 <= hi

    # the same comparisons with ?details=1 and in the markdown table
    assert client.get("/api/projects/vtc/leaderboard/?baseline=bad&details=1").json()["paired"] == result
    markdown = client.get("/api/projects/vtc/leaderboard/?baseline=bad&fmt=markdown").content.decode()
    assert "Paired comparisons against bad on overall" in markdown and "| good | 87.50 [" in markdown

    # the page's partial marks the significant row
    html = render_to_string("evaluation/_paired.html", {"board": response.json(), "paired": result, "paired_places": 2})
    assert 'data-model="good" class="lb-significant"' in html and 'data-model="mid">' in html


@pytest.mark.django_db
def test_api_and_page_refuse_an_unknown_baseline(client, counting_project):
    client.login(request=HttpRequest(), username="res", password="pw")
    response = client.get("/api/projects/vtc/leaderboard/?baseline=nobody")
    assert response.status_code == 400
    message = response.json()["baseline"][0]
    assert "'nobody' is not a row of this board" in message and "good" in message and "Random" in message
    assert client.get("/api/projects/vtc/leaderboard/?baseline=bad&fmt=csv").status_code == 400
    page = client.get("/projects/vtc/leaderboard/?baseline=nobody")
    assert page.status_code == 400 and b"not a row of this board" in page.content
    shown = client.get("/projects/vtc/leaderboard/?baseline=bad")
    assert shown.status_code == 200
    # the leaderboard page carries the comparison table (templates/evaluation/_paired.html)
    assert b'id="lb-paired-table"' in shown.content and b"Paired comparisons against bad" in shown.content
    assert b'id="lb-paired-table"' not in client.get("/projects/vtc/leaderboard/").content


@pytest.mark.django_db
def test_command_prints_paired_comparisons(counting_project):
    board = json.loads(run_command("leaderboard", "vtc", "--baseline", "good", "--boot", "200"))
    by_model = {c["model"]: c for c in board["paired"]["comparisons"]}
    assert by_model["bad"]["difference"] == -87.5 and by_model["bad"]["discordant"] == [0, 14]
    assert by_model["bad"]["significant"] is True
    # in board order: the rows' order less the baseline
    assert [c["model"] for c in board["paired"]["comparisons"]] == [
        r["model"] for r in board["rows"] if r["model"] != "good"
    ]
    markdown = run_command("leaderboard", "vtc", "--baseline", "good", "--format", "markdown", "--boot", "50")
    assert "Paired comparisons against good" in markdown

    with pytest.raises(CommandError, match="'nobody' is not a row of this board; its rows: good, mid, bad"):
        run_command("leaderboard", "vtc", "--baseline", "nobody", "--boot", "50")
    with pytest.raises(CommandError, match="--format json or markdown, not csv"):
        run_command("leaderboard", "vtc", "--baseline", "good", "--format", "csv")
