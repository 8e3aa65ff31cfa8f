"""Every view of a leaderboard shows its rows in one order, the headline metric's (evaluation/ranking.py):
the page's table, its chart, the API, the CSV / LaTeX / Markdown / JSON downloads and the cached board.

STATUS: a board where ordering by OA and by ROA disagree ("broad" has the best OA and no item
rigorously right). OSCBench: a board where state-change accuracy alone and the state-change score
disagree."""

import csv
import io
import json
import re
from html import unescape

import pytest
from django.http import HttpRequest

from annotation.models import Role
from inference.services import predictions_import
from protocols import registry
from protocols.oscbench import CRITERIA
from tests.helpers.items import osc_payload, status_payload

from .factories import make_release, rate

pytestmark = pytest.mark.django_db

N_ITEMS = 20
# ROA / OA of each model on the 20 items (answers built below):
#   zeta-tied  items 0-9 all right, 10-19 all right but the 4-option change: ROA 50, OA 100
#   alpha-twin items 0-9 all right, 10-19 all wrong:                          ROA 50, OA 50
#   rigorous   the same answers as alpha-twin:                                 ROA 50, OA 50
#   broad      every item all right but the 4-option change:                   ROA 0,  OA 100
#   Random     seeded answers, 1 item rigorously right:                        ROA 5,  OA 56.67
ROA_ORDER = ["zeta-tied", "alpha-twin", "rigorous", "Random", "broad"]
OA_ORDER = ["zeta-tied", "broad", "Random", "alpha-twin", "rigorous"]  # OA first, then ROA, then name


def wrong(right: str) -> str:
    return "B" if right == "A" else "A"


def status_answers(resolved: dict, plan) -> list[str]:
    lines = []
    for i in range(N_ITEMS):
        r = resolved[f"it{i}"]
        for q in r:
            correct = plan(i, q)
            lines.append(
                json.dumps(
                    {"item": f"it{i}", "query": q, "answer": r[q]["answer"] if correct else wrong(r[q]["answer"])}
                )
            )
    return lines


@pytest.fixture
def status_board(make_project, make_user, client):
    researcher = make_user("res")
    project = make_project("order", "status", members={researcher: Role.RESEARCHER})
    release = make_release(project, {f"it{i}": status_payload(i) for i in range(N_ITEMS)})
    resolved = {ri.item.external_id: ri.payload["resolved"] for ri in release.release_items.select_related("item")}
    plans = {
        "zeta-tied": lambda i, q: i < 10 or q != "sci4",
        "alpha-twin": lambda i, q: i < 10,
        "rigorous": lambda i, q: i < 10,
        "broad": lambda i, q: q != "sci4",
    }
    for name, plan in plans.items():
        predictions_import(project=project, lines=status_answers(resolved, plan), model_name=name, release=release)
    client.login(request=HttpRequest(), username="res", password="pw")
    return project


def main_table_order(html: str) -> list[str]:
    panel = html.split('id="panel-main"', 1)[1].split("</section>", 1)[0]
    return [unescape(m) for m in re.findall(r'<tr data-model="([^"]*)"', panel)]


def chart_order(svg: str) -> list[str]:
    return [unescape(m) for m in re.findall(r'<text class="label"[^>]*>([^<]*)</text>', svg)]


def chart_values(svg: str) -> list[float]:
    return [float(m) for m in re.findall(r'<text class="value"[^>]*>([^<]*)</text>', svg)]


def csv_order(text: str) -> list[tuple[str, str]]:
    return [(r["model"], r["rank"]) for r in csv.DictReader(io.StringIO(text)) if r["model"] != "Chance"]


