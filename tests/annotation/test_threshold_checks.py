"""Disagreement thresholds are checked the same way on every path that writes them (the settings
page and API, the admin's project form: project_setup.disagreement_setting_clean), and a stored
value that check refuses (written before it, or straight into the database) is read as its
default with a warning, never used as it is (disagreement.thresholds_from)."""

from __future__ import annotations

import logging

import pytest
from django.test import Client

from annotation.disagreement import Thresholds, thresholds_from
from annotation.models import AuditEvent, Item, Project, Role
from annotation.project_setup import project_thresholds_set
from tests.annotation.work_factories import make_item, make_people
from tests.helpers.admin import admin_save
from tests.helpers.work import annotate_in_turn, marked_fields, rating_result

pytestmark = pytest.mark.django_db
APART = [
    {"bbox": [0, 0, 100, 100], "state": "peeled apple"},
    {"bbox": [40, 0, 100, 100], "state": "peeled apple"},
]  # IoU 0.43


# --- reading what is stored -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stored, read, refused",
    [
        (
            {"rating_spread": 3, "box_iou": 0.3, "quintuplet_fields": ["change", "state_a"]},
            Thresholds(3, 0.3, ("state_a", "change")),
            [],
        ),
        ({"rating_spread": 2.5}, Thresholds(), ["rating_spread"]),
        ({"rating_spread": 0}, Thresholds(), ["rating_spread"]),
        ({"rating_spread": True}, Thresholds(), ["rating_spread"]),
        ({"box_iou": 0}, Thresholds(), ["box_iou"]),
        ({"box_iou": -1}, Thresholds(), ["box_iou"]),
        ({"box_iou": 1.5}, Thresholds(), ["box_iou"]),
        ({"box_iou": "nan"}, Thresholds(), ["box_iou"]),
        ({"quintuplet_fields": []}, Thresholds(), ["quintuplet_fields"]),
        ({"quintuplet_fields": ["colour"]}, Thresholds(), ["quintuplet_fields"]),
        ({"box_iou": 0, "rating_spread": 4}, Thresholds(rating_spread=4), ["box_iou"]),
    ],
)
def test_a_stored_value_the_check_refuses_is_read_as_its_default(stored, read, refused, caplog):
    with caplog.at_level(logging.WARNING, logger="annotation.disagreement"):
        assert thresholds_from({"disagreement": stored}, project="lab") == read
    messages = [r.getMessage() for r in caplog.records]
    assert [m.split()[2] for m in messages] == refused
    assert all(" of project lab is invalid (" in m and m.endswith(" applies") for m in messages)


def test_a_disagreement_setting_that_is_no_object_or_names_no_threshold_is_ignored_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="annotation.disagreement"):
        assert thresholds_from({"disagreement": "strict"}, project="lab") == Thresholds()
        assert thresholds_from({"disagreement": {"iou": 0.1, "box_iou": 0.4}}, project="lab") == Thresholds(box_iou=0.4)
        assert thresholds_from({}) == Thresholds()
    assert [r.getMessage() for r in caplog.records] == [
        "settings['disagreement'] of project lab is not a JSON object ('strict'): the default thresholds apply",
        "settings['disagreement'] of project lab has no threshold named iou: ignored",
    ]


def test_a_box_iou_of_0_stored_in_the_settings_marks_boxes_at_the_default(make_project, caplog):
    a, b = make_people(2)
    project = make_project(
        "boxes",
        "changeit",
        annotations_per_item=2,
        members={a: Role.ANNOTATOR, b: Role.ANNOTATOR},
        settings={"disagreement": {"box_iou": 0}},
    )  # as the admin's JSON took it before
    calm = make_project(
        "calm",
        "changeit",
        annotations_per_item=2,
        members={a: Role.ANNOTATOR, b: Role.ANNOTATOR},
        settings={"disagreement": {"box_iou": 0.4}},
    )
    item, other = make_item(project), make_item(calm)

    with caplog.at_level(logging.WARNING, logger="annotation.disagreement"):
        annotate_in_turn(project, [a, b], APART)
        annotate_in_turn(calm, [a, b], APART)

    # IoU 0.43: below the default 0.5 (an IoU of 0 would never mark a box); above a valid 0.4.
    assert marked_fields(item, other) == [["bbox"], []]
    assert any("box_iou of project boxes is invalid (0;" in r.getMessage() for r in caplog.records)


def test_a_fractional_rating_spread_stored_in_the_settings_marks_at_the_default(make_project):
    a, b = make_people(2)
    project = make_project(
        "videos",
        "oscbench",
        annotations_per_item=2,
        members={a: Role.ANNOTATOR, b: Role.ANNOTATOR},
        settings={"disagreement": {"rating_spread": 2.5}},
    )
    item = make_item(project)

    annotate_in_turn(project, [a, b], [rating_result(), rating_result(realism=4)])  # realism 2 and 4: a spread of 2

    assert marked_fields(item) == [["scores.realism"]]


