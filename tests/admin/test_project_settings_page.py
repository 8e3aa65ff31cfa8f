"""A project's admin edits every setting of the project on its Settings page (annotation/project_edit.py,
annotation/views/project_settings.py): name, description, annotations per item and each workflow
setting the project's protocol reads, all or nothing, audited. Its researchers see them read only
and are refused a save (403); reviewers do not open the page."""

import pytest
from django.test import Client

from annotation.models import AuditAction, AuditEvent, Project, Role

pytestmark = pytest.mark.django_db

KEYS_OF = {
    "status": ("gold_share", "lease_seconds", "auto_verify", "suggestions", "license", "citation"),
    "oscbench": ("gold_share", "lease_seconds", "auto_verify", "rubric", "license", "citation"),
    "changeit": ("gold_share", "lease_seconds", "auto_verify", "state_labels", "license", "citation"),
    "m3verse": ("gold_share", "lease_seconds", "auto_verify", "suggestions", "multiple", "license", "citation"),
}
ALL_KEYS = ("gold_share", "lease_seconds", "auto_verify", "suggestions", "multiple", "rubric", "state_labels")


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def people(make_user):
    return {who: make_user(who) for who in ("lead", "res", "rev", "outsider")}


def make(make_project, people, protocol="status", **fields):
    return make_project(
        f"p-{protocol}",
        protocol,
        members={people["lead"]: Role.ADMIN, people["res"]: Role.RESEARCHER, people["rev"]: Role.REVIEWER},
        annotations_per_item=fields.pop("annotations_per_item", 2),
        settings=fields.pop("settings", {"disagreement": {"quintuplet_fields": ["change"]}}),
        description="Old words.",
        **fields,
    )


def url(project) -> str:
    return f"/projects/{project.slug}/settings/"


@pytest.mark.parametrize("protocol", sorted(KEYS_OF))
def test_the_page_offers_each_setting_the_protocol_reads(make_project, people, protocol):
    project = make(make_project, people, protocol, settings={})
    html = signed_in(people["lead"]).get(url(project)).content.decode()
    for key in ALL_KEYS:
        assert (f'name="{key}"' in html) == (key in KEYS_OF[protocol]), key
    for field in ("name", "description", "annotations_per_item", "license", "citation"):
        assert f'name="{field}"' in html
    assert 'id="project-save"' in html and "project-read-only" not in html


def test_the_admin_saves_every_setting_at_once_and_it_is_audited(make_project, people):
    project = make(make_project, people)
    client = signed_in(people["lead"])
    given = {
        "form": "project",
        "name": "Lemons, second round",
        "description": "Label the lemon's state.",
        "annotations_per_item": "3",
        "gold_share": "0.2",
        "lease_seconds": "900",
        "auto_verify": "on",
        # suggestions unticked: off
        "license": "cc-by-4.0",
        "citation": "@article{lemons}",
    }
    response = client.post(url(project), given)
    assert (response.status_code, response["Location"]) == (302, url(project))
    project.refresh_from_db()
    assert (project.name, project.description, project.annotations_per_item) == (
        "Lemons, second round",
        "Label the lemon's state.",
        3,
    )
    assert project.settings == {
        "disagreement": {"quintuplet_fields": ["change"]},  # the thresholds' form's, kept
        "gold_share": 0.2,
        "lease_seconds": 900,
        "auto_verify": True,
        "suggestions": False,
        "license": "cc-by-4.0",
        "citation": "@article{lemons}",
    }
    event = AuditEvent.objects.get(action=AuditAction.PROJECT_SETTINGS)
    assert (event.actor, event.project) == (people["lead"], project)
    assert event.details == {
        "via": "settings page",
        "changes": {
            "name": {"before": "p-status", "after": "Lemons, second round"},
            "description": {"before": "Old words.", "after": "Label the lemon's state."},
            "annotations_per_item": {"before": 2, "after": 3},
            "settings.gold_share": {"before": None, "after": 0.2},
            "settings.lease_seconds": {"before": None, "after": 900},
            "settings.auto_verify": {"before": None, "after": True},
            "settings.suggestions": {"before": None, "after": False},
            "settings.license": {"before": None, "after": "cc-by-4.0"},
            "settings.citation": {"before": None, "after": "@article{lemons}"},
        },
    }
    page = client.get(url(project)).content.decode()
    assert "Saved: name, description, annotations per item, gold share, lease seconds" in page
    assert 'name="lease_seconds" id="id_lease_seconds"' in page and 'value="900"' in page

    # The same values again: nothing changes, nothing is recorded; an emptied text goes back to its default.
    client.post(url(project), given)
    assert AuditEvent.objects.filter(action=AuditAction.PROJECT_SETTINGS).count() == 1
    client.post(url(project), {**given, "license": ""})
    project.refresh_from_db()
    assert "license" not in project.settings


