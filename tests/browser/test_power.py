"""A researcher opens the power page from the leaderboard, asks for another half-width and a paired
comparison, and is told plainly when a target is not a number."""

import math
from pathlib import Path

import pytest

from annotation.models import Role
from tests.evaluation.factories import counting_board

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
Z95 = 1.959963984540054
Z80 = 0.8416212335729143


def test_power_page_answers_items_needed_and_paired_units(page, login, live_server, make_user, make_project):
    researcher = make_user("res")
    project = make_project("vtpow", "visualtrans", members={researcher: Role.RESEARCHER})
    counting_board(project)  # bad right on 2 of 16 questions, mid on 4, good on all; two per scene

    login(page, "res")
    page.goto(f"{live_server.url}/projects/vtpow/leaderboard/")
    # The main table shows each metric's standard errors: mid's, naive / clustered by scene.
    assert page.inner_text('#panel-main tr[data-model="mid"] .se') == "SE 11.180 / 16.366 (DE 2.143)"
    page.click("#lb-power-link")
    page.wait_for_url(f"{live_server.url}/projects/vtpow/power/**")

    # Defaults: a half-width of 2 points on the headline metric (Overall); the formula in words.
    assert page.input_value("#power-half-width") == "2"
    assert page.locator("#power-metric option:checked").inner_text() == "Overall"
    assert "items needed = (1.96 × sd ÷ X)² × design effect" in page.inner_text("#power-formula")
    rows = page.locator("#power-items tbody tr[data-model]")
    assert [r.get_attribute("data-model") for r in rows.all()] == ["good", "mid", "bad"]
    # mid: sd² = 2000, design effect 15/7: (1.96 · √2000 / 2)² · 15/7 = 4116 items.
    expected_2 = math.ceil(Z95**2 * 2000 * 15 / 7 / 4)
    assert page.get_attribute('#power-items tr[data-model="mid"] [data-items-needed]', "data-items-needed") == str(
        expected_2
    )

    # A wider target and a paired question against "bad".
    page.fill("#power-half-width", "10")
    page.select_option("#power-baseline", "bad")
    page.fill("#power-difference", "10")
    page.click("#power-form button[type=submit]")
    page.wait_for_selector("#power-paired")
    mid_items = page.locator('#power-items tr[data-model="mid"] [data-items-needed]')
    assert mid_items.inner_text() == "165"  # (1.96 · √2000 / 10)² · 15/7 = 164.6
    assert page.inner_text("#power-example").startswith("For example, mid on Overall: (1.96 × 44.721 ÷ 10)² × 2.143")
    # mid − bad: sd² · design effect = 2500, so ((1.96 + 0.84) · 50 / 10)² = 196.2 -> 197 items.
    mid_units = page.locator('#power-paired tr[data-model="mid"] [data-units-needed]')
    assert mid_units.inner_text() == str(math.ceil((Z95 + Z80) ** 2 * 25)) == "197"
    assert page.locator("#power-paired tbody tr").count() == 2  # mid and good; never the baseline or Random
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "power.png"), full_page=True)

    # Not a number: the page says which field, what it found and what it expects; nothing computed.
    page.fill("#power-half-width", "two")
    with page.expect_response(lambda r: "/power/" in r.url) as info:
        page.click("#power-form button[type=submit]")
    assert info.value.status == 400
    assert page.inner_text("#power-error") == (
        "half_width: expected a number of percentage points above 0 and at most 100, found 'two'"
    )
    assert page.locator("#power-items").count() == 0
    assert page.input_value("#power-half-width") == "two"  # the form keeps what was typed

    # The JSON link carries the same question.
    page.fill("#power-half-width", "10")
    page.click("#power-form button[type=submit]")
    page.wait_for_selector("#power-items")
    href = page.get_attribute("#power-json", "href")
    assert href.startswith("/api/projects/vtpow/power/?") and "half_width=10" in href