# --- the settings API drops what the check refuses ----------------------------------------------------


def test_setting_a_threshold_drops_stored_values_the_check_refuses(make_project):
    lead = make_people(1, "lead")[0]
    project = make_project("boxes", "changeit", settings={"disagreement": {"box_iou": 0, "rating_spread": 3}})

    outcome = project_thresholds_set(project=project, actor=lead, values={"box_iou": 0.6})

    assert (outcome["changed"], outcome["thresholds"]["box_iou"]) == (True, 0.6)
    assert Project.objects.get(pk=project.pk).settings == {"disagreement": {"box_iou": 0.6}}


# --- the admin's project form ----------------------------------------------------------------------


@pytest.fixture
def boxes(make_project, make_user):
    a, b = make_people(2)
    project = make_project(
        "boxes",
        "changeit",
        annotations_per_item=2,
        settings={"auto_verify": False},
        members={a: Role.ANNOTATOR, b: Role.ANNOTATOR},
    )
    item = make_item(project)
    annotate_in_turn(project, [a, b], APART)
    admin = make_user("root", superuser=True)
    client = Client()
    client.force_login(admin)
    return project, item, admin, client


@pytest.mark.parametrize(
    "typed, error",
    [
        ({"disagreement": {"box_iou": 0}}, "disagreement.box_iou: An overlap (IoU) above 0 and at most 1, e.g. 0.5."),
        (
            {"disagreement": {"box_iou": "half"}},
            "disagreement.box_iou: An overlap (IoU) above 0 and at most 1, e.g. 0.5.",
        ),
        (
            {"disagreement": {"rating_spread": 3}},
            "disagreement.rating_spread: Not a threshold of Bounding box + state projects.",
        ),
        ({"disagreement": {"iou": 0.4}}, "disagreement.iou: Not a threshold of Bounding box + state projects."),
        ({"disagreement": [0.4]}, 'disagreement: A JSON object of thresholds, e.g. {"box_iou": 0.5}.'),
        ([1, 2], 'Workflow settings are one JSON object, e.g. {"auto_verify": true}.'),
        ("{'box_iou': 0.4}", "Enter a valid JSON."),
    ],
)
def test_the_admin_refuses_thresholds_the_settings_page_refuses(boxes, typed, error):
    project, item, _admin, client = boxes

    r = admin_save(client, project, typed)

    assert r.status_code == 200  # the form again, with the error
    assert r.context["adminform"].form.errors["settings"] == [error]
    assert Project.objects.get(pk=project.pk).settings == {"auto_verify": False}
    assert marked_fields(item) == [["bbox"]]
    assert not AuditEvent.objects.filter(action="project_settings").exists()


def test_thresholds_saved_in_the_admin_are_stored_clean_re_mark_the_items_and_are_audited(boxes):
    project, item, admin, client = boxes

    r = admin_save(client, project, {"auto_verify": False, "disagreement": {"box_iou": "0.4"}})

    assert r.status_code == 302
    assert Project.objects.get(pk=project.pk).settings == {"auto_verify": False, "disagreement": {"box_iou": 0.4}}
    assert marked_fields(item) == [[]]  # IoU 0.43 is no disagreement at 0.4
    event = AuditEvent.objects.get(action="project_settings")
    assert (event.actor, event.details) == (
        admin,
        {
            "disagreement": {"box_iou": {"before": 0.5, "after": 0.4}},
            "set": {"box_iou": 0.4},
            "items_remarked": 1,
            "items_marked": 0,
            "via": "admin",
        },
    )

    # Taken out again: the default applies, the item is marked again.
    assert admin_save(client, project, {"auto_verify": False}).status_code == 302
    assert marked_fields(item) == [["bbox"]]
    assert AuditEvent.objects.filter(action="project_settings").count() == 2
    # Saving other fields leaves the thresholds (and the audit trail) alone.
    assert admin_save(client, project, {"auto_verify": True}).status_code == 302
    assert AuditEvent.objects.filter(action="project_settings").count() == 2
    assert Item.objects.get(pk=item.pk).disagreement is not None


def test_settings_emptied_in_the_admin_are_the_defaults(boxes):
    project, item, _admin, client = boxes
    Project.objects.filter(pk=project.pk).update(settings={"disagreement": {"box_iou": 0.4}})
    Item.objects.filter(pk=item.pk).update(disagreement=None)  # as marked under 0.4

    assert admin_save(client, project, "").status_code == 302

    assert Project.objects.get(pk=project.pk).settings == {}
    assert marked_fields(item) == [["bbox"]]