def test_status_table_chart_api_and_downloads_share_the_roa_order(client, status_board):
    details = client.get("/api/projects/order/leaderboard/?details=1").json()
    rows = details["rows"]
    assert [(r["model"], r["metrics"]["roa"], r["metrics"]["oa"]) for r in rows] == [
        ("zeta-tied", 50.0, 100.0),
        ("alpha-twin", 50.0, 50.0),
        ("rigorous", 50.0, 50.0),
        ("Random", 5.0, 56.67),
        ("broad", 0.0, 100.0),
    ]
    # The headline order is not the OA order (else this test could pass for no reason).
    assert [r["model"] for r in sorted(rows, key=lambda r: -r["metrics"]["oa"])] == OA_ORDER != ROA_ORDER
    # Rank 1 is the best ROA; ranks never go down the table; equal ROA share a rank.
    ranks = [r["rank"] for r in rows]
    assert ranks == [1, 1, 1, 4, 4]
    assert details["ranked_by"] == ["roa", "oa", "model"]

    # The API (plain JSON and each text format).
    assert [r["model"] for r in client.get("/api/projects/order/leaderboard/").json()["rows"]] == ROA_ORDER
    api_csv = client.get("/api/projects/order/leaderboard/?fmt=csv").content.decode()
    assert csv_order(api_csv) == list(zip(ROA_ORDER, ["1", "1", "1", "4", "4"]))

    # The page: table rows, the column it is sorted by, and the chart beside it.
    html = client.get("/projects/order/leaderboard/").content.decode()
    assert main_table_order(html) == ROA_ORDER
    assert '<th class="sortable" data-type="num" data-key="roa" title="' in html
    assert re.search(r'data-key="roa" title="[^"]*" aria-sort="descending">ROA</th>', html)
    assert html.count('aria-sort="descending"') == 1
    assert re.search(r'id="lb-order">Rows in order of <strong>ROA</strong>[^<]*\(ties: OA, then model name\)', html)
    assert '<h2 id="lb-chart-title">ROA with 95 % intervals</h2>' in html
    figure = html.split('<figure class="lb-chart">', 1)[1].split("</figure>", 1)[0]
    assert chart_order(figure) == ROA_ORDER
    assert chart_values(figure) == [50.0, 50.0, 50.0, 5.0, 0.0]
    # The value axis fits the data (evaluation/charts.py): from 0 to the round number above the
    # highest interval end, here 50 [30, 70] -> 0-80 in steps of 20, not 0-100.
    assert max(r["ci"]["roa"][1] for r in rows) == 70.0
    assert re.findall(r'<text class="tick"[^>]*>([^<]*)</text>', figure) == ["0", "20", "40", "60", "80"]
    # Every breakdown tab lists the rows in the same order.
    for panel in re.findall(r'<section class="lb-panel" id="panel-(tab\d+)"', html):
        part = html.split(f'id="panel-{panel}"', 1)[1].split("</section>", 1)[0]
        assert re.findall(r'<tr data-model="([^"]*)"', part) == ROA_ORDER, panel

    # Downloads: CSV, LaTeX, Markdown, JSON and the chart (its default metric is the headline; another
    # metric keeps the leaderboard's order).
    base = "/projects/order/leaderboard/download"
    assert csv_order(client.get(f"{base}/csv/").content.decode()) == list(zip(ROA_ORDER, ["1", "1", "1", "4", "4"]))
    latex, latex_errors = client.get(f"{base}/latex/").content.decode().split(r"\end{table}")[:2]
    body = [
        line.split(" & ")[:2]
        for line in latex.splitlines()
        if " & " in line and not line.startswith(("Model", "Chance"))
    ]
    assert body == [["zeta-tied", "1"], ["alpha-twin", "1"], ["rigorous", "1"], ["Random", "4"], ["broad", "4"]]
    # the second table, the standard errors, keeps the order
    assert [
        line.split(" & ")[0] for line in latex_errors.splitlines() if " & " in line and not line.startswith("Model")
    ] == ROA_ORDER
    md, md_caption, md_errors = client.get(f"{base}/markdown/").content.decode().split("\n\n")
    assert [line.split(" | ")[0].lstrip("| ") for line in md.splitlines()[2:-1]] == ROA_ORDER
    assert md_caption.startswith("Standard errors of the means, naive / clustered")
    assert [line.split(" | ")[0].lstrip("| ") for line in md_errors.splitlines()[2:]] == ROA_ORDER
    assert [r["model"] for r in json.loads(client.get(f"{base}/json/").content)["rows"]] == ROA_ORDER
    svg = client.get(f"{base}/svg/").content.decode()
    assert chart_order(svg) == ROA_ORDER and "<title>Leaderboard: ROA</title>" in svg
    assert chart_order(client.get(f"{base}/svg/?metric=oa").content.decode()) == ROA_ORDER
    breakdown = client.get(f"{base}/csv/?breakdown=difference:slight").content.decode()
    assert [m for m, _ in csv_order(breakdown)] == ROA_ORDER


def test_the_command_prints_the_same_order(status_board):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("leaderboard", "order", "--format", "csv", "--boot", "200", stdout=out)
    assert [m for m, _ in csv_order(out.getvalue())] == ROA_ORDER


