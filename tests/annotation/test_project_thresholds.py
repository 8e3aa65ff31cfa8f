"""Disagreement thresholds set in the app (project_setup.project_thresholds_set, the project
settings page and API): checked field by field, recorded in the audit trail, and the items waiting
for review marked again under the new thresholds; a refused change changes nothing."""

from __future__ import annotations

import math

import pytest
from django.test import Client

from annotation.disagreement import thresholds_clean
from annotation.models import AuditEvent, Project, Role
from annotation.project_setup import SetupInvalid, project_thresholds_set
from annotation.services import review_decide
from tests.annotation.work_factories import make_item, make_people, valid_result
from tests.helpers.work import annotate_in_turn, marked_fields, rating_result

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(make_user):
    return [*make_people(2), make_user("lead")]


@pytest.fixture
def rating(make_project, team):
    """Three rated videos: realism spread by 2, by 3, and one already verified (spread 3)."""
    a, b, lead = team
    project = make_project(
        "thr", "oscbench", annotations_per_item=2, members={a: Role.ANNOTATOR, b: Role.ANNOTATOR, lead: Role.RESEARCHER}
    )
    two, three, settled = (make_item(project, ext) for ext in ("two", "three", "settled"))
    for item, realism in ((two, 4), (three, 5), (settled, 5)):
        annotate_in_turn(project, [a, b], [rating_result(), rating_result(realism=realism)])
    review_decide(item_id=settled.pk, reviewer=lead, decision="edit", result=rating_result(realism=3))
    return project, lead, two, three, settled


# --- checking the values --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given, clean",
    [
        ({"rating_spread": 3}, {"rating_spread": 3}),
        ({"rating_spread": "4"}, {"rating_spread": 4}),
        ({"rating_spread": 1.0}, {"rating_spread": 1}),
        ({"box_iou": "0.3"}, {"box_iou": 0.3}),
        ({"box_iou": 1}, {"box_iou": 1.0}),
        ({"box_iou": 0.01}, {"box_iou": 0.01}),
        ({"quintuplet_fields": ["category", "state_a"]}, {"quintuplet_fields": ["state_a", "category"]}),
    ],
)
def test_thresholds_clean_takes(given, clean):
    assert thresholds_clean(given) == (clean, {})


@pytest.mark.parametrize(
    "given",
    [
        {"rating_spread": 0},
        {"rating_spread": 5},
        {"rating_spread": 2.5},
        {"rating_spread": "two"},
        {"rating_spread": True},
        {"rating_spread": ""},
        {"box_iou": 0},
        {"box_iou": "0"},
        {"box_iou": -0.1},
        {"box_iou": 1.01},
        {"box_iou": "nan"},
        {"box_iou": math.inf},
        {"box_iou": "half"},
        {"box_iou": None},
        {"quintuplet_fields": []},
        {"quintuplet_fields": ["state_a", "colour"]},
        {"quintuplet_fields": "state_a"},
    ],
)
def test_thresholds_clean_refuses(given):
    clean, errors = thresholds_clean(given)
    assert clean == {} and list(errors) == list(given)


# --- the service ----------------------------------------------------------------------------------


def test_a_new_rating_spread_re_marks_the_items_waiting_for_review(rating):
    project, lead, two, three, settled = rating
    assert marked_fields(two, three, settled) == [["scores.realism"]] * 3  # the default spread, 2

    outcome = project_thresholds_set(project=project, actor=lead, values={"rating_spread": "3"})

    assert outcome == {
        "changed": True,
        "thresholds": {**outcome["thresholds"], "rating_spread": 3},
        "items_remarked": 2,
        "items_marked": 1,
    }
    assert marked_fields(two, three, settled) == [
        [],
        ["scores.realism"],
        ["scores.realism"],
    ]  # the verified one kept its mark
    project.refresh_from_db()
    assert project.settings["disagreement"] == {"rating_spread": 3}
    event = AuditEvent.objects.get(action="project_settings")
    assert (event.actor, event.project, event.object_id) == (lead, project, str(project.pk))
    assert event.details == {
        "disagreement": {"rating_spread": {"before": 2, "after": 3}},
        "set": {"rating_spread": 3},
        "items_remarked": 2,
        "items_marked": 1,
    }

    # Back to 2: the item is marked again.
    project_thresholds_set(project=project, actor=lead, values={"rating_spread": 2})
    assert marked_fields(two, three) == [["scores.realism"], ["scores.realism"]]