def test_rubric_state_labels_and_multiple_as_their_protocols_read_them(make_project, people):
    lead = signed_in(people["lead"])
    osc = make(make_project, people, "oscbench", settings={})
    base = {"form": "project", "name": "o", "description": "", "annotations_per_item": "3", "lease_seconds": "600"}
    lead.post(url(osc), {**base, "gold_share": "0", "rubric": "5: every detail right; 1: nothing right."})
    osc.refresh_from_db()
    assert osc.settings["rubric"] == "5: every detail right; 1: nothing right."
    lead.post(url(osc), {**base, "gold_share": "0", "rubric": '{"realism": "Looks real?"}'})
    osc.refresh_from_db()
    assert osc.settings["rubric"] == {"realism": "Looks real?"}
    # The stored object is shown as JSON to edit again.
    assert "&quot;realism&quot;: &quot;Looks real?&quot;" in lead.get(url(osc)).content.decode()

    boxes = make(make_project, people, "changeit", settings={})
    lead.post(url(boxes), {**base, "annotations_per_item": "2", "state_labels": '{"apple": ["sliced apple"]}'})
    boxes.refresh_from_db()
    assert boxes.settings["state_labels"] == {"apple": ["sliced apple"]}

    qa = make(make_project, people, "m3verse", settings={})
    assert '<option value="" selected>as the protocol decides</option>' in lead.get(url(qa)).content.decode()
    lead.post(url(qa), {**base, "annotations_per_item": "2", "suggestions": "on", "multiple": "false"})
    qa.refresh_from_db()
    assert qa.settings == {"multiple": False}  # the defaults given (suggestions on, the lease) stay unstated
    assert '<option value="false" selected>no: one option</option>' in lead.get(url(qa)).content.decode()
    lead.post(url(qa), {**base, "annotations_per_item": "2", "multiple": ""})
    qa.refresh_from_db()
    assert qa.settings == {"suggestions": False}  # back to the protocol's default; suggestions unticked


def test_a_bad_value_refuses_the_whole_change(make_project, people):
    project = make(make_project, people)
    before = Project.objects.values().get(pk=project.pk)
    response = signed_in(people["lead"]).post(
        url(project),
        {
            "form": "project",
            "name": "Renamed",
            "description": "",
            "annotations_per_item": "1",
            "gold_share": "2",
            "lease_seconds": "10",
            "license": "two\nlines",
        },
    )
    assert response.status_code == 400
    errors = response.context["project_errors"]
    assert errors == {
        "annotations_per_item": "It can be raised, not lowered (now 2): items that already hold as many annotations "
        "as the lower number would wait for more forever.",
        "gold_share": "A share from 0 to 1 (e.g. 0.1 for one claim in ten).",
        "lease_seconds": "A whole number from 60 to 86400.",
        "license": "One line.",
    }
    html = response.content.decode()
    assert '<li data-field="gold_share">gold_share: A share from 0 to 1' in html
    assert 'value="Renamed"' in html  # what was typed is kept on the page
    assert Project.objects.values().get(pk=project.pk) == before
    assert not AuditEvent.objects.filter(action=AuditAction.PROJECT_SETTINGS).exists()

    bad_json = signed_in(people["lead"]).post(
        url(make(make_project, people, "changeit", settings={})),
        {"form": "project", "name": "c", "description": "", "annotations_per_item": "2", "lease_seconds": "600",
         "state_labels": "{apple"},
    )  # fmt: skip
    assert bad_json.status_code == 400
    assert bad_json.context["project_errors"]["state_labels"].startswith("Not valid JSON")


def test_researchers_see_the_settings_read_only_and_may_not_save_them(make_project, people):
    project = make(make_project, people)
    researcher = signed_in(people["res"])
    html = researcher.get(url(project)).content.decode()
    assert 'id="project-read-only"' in html and "<fieldset disabled>" in html and 'id="project-save"' not in html
    before = Project.objects.values().get(pk=project.pk)
    response = researcher.post(
        url(project),
        {"form": "project", "name": "Mine now", "description": "", "annotations_per_item": "2", "lease_seconds": "60"},
    )
    assert response.status_code == 403
    assert Project.objects.values().get(pk=project.pk) == before
    # Their thresholds form still works.
    response = researcher.post(url(project), {"form": "thresholds", "quintuplet_fields": ["category", "change"]})
    assert response.status_code == 302
    project.refresh_from_db()
    assert project.settings == {"disagreement": {"quintuplet_fields": ["change", "category"]}}


def test_reviewers_and_outsiders_do_not_open_the_page(make_project, people):
    project = make(make_project, people)
    assert signed_in(people["rev"]).get(url(project)).status_code == 403
    assert signed_in(people["rev"]).post(url(project), {"form": "project", "name": "x"}).status_code == 403
    assert signed_in(people["outsider"]).post(url(project), {"form": "project", "name": "x"}).status_code == 404
    assert Project.objects.get(pk=project.pk).name == "p-status"