def test_a_cached_board_follows_the_ranking_definition(client, status_board, monkeypatch):
    # The first request caches the board (Redis); a changed ranking definition must not be answered
    # from that board, in either order.
    assert [r["model"] for r in client.get("/api/projects/order/leaderboard/").json()["rows"]] == ROA_ORDER
    monkeypatch.setattr(registry.get("status"), "ranking", ("oa", "roa"))  # the definition: the protocol's
    assert [r["model"] for r in client.get("/api/projects/order/leaderboard/").json()["rows"]] == OA_ORDER
    html = client.get("/projects/order/leaderboard/").content.decode()
    assert main_table_order(html) == OA_ORDER
    assert '<h2 id="lb-chart-title">OA with 95 % intervals</h2>' in html
    assert chart_order(html.split('<figure class="lb-chart">', 1)[1]) == OA_ORDER
    monkeypatch.undo()
    assert [r["model"] for r in client.get("/api/projects/order/leaderboard/").json()["rows"]] == ROA_ORDER


def test_oscbench_generators_rank_by_the_state_change_score_not_its_accuracy_half(client, make_project, make_user):
    researcher = make_user("res")
    project = make_project("oscorder", "oscbench", members={researcher: Role.RESEARCHER})
    make_release(project, {f"{g}{i}": osc_payload(g, i, "regular") for g in ("genA", "genB") for i in range(4)})
    # genA: accuracy 5, consistency 2 -> 1.000 and 0.250, score 0.625; genB: 4 and 5 -> 0.750, 1.000, score 0.875.
    levels = {"genA": {"osc_accuracy": 5, "osc_consistency": 2}, "genB": {"osc_accuracy": 4, "osc_consistency": 5}}
    for g, fixed in levels.items():
        for i in range(4):
            for rater in ("r1", "r2", "r3"):
                rate(f"{g}{i}", project, rater, {c: fixed.get(c, 3) for c in CRITERIA})
    client.login(request=HttpRequest(), username="res", password="pw")

    rows = client.get("/api/projects/oscorder/leaderboard/?details=1").json()["rows"]
    generators = [r for r in rows if r["model"] != "Random"]
    assert [
        (r["model"], r["metrics"]["osc_accuracy"], r["metrics"]["state_change"], r["rank"]) for r in generators
    ] == [("genB", 0.75, 0.875, 1), ("genA", 1.0, 0.625, 2)]
    order = [r["model"] for r in rows]
    assert order.index("genB") < order.index("genA")
    html = client.get("/projects/oscorder/leaderboard/").content.decode()
    assert main_table_order(html) == order
    assert re.search(r'data-key="state_change" title="[^"]*" aria-sort="descending">State-change score</th>', html)
    assert '<h2 id="lb-chart-title">State-change score with 95 % intervals</h2>' in html
    assert chart_order(html.split('<figure class="lb-chart">', 1)[1].split("</figure>", 1)[0]) == order
    lines = client.get("/projects/oscorder/leaderboard/download/csv/").content.decode()
    assert [m for m, _ in csv_order(lines)] == order
    assert lines.splitlines()[0].endswith(
        ",aesthetics,aesthetics_ci_lo,aesthetics_ci_hi,aesthetics_se,aesthetics_se_clustered,aesthetics_design_effect,"
        "criteria_mean,criteria_mean_ci_lo,criteria_mean_ci_hi,criteria_mean_se,criteria_mean_se_clustered,"
        "criteria_mean_design_effect,state_change,state_change_ci_lo,state_change_ci_hi,state_change_se,"
        "state_change_se_clustered,state_change_design_effect"
    )


# --- OSCBench: the researcher picks the ranking (?rank_by=): the state-change score or the mean of criteria ---

# genA: accuracy and consistency 5, every other criterion 1: state change 1.000, mean of criteria 2/8 = 0.250.
# genB: accuracy and consistency 3, subject N/A, the rest 5: state change 0.500, mean of criteria 6/7 = 0.857.
DISAGREE = {
    "genA": {"osc_accuracy": 5, "osc_consistency": 5},
    "genB": {"osc_accuracy": 3, "osc_consistency": 3, "subject": None},
}


@pytest.fixture
def osc_rank_board(make_project, make_user, client):
    researcher = make_user("res")
    project = make_project("oscrank", "oscbench", members={researcher: Role.RESEARCHER})
    make_release(project, {f"{g}{i}": osc_payload(g, i, "regular") for g in DISAGREE for i in range(4)})
    for g, fixed in DISAGREE.items():
        other = 1 if g == "genA" else 5
        for i in range(4):
            for rater in ("r1", "r2", "r3"):
                rate(f"{g}{i}", project, rater, {c: fixed.get(c, other) for c in CRITERIA})
    client.login(request=HttpRequest(), username="res", password="pw")
    return project


