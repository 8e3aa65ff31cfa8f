"""A researcher reads the rater screen on an arena board in Chromium, excludes the flagged rater
with the page's button (the board is fitted again without their votes, the change audited), then
includes them again."""

from __future__ import annotations

import pytest

from annotation.models import AuditEvent, Project, Role
from tests.evaluation.arena_raters import HONEST, N_ITEMS, STRONG, seed_votes, strong_wins
from tests.protocols.arena.helpers import clips

from .work_helpers import served_media_root

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def arena(settings, tmp_path, make_project, make_user):
    settings.MEDIA_ROOT = served_media_root()
    researcher = make_user("res")
    carol = make_user("carol")
    project = make_project(
        "arena-raters",
        "arena",
        members={researcher: Role.RESEARCHER, carol: Role.ANNOTATOR},
        annotations_per_item=6,
    )
    seed_votes(project, clips(tmp_path), carol)
    return project, researcher, carol


def _battles(page) -> str:
    # The main table's Battles column: the model's row, by its header's metric key.
    header = page.locator("#panel-main thead th")
    index = [h.get_attribute("data-key") for h in header.all()].index("battles")
    return page.locator(f'#panel-main tr[data-model="{STRONG}"] td').nth(index).inner_text()


def test_exclude_the_flagged_rater_from_the_board_page(page, login, live_server, arena):
    project, researcher, carol = arena
    key = f"user:{carol.pk}"
    login(page, "res")
    page.goto(f"{live_server.url}/projects/{project.slug}/leaderboard/")
    section = page.locator("#lb-rater-screen")
    assert section.locator("h2").inner_text() == "Rater screen"
    assert page.locator("#lb-excluded-count").inner_text() == "No rater excluded."
    rows = section.locator("#lb-raters tbody tr")
    assert rows.count() == len(HONEST) + 1
    flagged = section.locator(f'#lb-raters tr[data-rater="{key}"]')
    cells = [c.inner_text().strip() for c in flagged.locator("td").all()]
    assert cells[0] == "carol" and cells[1:3] == [str(N_ITEMS), str(N_ITEMS)] and cells[7] == "flagged"
    assert float(cells[6]) < 0.05  # Holm p
    assert section.locator(".lb-flagged").count() == 1  # the honest raters are not flagged
    honest = section.locator('#lb-raters tr[data-rater="ext:h0"] td').all()
    assert [c.inner_text().strip() for c in honest[:3]] == ["h0", str(N_ITEMS), "2"]
    assert _battles(page) == str(strong_wins(with_contrarian=True)[1])

    with page.expect_navigation():
        flagged.locator("button", has_text="Exclude").click()
    assert (
        page.locator("#lb-excluded-count")
        .inner_text()
        .startswith(f"1 rater excluded ({N_ITEMS} votes left out): carol")
    )
    assert _battles(page) == str(strong_wins(with_contrarian=False)[1])
    row = page.locator(f'#lb-raters tr[data-rater="{key}"]')
    assert "excluded" in row.locator("td").nth(8).inner_text()
    assert "1 rater excluded by a researcher" in page.locator("#lb-notes").inner_text()
    event = AuditEvent.objects.get(action="project_settings", project=project)
    assert event.actor_name == "res" and event.details["rater"] == key and event.details["excluded"] is True
    assert event.details["screen"]["flagged"] is True
    assert Project.objects.get(pk=project.pk).settings["arena_excluded_raters"] == [key]

    with page.expect_navigation():
        page.locator(f'#lb-excluded-count [data-excluded-rater="{key}"] button').click()
    assert page.locator("#lb-excluded-count").inner_text() == "No rater excluded."
    assert _battles(page) == str(strong_wins(with_contrarian=True)[1])
    assert AuditEvent.objects.filter(action="project_settings", project=project).count() == 2
