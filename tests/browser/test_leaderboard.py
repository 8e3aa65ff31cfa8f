"""A researcher opens the leaderboard and correlation pages, sorts a column and downloads tables."""
import json
from pathlib import Path

import pytest

from annotation.models import Role
from evaluation.scoring.oscbench import CRITERIA
from inference.services import predictions_import
from tests.evaluation.factories import make_release, rate
from tests.evaluation.test_commands import osc_payload, status_payload

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
    bad = [json.dumps({"item": e, "query": q, "answer": "B" if r[q]["answer"] == "A" else "A"}) for e, r in resolved.items() for q in r]
    predictions_import(project=project, lines=bad, model_name="contrarian", release=release)

    login(page, "res")
    page.goto(f"{live_server.url}/projects/stb/leaderboard/")
    main = page.locator("#panel-main tbody tr")
    assert main.count() == 3
    header = page.locator('#panel-main th[data-key="acc_osi"]')
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    assert main.nth(0).get_attribute("data-model") == "oracle"
    assert main.nth(2).get_attribute("data-model") == "contrarian"
    header.click()
    assert header.get_attribute("aria-sort") == "ascending"
    assert main.nth(0).get_attribute("data-model") == "contrarian"

    shot(page, "leaderboard")
    page.click('button[data-tab="tab1"]')
    assert page.locator("#panel-tab1").is_visible() and not page.locator("#panel-main").is_visible()

    with page.expect_download() as info:
        page.click('a[data-format="csv"]')
    download = info.value
    assert download.suggested_filename == "stb-leaderboard-v1.csv"
    text = open(download.path(), encoding="utf-8").read()
    lines = text.splitlines()
    assert lines[0].startswith("model,rank,n,parse_failures,acc_osi")
    assert lines[1].startswith("contrarian,2,4,0,0.00,") and lines[2].startswith("oracle,1,4,0,100.00,")

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
    assert tab_lines[1].startswith("contrarian,2,4,0,0.00,") and tab_lines[2].startswith("oracle,1,4,0,100.00,")


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
    assert [r.get_attribute("data-model") for r in page.locator("#panel-main tbody tr").all()] == ["genA", "genB", "Random"]