def by(rows, key):
    """Model names in descending order of one metric (the name breaks ties, as the ranking does)."""
    return [r["model"] for r in sorted(rows, key=lambda r: (-r["metrics"][key], r["model"]))]


def test_oscbench_ranks_by_the_state_change_score_or_by_the_mean_of_criteria(client, osc_rank_board, monkeypatch):
    from evaluation import leaderboard

    builds = []
    build = leaderboard.build
    monkeypatch.setattr(leaderboard, "build", lambda *a, **k: builds.append(k) or build(*a, **k))
    default = client.get("/api/projects/oscrank/leaderboard/?details=1").json()
    by_mean = client.get("/api/projects/oscrank/leaderboard/?details=1&rank_by=criteria_mean").json()
    # The second board is the first one's rows in another order: scored once, from the same ratings.
    assert len(builds) == 1
    values = {r["model"]: (r["metrics"], r["ci"], r["n"]) for r in default["rows"]}
    assert {r["model"]: (r["metrics"], r["ci"], r["n"]) for r in by_mean["rows"]} == values
    gens = {r["model"]: r["metrics"] for r in default["rows"] if r["model"] != "Random"}
    assert {g: (m["state_change"], m["criteria_mean"]) for g, m in gens.items()} == {
        "genA": (1.0, 0.25),
        "genB": (0.5, 0.857),
    }

    state_order, mean_order = [r["model"] for r in default["rows"]], [r["model"] for r in by_mean["rows"]]
    assert state_order == by(default["rows"], "state_change") and mean_order == by(default["rows"], "criteria_mean")
    assert state_order.index("genA") < state_order.index("genB") and mean_order.index("genB") < mean_order.index("genA")
    assert (default["rank_by"], by_mean["rank_by"]) == ("state_change", "criteria_mean")
    assert by_mean["ranked_by"] == ["criteria_mean", "state_change", "osc_accuracy", "osc_consistency", "model"]
    ranks = {r["model"]: r["rank"] for r in by_mean["rows"]}
    assert ranks["genB"] == 1 and ranks["genA"] > 1  # genA's interval [0.25, 0.25] lies below genB's
    assert (
        client.get("/api/projects/oscrank/leaderboard/?rank_by=state_change").json()["rows"]
        == client.get("/api/projects/oscrank/leaderboard/").json()["rows"]
    )
    api_csv = client.get("/api/projects/oscrank/leaderboard/?fmt=csv&rank_by=criteria_mean").content.decode()
    assert [m for m, _ in csv_order(api_csv)] == mean_order

    # The page: the select shows the choice, the rows, the sorted column and the chart follow it.
    html = client.get("/projects/oscrank/leaderboard/?rank_by=criteria_mean").content.decode()
    assert main_table_order(html) == mean_order
    assert re.search(
        r'<select name="rank_by" id="lb-rank-by" data-autosubmit>'
        r'<option value="state_change">State-change score \(default\)</option>'
        r'<option value="criteria_mean" selected>Mean of criteria</option></select>',
        html,
    )
    assert re.search(r'data-key="criteria_mean" title="[^"]*" aria-sort="descending">Mean of criteria</th>', html)
    assert html.count('aria-sort="descending"') == 1
    assert re.search(
        r'id="lb-order">Rows in order of <strong>Mean of criteria</strong>, the ranking picked below '
        r"\(default: State-change score\) \(ties: State-change score, State-change accuracy, "
        r"State-change consistency, then model name\)",
        html,
    )
    assert '<h2 id="lb-chart-title">Mean of criteria with 95 % intervals</h2>' in html
    assert chart_order(html.split('<figure class="lb-chart">', 1)[1].split("</figure>", 1)[0]) == mean_order
    assert 'href="/projects/oscrank/leaderboard/download/csv/?rank_by=criteria_mean"' in html
    default_html = client.get("/projects/oscrank/leaderboard/").content.decode()
    assert main_table_order(default_html) == state_order
    assert '<option value="state_change" selected>State-change score (default)</option>' in default_html

    # The downloads follow the choice too; a non-default ranking says so in the file name.
    base = "/projects/oscrank/leaderboard/download"
    response = client.get(f"{base}/csv/?rank_by=criteria_mean")
    assert response["Content-Disposition"] == 'attachment; filename="oscrank-leaderboard-v1-by-criteria_mean.csv"'
    assert csv_order(response.content.decode()) == [(r["model"], str(r["rank"])) for r in by_mean["rows"]]
    latex = client.get(f"{base}/latex/?rank_by=criteria_mean").content.decode().split(r"\end{table}")[0]
    assert [
        line.split(" & ")[0] for line in latex.splitlines() if " & " in line and not line.startswith("Model")
    ] == mean_order
    md = client.get(f"{base}/markdown/?rank_by=criteria_mean").content.decode().split("\n\n")[0].splitlines()[2:]
    assert [line.split(" | ")[0].lstrip("| ") for line in md] == mean_order
    assert [
        r["model"] for r in json.loads(client.get(f"{base}/json/?rank_by=criteria_mean").content)["rows"]
    ] == mean_order
    svg = client.get(f"{base}/svg/?rank_by=criteria_mean").content.decode()
    assert chart_order(svg) == mean_order and "<title>Leaderboard: Mean of criteria</title>" in svg
    assert [m for m, _ in csv_order(client.get(f"{base}/csv/").content.decode())] == state_order


