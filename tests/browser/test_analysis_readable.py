"""Analysis a reader understands, in Chromium: metric names with their
definitions, the Random / Human / Chance rows explained, the chart of the headline metric, the
correlation page's 95 % intervals and inline scatter plots, and both pages usable at 1280×720 and
800×600 without scrolling the page sideways."""

import json
import re

import pytest

from annotation.models import Role
from inference.services import predictions_import
from protocols.oscbench import CRITERIA
from tests.evaluation.factories import make_release, rate
from tests.helpers.items import osc_payload, status_payload

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SIZES = [(1280, 720), (800, 600)]


def no_sideways_scroll(page):
    return page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")


def test_leaderboard_names_defines_and_explains(page, login, live_server, make_user, make_project):
    researcher = make_user("res")
    project = make_project("stb", "status", members={researcher: Role.RESEARCHER})
    release = make_release(project, {f"it{i}": status_payload(i) for i in range(4)})
    resolved = {ri.item.external_id: ri.payload["resolved"] for ri in release.release_items.select_related("item")}
    good = [json.dumps({"item": e, "query": q, "answer": r[q]["answer"]}) for e, r in resolved.items() for q in r]
    predictions_import(project=project, lines=good, model_name="oracle", release=release)

    login(page, "res")
    page.goto(f"{live_server.url}/projects/stb/leaderboard/")
    acc = page.locator('#panel-main th[data-key="acc_osi"]')
    assert acc.inner_text().strip() == "Acc OSI"
    assert "Object state identification" in acc.get_attribute("title")
    for th in page.locator("th[data-key]").all():
        key, text, title = th.get_attribute("data-key"), th.inner_text().strip(), th.get_attribute("title")
        assert text != key and "_" not in text, key
        assert title and title != key and len(title) > 30, key
    page.click('button[data-tab="tab1"]')
    assert page.locator('#panel-tab1 th[data-key="category:positional:roa"]').inner_text().strip() == "ROA"
    # The reference rows say what they are.
    assert page.is_visible('#lb-baselines [data-baseline="Random"]')
    assert "seeded random answers" in page.inner_text('#lb-baselines [data-baseline="Random"]')
    assert "guessing" in page.inner_text('#lb-baselines [data-baseline="Chance"]')
    page.click("#lb-legend summary")
    assert "Rigorous overall accuracy" in page.inner_text("#lb-legend")
    # The chart shows the headline the board is ranked by: ROA, the STATUS paper's measure (ranking.py).
    assert page.inner_text("#lb-chart-title").startswith("ROA ")
    assert "ROA (stb)" in page.eval_on_selector(".lb-chart svg", "s => s.textContent")
    assert "Rows in order of ROA" in page.inner_text("#lb-order")
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        page.click('button[data-tab="main"]')
        assert no_sideways_scroll(page), (width, height)


def test_correlation_shows_intervals_and_scatter_inline(page, login, live_server, make_user, make_project):
    researcher = make_user("res2")
    project = make_project("oscb", "oscbench", members={researcher: Role.RESEARCHER})
    make_release(project, {f"{g}{i}": osc_payload(g, i, "regular") for g in ("genA", "genB") for i in range(3)})
    levels = {"genA0": 5, "genA1": 4, "genA2": 3, "genB0": 2, "genB1": 3, "genB2": 1}
    for ext, level in levels.items():
        for rater, delta in (("r1", 0), ("r2", 1 if level < 5 else -1)):
            rate(ext, project, rater, {c: level + delta for c in CRITERIA})
    lines = [json.dumps({"item": e, "query": "judge", "answer": {c: lv for c in CRITERIA}}) for e, lv in levels.items()]
    predictions_import(project=project, lines=lines, model_name="judge-x", release=project.releases.get())

    login(page, "res2")
    page.goto(f"{live_server.url}/projects/oscb/correlation/")
    row = page.locator('#judges tr[data-model="judge-x"]')
    assert row.locator("[data-ci]").count() == len(CRITERIA)
    # Each interval is two numbers around the cell's τ-b (an empty "[, ]" was shown before).
    for text in row.locator("[data-ci]").all_inner_texts():
        low, high = (float(x) for x in re.fullmatch(r"\[(-?[0-9.]+), (-?[0-9.]+)\]", text.strip()).groups())
        assert -1 <= low <= high <= 1
    assert "State-change accuracy" in page.locator("#judges thead").inner_text()
    images = page.locator('.scatter-grid[data-judge="judge-x"] img')
    assert images.count() == len(CRITERIA)
    images.first.scroll_into_view_if_needed()
    page.wait_for_function(
        "() => { const i = document.querySelector('.scatter-grid img'); return i.complete && i.naturalWidth > 0; }"
    )
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        assert no_sideways_scroll(page), (width, height)
