"""A researcher reads the judges page of an arena project in Chromium: the judge's consistency,
position bias and agreement with the human majority, the pairs where they differ with both videos
playing, the way to the pair's review page, and the arena ranking against a Likert board."""

from __future__ import annotations

import pytest
from scipy import stats as sps

from annotation.models import Annotation, Role
from protocols.oscbench import CRITERIA
from tests.evaluation.factories import make_release, rate
from tests.evaluation.test_judges import PAIRS, RUN_1, VOTES, _import_run
from tests.inference.factories import release_of
from tests.protocols.arena.helpers import MODEL_NAMES, clips, make_pair

from .work_helpers import served_media_root, shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def projects(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    researcher = make_user("res")
    project = make_project("arena-judges", "arena", members={researcher: Role.RESEARCHER})
    media = clips(tmp_path)
    items = [make_pair(project, f"p{i}", media, models=PAIRS[i % 3]) for i in range(len(VOTES))]
    for item, votes in zip(items, VOTES, strict=True):
        for r, winner in enumerate(votes):
            Annotation.objects.create(item=item, external_rater=f"r{r}", result={"winner": winner}, source="import")
    release = release_of(project, items)
    _import_run(project, release, "judge-x", RUN_1)
    osc = make_project("likert-board", "oscbench", members={researcher: Role.RESEARCHER})
    base = {"video": "v.mp4", "scenario": "regular", "action": "slice", "action_category": "cutting"}
    base |= {"object": "bread", "object_category": "food"}
    payloads = {f"o{i}-{m}": {**base, "prompt": f"slice {i}", "generator": m} for i in range(2) for m in MODEL_NAMES}
    make_release(osc, payloads)
    level = dict(zip(MODEL_NAMES, (5, 3, 4), strict=True))
    for ext, payload in payloads.items():
        for r in range(2):
            rate(ext, osc, f"r{r}", {c: level[payload["generator"]] for c in CRITERIA})
    return project, osc


def test_judges_page_shows_trust_figures_and_the_disagreements(page, login, live_server, projects):
    project, osc = projects
    login(page, "res")
    page.goto(f"{live_server.url}/projects/{project.slug}/judges/?release=v1")
    row = page.locator('#judges-table tr[data-judge="judge-x"]')
    cells = [" ".join(c.inner_text().split()) for c in row.locator("td").all()]  # a figure, its counts below
    assert cells[0] == "judge-x" and cells[1] == "1"
    assert cells[2] == "0.833 5 of 6"  # swap consistency
    assert cells[3].startswith("0.625 5 of 8")  # position bias: the output shown first, 5 of 8 times
    assert cells[4] == "0.333 1 of 3"  # accuracy on the non-tie majorities
    assert cells[5].startswith("0.474")  # kappa (3/5 - 6/25) / (1 - 6/25)
    assert cells[6] == "one run" and cells[7] == "2"

    # The two pairs judge and humans disagree on, each with both videos, which really play.
    rows = page.locator("#judges-disagreements tbody tr[data-item]")
    assert sorted(r.get_attribute("data-item") for r in rows.all()) == ["p1", "p4"]
    p1 = page.locator('#judges-disagreements tr[data-item="p1"]')
    assert p1.locator("td[data-verdict]").first.get_attribute("data-verdict") == "b"
    assert p1.locator("td[data-verdict]").last.inner_text().startswith("tie")
    videos = p1.locator("video")
    assert videos.count() == 2
    page.wait_for_function(
        "() => [...document.querySelectorAll('#judges-disagreements tr[data-item=\"p1\"] video')]"
        ".every(v => v.readyState >= 1 && v.duration > 0)"
    )
    shot(page, "judges")

    # The pair's link leads to its review page.
    with page.expect_navigation():
        p1.locator("a").first.click()
    assert page.url.endswith(f"/projects/{project.slug}/review/{project.items.get(external_id='p1').pk}/")

    # The arena ranking against the Likert board: tau-b over the three models.
    page.goto(f"{live_server.url}/projects/{project.slug}/judges/?release=v1")
    page.select_option("#judges-likert", osc.slug)
    page.click("#judges-form button[type=submit]")
    page.wait_for_selector("#judges-ranking")
    arena_rows = page.request.get(f"{live_server.url}/api/projects/{project.slug}/leaderboard/?release=v1").json()
    rating = {r["model"]: r["metrics"]["rating"] for r in arena_rows["rows"]}
    expected = sps.kendalltau([rating[m] for m in MODEL_NAMES], [5, 3, 4]).statistic
    assert page.inner_text("#judges-tau") == f"{expected:.3f}"
    assert "fewer than 10 systems" in page.inner_text("#judges-ranking")

    # A Likert project that cannot be compared: a 400 naming what was given.
    with page.expect_response(lambda r: "/judges/" in r.url) as info:
        page.goto(f"{live_server.url}/projects/{project.slug}/judges/?likert=nowhere")
    assert info.value.status == 400
    assert "got 'nowhere'" in page.inner_text("#judges-likert-error")
