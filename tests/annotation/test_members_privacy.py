"""The members API names accounts by username only (annotation/apis/members.py): it takes no
e-mail, returns none, and answers an unknown name and a crowd account of another project's study
(annotation/members.py) with the same status and the same body."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from annotation.models import Membership, Role
from annotation.studies.setup import study_create
from tests.helpers.studies import UNGATED_STUDY, open_study_link, participant_user

pytestmark = pytest.mark.django_db
MEMBERS = "/api/projects/jars/members/"


@pytest.fixture
def lead_client(make_user, make_project):
    lead = make_user("lead")
    make_user("newbie")
    project = make_project("jars", "status", members={lead: Role.RESEARCHER})
    client = Client()
    client.force_login(lead)
    return project, client


def add(client: Client, **body):
    return client.post(MEMBERS, body, content_type="application/json")


def test_no_members_api_response_carries_an_e_mail(lead_client):
    _project, client = lead_client
    added = add(client, username="newbie", role=Role.ANNOTATOR)
    assert added.status_code == 201 and added.json()["member"]["username"] == "newbie"
    user_id = added.json()["member"]["user_id"]
    responses = [
        added,
        client.get(MEMBERS),
        client.patch(f"{MEMBERS}{user_id}/", {"role": Role.REVIEWER}, content_type="application/json"),
        client.post(f"{MEMBERS}csv/", {"file": SimpleUploadedFile("m.csv", b"username,role\nnewbie,annotator\n")}),
    ]
    for response in responses:
        assert response.status_code in (200, 201)
        text = json.dumps(response.json())
        assert "example.org" not in text and "email" not in text, text


def test_the_api_takes_no_e_mail(lead_client):
    project, client = lead_client
    by_mail = add(client, username="newbie@example.org", role=Role.ANNOTATOR)
    by_mail_old_field = add(client, username_or_email="newbie@example.org", role=Role.ANNOTATOR)
    assert by_mail.status_code == by_mail_old_field.status_code == 400
    assert by_mail.json() == by_mail_old_field.json()
    assert by_mail.json()["errors"] == {"username": "No account you can add is named 'newbie@example.org'."}
    upload = SimpleUploadedFile("m.csv", b"newbie@example.org,annotator\n")
    report = client.post(f"{MEMBERS}csv/", {"file": upload}).json()
    assert [line["outcome"] for line in report["lines"]] == ["unknown user"]
    assert not Membership.objects.filter(project=project, user__username="newbie").exists()


def test_unknown_and_another_studys_crowd_account_get_identical_answers(lead_client, make_user, make_project):
    project, client = lead_client
    other_lead = make_user("other-lead")
    other = make_project("other", "visualtrans", members={other_lead: Role.RESEARCHER}, annotations_per_item=1)
    study = study_create(project=other, actor=other_lead, **{**UNGATED_STUDY, "name": "other study"})
    open_study_link(study, "X")
    crowd = participant_user("X")
    # A made-up name of the same length, so that even the body's length tells nothing.
    ghost = "z" * len(crowd.username)

    hidden, unknown = (
        add(client, username=crowd.username, role=Role.ANNOTATOR),
        add(client, username=ghost, role=Role.ANNOTATOR),
    )

    assert hidden.status_code == unknown.status_code == 400
    assert hidden.content.replace(crowd.username.encode(), b"NAME") == unknown.content.replace(ghost.encode(), b"NAME")
    csv = f"{crowd.username},annotator\n{ghost},annotator\n".encode()
    lines = client.post(f"{MEMBERS}csv/", {"file": SimpleUploadedFile("m.csv", csv)}).json()["lines"]
    assert [line["outcome"] for line in lines] == ["unknown user", "unknown user"]
    assert lines[0]["message"].replace(crowd.username, "NAME") == lines[1]["message"].replace(ghost, "NAME")
    assert not Membership.objects.filter(project=project, user=crowd).exists()
