"""A researcher opens the leaderboard and correlation pages, sorts a column and downloads tables;
the table, its chart and the downloads list the rows in the headline metric's order."""

import json
from pathlib import Path

import pytest

from annotation.models import Role
from inference.models import InferenceJob
from inference.services import endpoint_create, predictions_import
from protocols.oscbench import CRITERIA
from tests.evaluation.factories import make_release, rate
from tests.helpers.items import osc_payload, status_payload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def shot(page, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_leaderboard_sort_and_download(page, login, live_server, make_user, make_project):
    researcher = make_user("res")
    project = make_project("stb", "status", members={researcher: Role.RESEARCHER})
    release = make_release(project, {f"it{i}": status_payload(i) for i in range(4)})
    resolved = {ri.item.external_id: ri.payload["resolved"] for ri in release.release_items.select_related("item")}
    good = [json.dumps({"item": e, "query": q, "answer": r[q]["answer"]}) for e, r in resolved.items() for q in r]
    predictions_import(project=project, lines=good, model_name="oracle", release=release)
    bad = [
        json.dumps({"item": e, "query": q, "answer": "B" if r[q]["answer"] == "A" else "A"})
        for e, r in resolved.items()
        for q in r
    ]
    predictions_import(project=project, lines=bad, model_name="contrarian", release=release)
    # oracle's answers came from a priced endpoint: 40,000 · $2.5 + 4,000 · $10 per million tokens = $0.14.
    endpoint = endpoint_create(name="oracle", backend="random", price_per_1m_input=2.5, price_per_1m_output=10)
    InferenceJob.objects.filter(model_name="oracle").update(
        endpoint=endpoint, prompt_tokens=40_000, completion_tokens=4_000
    )

    login(page, "res")
    page.goto(f"{live_server.url}/projects/stb/leaderboard/")
    assert page.locator('#panel-main tr[data-model="oracle"] td.lb-usage').nth(1).inner_text() == "$0.14"
    main = page.locator("#panel-main tbody tr")
    assert main.count() == 3

    def order():
        return [r.get_attribute("data-model") for r in main.all()]

    # Rows arrive in leaderboard order, ROA first (evaluation/ranking.py), and the chart draws them so.
    leaderboard = ["oracle", "Random", "contrarian"]
    assert order() == leaderboard
    roa = page.locator('#panel-main th[data-key="roa"]')
    assert roa.get_attribute("aria-sort") == "descending"
    assert page.locator(".lb-chart svg text.label").all_text_contents() == leaderboard
    assert page.inner_text("#lb-chart-title").startswith("ROA ")
    shot(page, "leaderboard")
    roa.click()
    # Ascending; Random and contrarian both have ROA 0.00 and keep their leaderboard order (OA decided it).
    assert roa.get_attribute("aria-sort") == "ascending" and order() == ["Random", "contrarian", "oracle"]
    roa.click()
    assert roa.get_attribute("aria-sort") == "descending" and order() == leaderboard
    header = page.locator('#panel-main th[data-key="acc_osi"]')
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    assert main.nth(0).get_attribute("data-model") == "oracle"
    assert main.nth(2).get_attribute("data-model") == "contrarian"
    header.click()
    assert header.get_attribute("aria-sort") == "ascending"
    assert main.nth(0).get_attribute("data-model") == "contrarian"
    # Equal values (every row has n = 4) keep the leaderboard's order, whatever the last sort was.
    page.locator("#panel-main th").nth(2).click()
    assert order() == leaderboard

    page.click('button[data-tab="tab1"]')
    assert page.locator("#panel-tab1").is_visible() and not page.locator("#panel-main").is_visible()

    with page.expect_download() as info:
        page.click('a[data-format="csv"]')
    download = info.value
    assert download.suggested_filename == "stb-leaderboard-v1.csv"
    text = open(download.path(), encoding="utf-8").read()
    lines = text.splitlines()
    assert lines[0].startswith("model,rank,n,parse_failures,acc_osi")
    assert [line.split(",")[0] for line in lines[1:4]] == leaderboard
    assert lines[1].startswith("oracle,1,4,0,100.00,") and lines[3].startswith("contrarian,2,4,0,0.00,")

    # The open tab downloads its own breakdown table.
    tab_link = page.locator('#panel-tab1 a[data-format="csv"]')
    breakdown = tab_link.get_attribute("data-breakdown")
    assert breakdown
    with page.expect_download() as info:
        tab_link.click()
    tab_download = info.value
    tab_lines = open(tab_download.path(), encoding="utf-8").read().splitlines()
    assert breakdown == "category:positional"  # every item of this release is positional
    assert tab_download.suggested_filename == "stb-leaderboard-v1-category-positional.csv"
    assert tab_lines[0].startswith("model,rank,n,parse_failures,acc_osi")
    assert tab_lines[1].startswith("oracle,1,4,0,100.00,") and tab_lines[3].startswith("contrarian,2,4,0,0.00,")


def test_correlation_page_and_heatmap_download(page, login, live_server, make_user, make_project):
    researcher = make_user("res2")
    project = make_project("oscb", "oscbench", members={researcher: Role.RESEARCHER})
    payloads = {f"{g}{i}": osc_payload(g, i, "regular") for g in ("genA", "genB") for i in range(3)}
    make_release(project, payloads)
    levels = {"genA0": 5, "genA1": 4, "genA2": 3, "genB0": 2, "genB1": 3, "genB2": 1}
    for ext, level in levels.items():
        for rater in ("r1", "r2"):
            rate(ext, project, rater, {c: level for c in CRITERIA})
    lines = [json.dumps({"item": e, "query": "judge", "answer": {c: lv for c in CRITERIA}}) for e, lv in levels.items()]
    predictions_import(project=project, lines=lines, model_name="judge-x", release=project.releases.get())

    login(page, "res2")
    page.goto(f"{live_server.url}/projects/oscb/correlation/")
    assert page.locator('#judges tr[data-model="judge-x"]').count() == 1
    assert page.locator("figure svg").count() == 1
    shot(page, "correlation")
    page.locator("#judges th").nth(1).click()
    with page.expect_download() as info:
        page.click('a[data-format="json"]')
    report = json.loads(open(info.value.path(), encoding="utf-8").read())
    assert report["judges"][0]["per_criterion"]["object"]["kendall_tau_b"] == 1.0
    page.goto(f"{live_server.url}/projects/oscb/leaderboard/")
    # Generators in order of the state-change score; the Random row where its score puts it.
    assert [r.get_attribute("data-model") for r in page.locator("#panel-main tbody tr").all()] == [
        "genA",
        "Random",
        "genB",
    ]


def test_oscbench_ranking_choice_reorders_the_page_and_its_downloads(page, login, live_server, make_user, make_project):
    # genA: state change right (accuracy and consistency 5), everything else 1; genB: state change 3,
    # everything else 5. The state-change score puts genA first, the mean of the criteria genB.
    researcher = make_user("res3")
    project = make_project("oscr", "oscbench", members={researcher: Role.RESEARCHER})
    make_release(project, {f"{g}{i}": osc_payload(g, i, "regular") for g in ("genA", "genB") for i in range(3)})
    for g, (change, rest) in {"genA": (5, 1), "genB": (3, 5)}.items():
        for i in range(3):
            for rater in ("r1", "r2"):
                rate(f"{g}{i}", project, rater, {c: change if c.startswith("osc_") else rest for c in CRITERIA})

    login(page, "res3")
    page.goto(f"{live_server.url}/projects/oscr/leaderboard/")
    rows = page.locator("#panel-main tbody tr")

    def generators():
        return [m for m in (r.get_attribute("data-model") for r in rows.all()) if m != "Random"]

    select = page.locator("#lb-rank-by")
    assert select.input_value() == "state_change"
    assert select.locator("option").all_text_contents() == ["State-change score (default)", "Mean of criteria"]
    assert generators() == ["genA", "genB"]
    assert page.locator('#panel-main th[data-key="state_change"]').get_attribute("aria-sort") == "descending"

    # Picking the other ranking reloads the page in its order: table, sorted column, chart, downloads.
    with page.expect_navigation():
        select.select_option("criteria_mean")
    assert "rank_by=criteria_mean" in page.url
    assert page.locator("#lb-rank-by").input_value() == "criteria_mean"
    assert generators() == ["genB", "genA"]
    assert page.locator('#panel-main th[data-key="criteria_mean"]').get_attribute("aria-sort") == "descending"
    assert page.locator('#panel-main th[data-key="state_change"]').get_attribute("aria-sort") is None
    assert page.inner_text("#lb-chart-title").startswith("Mean of criteria ")
    assert [m for m in page.locator(".lb-chart svg text.label").all_text_contents() if m != "Random"] == [
        "genB",
        "genA",
    ]
    assert "Mean of criteria" in page.inner_text("#lb-order")
    with page.expect_download() as info:
        page.click('.lb-downloads:not(.lb-tab-downloads) a[data-format="csv"]')
    download = info.value
    assert download.suggested_filename == "oscr-leaderboard-v1-by-criteria_mean.csv"
    lines = open(download.path(), encoding="utf-8").read().splitlines()
    assert [line.split(",")[0] for line in lines[1:] if not line.startswith("Random")] == ["genB", "genA"]

    # And back to the default.
    with page.expect_navigation():
        page.locator("#lb-rank-by").select_option("state_change")
    assert generators() == ["genA", "genB"]
