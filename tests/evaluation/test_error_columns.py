"""The standard errors of a board (se, se_clustered, design effect) in its CSV, LaTeX and Markdown and
on the page's main table; the values are the board JSON's (checked by hand in test_clustered_stats)."""

import csv
import io

import pytest
from django.http import HttpRequest

from evaluation import tables

from .test_power import counting_project  # noqa: F401 (the fixture: three models on 16 questions, 2 per scene)

# mid: right on 4 of 16 (two scenes): se 11.180, clustered 16.366, design effect 2.143 (test_clustered_stats).
MID = ("11.180", "16.366", "2.143")


@pytest.fixture
def signed_in(client, counting_project):  # noqa: F811
    client.login(request=HttpRequest(), username="res", password="pw")
    return client


@pytest.mark.django_db
def test_csv_carries_each_metrics_errors_after_its_interval(signed_in):
    body = signed_in.get("/projects/vtp/leaderboard/download/csv/").content.decode()
    rows = list(csv.DictReader(io.StringIO(body)))
    mid = next(r for r in rows if r["model"] == "mid")
    assert (mid["overall_se"], mid["overall_se_clustered"], mid["overall_design_effect"]) == MID
    # a metric derived from several means has no item scores: empty cells
    assert (mid["spatial_mean_se"], mid["spatial_mean_se_clustered"], mid["spatial_mean_design_effect"]) == ("", "", "")
    good = next(r for r in rows if r["model"] == "good")  # right everywhere: no spread
    assert (good["overall_se"], good["overall_se_clustered"], good["overall_design_effect"]) == ("0.000", "0.000", "")


def test_a_breakdown_tab_has_no_error_columns():
    row = {
        "model": "m",
        "n": 4,
        "parse_failures": 0,
        "metrics": {"acc_osi": 50.0},
        "ci": {"acc_osi": [25.0, 75.0]},
        "se": {"acc_osi": 12.5},
        "se_clustered": {"acc_osi": 15.0},
        "design_effect": {"acc_osi": 1.44},
        "breakdowns": {"category:positional:acc_osi": {"value": 40.0, "ci": [20.0, 60.0]}},
    }
    board = {"project": "p", "release": None, "protocol": "status", "cluster_key": "extra.video_id", "rows": [row]}
    main = tables.render_leaderboard(board, "csv").splitlines()
    assert main[0] == (
        "model,rank,n,parse_failures,acc_osi,acc_osi_ci_lo,acc_osi_ci_hi,"
        "acc_osi_se,acc_osi_se_clustered,acc_osi_design_effect"
    )
    assert main[1] == "m,,4,0,50.00,25.00,75.00,12.500,15.000,1.440"
    tab = tables.render_leaderboard(board, "csv", breakdown="category:positional").splitlines()
    assert tab[0] == "model,rank,n,parse_failures,acc_osi,acc_osi_ci_lo,acc_osi_ci_hi"
    assert tab[1] == "m,,4,0,40.00,20.00,60.00"
    assert tab[2] == "Chance,,,,50.00,,"
    assert "Standard errors" not in tables.render_leaderboard(board, "markdown", breakdown="category:positional")
    assert "| m | 12.500 / 15.000 (1.440) |" in tables.render_leaderboard(board, "markdown")


@pytest.mark.django_db
def test_latex_and_markdown_add_a_table_of_errors(signed_in):
    latex = signed_in.get("/projects/vtp/leaderboard/download/latex/").content.decode()
    first, second = latex.split(r"\end{table}")[:2]
    assert r"Model & Rank & n & Parse failures & Fine-grained & Global" in first and r"& Overall \\" in first
    assert r"\caption{vtp: standard errors of the means, naive / clustered by scene" in second
    assert r"mid & 11.180 / 16.366 (2.143)" in second
    markdown = signed_in.get("/api/projects/vtp/leaderboard/?fmt=markdown").content.decode()
    assert "| mid | 11.180 / 16.366 (2.143) |" in markdown


@pytest.mark.django_db
def test_the_page_main_table_shows_the_errors(signed_in):
    html = signed_in.get("/projects/vtp/leaderboard/").content.decode()
    main = html.split('id="panel-main"', 1)[1].split("</section>", 1)[0]
    row = main.split('<tr data-model="mid"', 1)[1].split("</tr>", 1)[0]
    assert (
        '<span class="ci se" data-se="11.180" data-se-clustered="16.366" data-design-effect="2.143"' in row
        and ">SE 11.180 / 16.366 (DE 2.143)</span>" in row
    )
    assert "clustered by <code>scene</code>" in html