def test_the_mean_of_criteria_is_the_correlation_pages_system_score(osc_rank_board):
    from evaluation import board_cache, correlation, selectors
    from protocols import registry

    items = selectors.scoring_items(osc_rank_board, selectors.release_for(osc_rank_board, None))
    human = correlation._human_means(
        selectors.consensus_ratings(items, selectors.ratings_by_item(items)),
        [it.key for it in items],
        criteria=registry.get("oscbench").criteria,
    )
    system = correlation._system_score(human, [it.payload["generator"] for it in items])
    assert system == {"genA": 2.0, "genB": pytest.approx(1 + 4 * 6 / 7)}  # 1-5 scale: (mean - 1) / 4 is the 0-1 score
    rows = board_cache.board(osc_rank_board, None, None, "criteria_mean")["rows"]
    assert {r["model"]: r["metrics"]["criteria_mean"] for r in rows if r["model"] in system} == {
        g: round((s - 1) / 4, 3) for g, s in system.items()
    }


@pytest.mark.parametrize("query", ["rank_by=bogus", "rank_by=aesthetics", "rank_by=CRITERIA_MEAN", "rank_by=roa"])
def test_an_unknown_ranking_is_a_400_naming_the_parameter_and_its_values(client, osc_rank_board, query):
    message = (
        f"rank_by: {query.split('=')[1]!r} is not a ranking of oscbench leaderboards; allowed values: "
        "state_change, criteria_mean"
    )
    for fmt in ("", "&fmt=csv"):
        response = client.get(f"/api/projects/oscrank/leaderboard/?{query}{fmt}")
        assert response.status_code == 400
        assert response.json() == {"rank_by": [message]}
    for url in (
        "/projects/oscrank/leaderboard/",
        "/projects/oscrank/leaderboard/download/csv/",
        "/projects/oscrank/leaderboard/download/svg/",
    ):
        response = client.get(f"{url}?{query}")
        assert (response.status_code, response.content.decode()) == (400, message), url


def test_a_protocol_with_one_ranking_shows_no_choice_and_refuses_another(client, status_board):
    html = client.get("/projects/order/leaderboard/").content.decode()
    assert 'name="rank_by"' not in html
    assert main_table_order(client.get("/projects/order/leaderboard/?rank_by=roa").content.decode()) == ROA_ORDER
    response = client.get("/api/projects/order/leaderboard/?rank_by=criteria_mean")
    assert response.status_code == 400
    assert response.json() == {
        "rank_by": ["rank_by: 'criteria_mean' is not a ranking of status leaderboards; allowed values: roa"]
    }


def test_a_stranger_with_a_bad_ranking_learns_nothing_more(client, osc_rank_board, make_user):
    make_user("stranger")
    client.logout()
    client.login(request=HttpRequest(), username="stranger", password="pw")
    for url in ("/api/projects/oscrank/leaderboard/", "/projects/oscrank/leaderboard/"):
        assert client.get(f"{url}?rank_by=bogus").status_code == client.get(url).status_code != 400


def test_the_command_takes_the_ranking_too(osc_rank_board):
    from io import StringIO

    from django.core.management import CommandError, call_command

    def rows(*extra):
        out = StringIO()
        call_command("leaderboard", "oscrank", "--format", "csv", "--boot", "100", *extra, stdout=out)
        return [m for m, _ in csv_order(out.getvalue())]

    assert rows("--rank-by", "criteria_mean").index("genB") < rows("--rank-by", "criteria_mean").index("genA")
    assert rows().index("genA") < rows().index("genB")
    with pytest.raises(CommandError, match="allowed values: state_change, criteria_mean"):
        rows("--rank-by", "realism")