def test_a_refused_change_changes_nothing(rating):
    project, lead, two, three, _settled = rating
    before = dict(Project.objects.get(pk=project.pk).settings)

    for values in ({"rating_spread": 0}, {"rating_spread": 3, "box_iou": 0.4}, {"rating_spread": 9, "colour": 1}):
        with pytest.raises(SetupInvalid) as exc:
            project_thresholds_set(project=project, actor=lead, values=values)
        assert set(exc.value.errors) == set(values) - ({"rating_spread"} if values.get("rating_spread") == 3 else set())

    assert Project.objects.get(pk=project.pk).settings == before
    assert marked_fields(two, three) == [["scores.realism"], ["scores.realism"]]
    assert not AuditEvent.objects.filter(action="project_settings").exists()


def test_setting_the_stored_value_again_changes_nothing(rating):
    project, lead, *_ = rating
    project_thresholds_set(project=project, actor=lead, values={"rating_spread": 3})

    outcome = project_thresholds_set(project=project, actor=lead, values={"rating_spread": 3})

    assert (outcome["changed"], outcome["items_remarked"]) == (False, 0)
    assert AuditEvent.objects.filter(action="project_settings").count() == 1


# --- the API and the page -------------------------------------------------------------------------


def test_box_iou_over_the_api(make_project, team):
    a, b, lead = team
    project = make_project(
        "boxes",
        "changeit",
        annotations_per_item=2,
        members={a: Role.ANNOTATOR, b: Role.ANNOTATOR, lead: Role.RESEARCHER},
    )
    item = make_item(project)
    annotate_in_turn(
        project,
        [a, b],
        [{"bbox": [0, 0, 100, 100], "state": "peeled apple"}, {"bbox": [40, 0, 100, 100], "state": "peeled apple"}],
    )  # IoU 0.43
    assert marked_fields(item) == [["bbox"]]
    client = Client()
    client.force_login(lead)
    url = "/api/projects/boxes/settings/disagreement/"

    assert client.get(url).json() == {
        "workflow": "box",
        "settable": ["box_iou"],
        "thresholds": {
            "rating_spread": 2,
            "box_iou": 0.5,
            "quintuplet_fields": ["state_a", "state_b", "change", "change_distractors", "category", "difference"],
        },
    }
    refused = client.patch(url, {"box_iou": 0}, content_type="application/json")
    assert (refused.status_code, refused.json()["errors"]) == (
        400,
        {"box_iou": "An overlap (IoU) above 0 and at most 1, e.g. 0.5."},
    )
    foreign = client.patch(url, {"rating_spread": 3}, content_type="application/json")
    assert (foreign.status_code, list(foreign.json()["errors"])) == (400, ["rating_spread"])
    unknown = client.patch(url, {"iou": 0.4}, content_type="application/json")
    assert (unknown.status_code, list(unknown.json()["errors"])) == (400, ["iou"])
    assert marked_fields(item) == [["bbox"]] and "disagreement" not in Project.objects.get(pk=project.pk).settings

    r = client.patch(url, {"box_iou": 0.4}, content_type="application/json")

    assert r.status_code == 200
    assert (
        r.json()["thresholds"]["box_iou"],
        r.json()["changed"],
        r.json()["items_remarked"],
        r.json()["items_marked"],
    ) == (0.4, True, 1, 0)
    assert marked_fields(item) == [[]]


def test_the_settings_page(make_project, team):
    a, b, lead = team
    project = make_project(
        "pairs", "status", annotations_per_item=2, members={a: Role.ANNOTATOR, b: Role.ANNOTATOR, lead: Role.RESEARCHER}
    )
    item = make_item(project)
    annotate_in_turn(project, [a, b], [valid_result("quintuplet"), valid_result("quintuplet", 1)])  # difference differs
    assert marked_fields(item) == [["difference"]]
    client = Client()
    client.force_login(lead)

    page = client.get("/projects/pairs/settings/")
    assert page.status_code == 200 and 'name="quintuplet_fields" value="difference" checked' in page.content.decode()
    none = client.post("/projects/pairs/settings/", {})
    assert none.status_code == 400 and list(none.context["errors"]) == ["quintuplet_fields"]
    assert marked_fields(item) == [["difference"]]

    done = client.post(
        "/projects/pairs/settings/", {"quintuplet_fields": ["state_a", "state_b", "change"]}, follow=True
    )

    assert done.status_code == 200
    assert [str(m) for m in done.context["messages"]] == [
        "Thresholds saved. 1 item(s) waiting for review were marked again: 0 now to adjudicate."
    ]
    assert marked_fields(item) == [[]]
    assert Project.objects.get(pk=project.pk).settings["disagreement"] == {
        "quintuplet_fields": ["state_a", "state_b", "change"]
    }
    qa = make_project("qa", "visualtrans", members={lead: Role.RESEARCHER})
    assert 'id="thresholds-none"' in client.get(f"/projects/{qa.slug}/settings/").content.decode()
