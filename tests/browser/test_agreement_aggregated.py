"""The agreement page in Chromium with an imported aggregated rating (the mean of several raters,
Annotation.aggregate_raters): it is no row of the annotator table, and the page says how many such
ratings the figures leave out."""

import pytest

from annotation.models import Annotation, Role

from .work_helpers import annotate_through_queue, make_item

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

OWN = {
    "subject": 3,
    "object": 4,
    "action": 4,
    "osc_accuracy": 3,
    "osc_consistency": 3,
    "scene": None,
    "realism": 2,
    "aesthetics": 3,
}


def test_aggregated_ratings_are_listed_apart(page, login, live_server, make_user, make_project):
    u1, u2, lead = make_user("r1"), make_user("r2"), make_user("lead")
    project = make_project(
        "aggr",
        "oscbench",
        members={u1: Role.ANNOTATOR, u2: Role.ANNOTATOR, lead: Role.RESEARCHER},
        annotations_per_item=2,
    )
    for i in range(2):
        make_item(project, f"v{i}", {"video": "v.mp4", "prompt": "p"}, {})
    annotate_through_queue(project, u1, [{"scores": OWN}])
    annotate_through_queue(project, u2, [{"scores": {**OWN, "object": 5}}])
    study = make_item(project, "v-study", {"video": "v.mp4", "prompt": "p"}, {})
    Annotation.objects.create(
        item=study,
        external_rater="study-1",
        source="import",
        aggregate_raters=3,
        result={"scores": {**OWN, "object": 4.67}},
    )

    login(page, "lead")
    page.goto(f"{live_server.url}/projects/aggr/agreement/")
    page.wait_for_selector("[data-agreement][data-loaded]")
    names = page.eval_on_selector_all("[data-annotators] tbody tr", "rs => rs.map(r => r.cells[0].innerText.trim())")
    assert [n.split()[0] for n in names] == ["r1", "r2"]
    note = page.locator("[data-aggregated]")
    assert note.is_visible()
    assert note.inner_text() == "1 aggregated rating (imported means of several raters) not counted in these figures"
