"""Projects and members made in the app (annotation/project_setup.py, annotation/members.py) and
their API: creating a project, adding / changing / removing members, the CSV, invite links."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from annotation.members import (
    InviteGone,
    MemberRefused,
    invite_accept,
    invite_create,
    member_add,
    member_remove,
    member_set_role,
    members_import_csv,
)
from annotation.models import AuditEvent, Membership, Project, ProjectInvite, Role
from annotation.project_setup import SetupInvalid, project_create

pytestmark = pytest.mark.django_db


def roles(project) -> dict[str, str]:
    return dict(Membership.objects.filter(project=project).values_list("user__username", "role"))


@pytest.fixture
def team(make_user, make_project):
    lead, ann, rev = make_user("lead"), make_user("ann"), make_user("rev")
    make_user("newbie")
    project = make_project("jars", "status", members={lead: Role.RESEARCHER, ann: Role.ANNOTATOR, rev: Role.REVIEWER})
    return project, lead


# --- creating a project -----------------------------------------------------------------------


def test_project_create_stores_the_settings_and_makes_the_creator_admin(make_user):
    lead = make_user("lead")
    project = project_create(
        user=lead,
        name=" Video study ",
        slug="videos",
        protocol="oscbench",
        gold_share="0.1",
        suggestions=False,
        lease_seconds="900",
        rubric="1 = bad, 5 = excellent",
    )
    assert (project.name, project.annotations_per_item) == ("Video study", 3)  # the protocol's default
    assert project.settings == {"gold_share": 0.1, "lease_seconds": 900, "rubric": "1 = bad, 5 = excellent"}
    assert roles(project) == {"lead": "admin"}
    event = AuditEvent.objects.get(action="project_create")
    assert (event.actor, event.project, event.details["settings"]["lease_seconds"]) == (lead, project, 900)
    qa = project_create(
        user=lead, name="QA", slug="qa", protocol="visualtrans", annotations_per_item=2, suggestions=False
    )
    assert (qa.annotations_per_item, qa.settings) == (2, {"lease_seconds": 600, "suggestions": False})


def test_project_create_refuses_each_bad_field_and_writes_nothing(make_user, make_project):
    lead = make_user("lead")
    make_project("taken")
    with pytest.raises(SetupInvalid) as caught:
        project_create(
            user=lead,
            name="",
            slug="Bad Slug",
            protocol="nope",
            annotations_per_item=0,
            gold_share=2,
            lease_seconds=5,
            rubric="x",
        )
    assert set(caught.value.errors) == {
        "name",
        "slug",
        "protocol",
        "annotations_per_item",
        "gold_share",
        "lease_seconds",
        "rubric",
    }
    for slug, message in (("taken", "exists already"), ("new", "reserved")):
        with pytest.raises(SetupInvalid, match=message):
            project_create(user=lead, name="x", slug=slug, protocol="status")
    with pytest.raises(SetupInvalid, match="video rating"):
        project_create(user=lead, name="x", slug="x", protocol="status", rubric="scores")
    assert list(Project.objects.values_list("slug", flat=True)) == ["taken"]
    assert not Membership.objects.exists() and not AuditEvent.objects.exists()


def test_who_may_create_projects_through_the_api(make_user, make_project):
    annotator, researcher, staff = make_user("a"), make_user("r"), make_user("s")
    staff.is_staff = True
    staff.save()
    make_project("p", members={annotator: Role.ANNOTATOR, researcher: Role.RESEARCHER})
    body = {"name": "New", "slug": "new-one", "protocol": "changeit", "gold_share": 0.2, "lease_seconds": 300}
    client = Client()
    client.force_login(annotator)
    refused = client.post("/api/projects/", body, content_type="application/json")
    assert refused.status_code == 403 and "researcher or admin role" in refused.json()["detail"]
    assert not Project.objects.filter(slug="new-one").exists()
    client.force_login(researcher)
    made = client.post("/api/projects/", body, content_type="application/json")
    assert made.status_code == 201 and made.json()["role"] == "admin"
    assert Project.objects.get(slug="new-one").settings == {"gold_share": 0.2, "lease_seconds": 300}
    assert client.post("/api/projects/", body, content_type="application/json").json()["errors"] == {
        "slug": "A project 'new-one' exists already."
    }
    client.force_login(staff)
    assert (
        client.post("/api/projects/", {**body, "slug": "staff-one"}, content_type="application/json").status_code == 201
    )
    # The page: annotators are not offered it and get a refusal saying what is needed.
    client.force_login(annotator)
    assert "new-project" not in client.get("/").content.decode()
    page = client.get("/projects/new/")
    assert page.status_code == 403 and "researcher or admin role" in page.content.decode()


# --- members ------------------------------------------------------------------------------------


def test_add_by_username_or_email_change_and_remove(team, make_user):
    project, lead = team
    membership, outcome = member_add(
        project=project, actor=lead, username_or_email="NEWBIE@example.org", role="reviewer"
    )
    assert (membership.user.username, outcome) == ("newbie", "added")
    assert member_add(project=project, actor=lead, username_or_email="newbie", role="reviewer")[1] == "unchanged"
    assert member_set_role(project=project, actor=lead, user_id=membership.user_id, role="annotator")[1] == "changed"
    member_remove(project=project, actor=lead, user_id=membership.user_id)
    assert roles(project) == {"lead": "researcher", "ann": "annotator", "rev": "reviewer"}
    assert list(AuditEvent.objects.order_by("pk").values_list("action", flat=True)) == [
        "member_add",
        "member_change",
        "member_remove",
    ]
    with pytest.raises(SetupInvalid, match="No account you can add is named"):
        member_add(project=project, actor=lead, username_or_email="ghost", role="annotator")
    with pytest.raises(SetupInvalid, match="One of"):
        member_add(project=project, actor=lead, username_or_email="newbie", role="boss")


def test_the_last_lead_stays_and_nobody_grants_above_their_role(team, make_user):
    project, lead = team
    before = roles(project)
    with pytest.raises(MemberRefused, match="last researcher or admin"):
        member_set_role(project=project, actor=lead, user_id=lead.pk, role="annotator")
    with pytest.raises(MemberRefused, match="last researcher or admin"):
        member_remove(project=project, actor=lead, user_id=lead.pk)
    with pytest.raises(MemberRefused, match="admin role"):
        member_add(project=project, actor=lead, username_or_email="newbie", role="admin")
    boss = make_user("boss")
    Membership.objects.create(project=project, user=boss, role=Role.ADMIN)
    with pytest.raises(MemberRefused, match="above your role"):
        member_remove(project=project, actor=lead, user_id=boss.pk)
    assert roles(project) == {**before, "boss": "admin"}
    assert not AuditEvent.objects.exists()
    # With a second lead, the first may step down.
    member_set_role(project=project, actor=boss, user_id=lead.pk, role="reviewer")
    assert roles(project)["lead"] == "reviewer"


def test_csv_reports_each_line(team, make_user):
    project, lead = team
    make_user("sam")
    data = (
        b"username_or_email,role\nnewbie,annotator\nann,reviewer\nrev,reviewer\nghost,annotator\n"
        b"sam@example.org,overlord\n\nsam,admin\n"
    )
    report = members_import_csv(project=project, actor=lead, data=data)
    assert [(r["line"], r["outcome"]) for r in report.lines] == [
        (2, "added"),
        (3, "changed"),
        (4, "unchanged"),
        (5, "unknown user"),
        (6, "bad role"),
        (8, "refused"),
    ]
    assert report.counts == {"added": 1, "changed": 1, "unchanged": 1, "unknown user": 1, "bad role": 1, "refused": 1}
    assert roles(project) == {"lead": "researcher", "ann": "reviewer", "rev": "reviewer", "newbie": "annotator"}


@pytest.mark.parametrize(
    "data, message",
    [
        (b"newbie,annotator\nann,reviewer,extra\n", "line 2: 3 columns"),
        (b"newbie,annotator\nNEWBIE,reviewer\n", "line 2: 'NEWBIE' is on line 1 already"),
        (b"\xff\xfenewbie,annotator\n", "Not UTF-8"),
        (b"username_or_email,role\n\n", "No lines"),
    ],
)
def test_a_malformed_csv_writes_nothing(team, data, message):
    project, lead = team
    before = roles(project)
    with pytest.raises(SetupInvalid, match=message):
        members_import_csv(project=project, actor=lead, data=data)
    assert roles(project) == before and not AuditEvent.objects.exists()


def test_members_api(team, make_user):
    project, lead = team
    client = Client()
    client.force_login(lead)
    assert [m["username"] for m in client.get("/api/projects/jars/members/").json()] == ["ann", "lead", "rev"]
    added = client.post(
        "/api/projects/jars/members/",
        {"username_or_email": "newbie", "role": "annotator"},
        content_type="application/json",
    )
    assert added.status_code == 201 and added.json()["outcome"] == "added"
    newbie = added.json()["member"]["user_id"]
    assert (
        client.patch(
            f"/api/projects/jars/members/{newbie}/", {"role": "reviewer"}, content_type="application/json"
        ).json()["role"]
        == "reviewer"
    )
    refused = client.delete(f"/api/projects/jars/members/{lead.pk}/")
    assert refused.status_code == 409 and "last researcher" in refused.json()["detail"]
    assert client.delete(f"/api/projects/jars/members/{newbie}/").status_code == 204
    upload = SimpleUploadedFile("m.csv", b"newbie,annotator\nghost,annotator\n", content_type="text/csv")
    report = client.post("/api/projects/jars/members/csv/", {"file": upload}).json()
    assert report["counts"] == {"added": 1, "unknown user": 1}
    bad = client.post(
        "/api/projects/jars/members/csv/", {"file": SimpleUploadedFile("m.csv", b"a,b,c\n", content_type="text/csv")}
    )
    assert bad.status_code == 400 and bad.json()["errors"]["file"].startswith("line 1: 3 columns")
    # An annotator sees neither the page nor its link; the refusal page names the role needed.
    client.force_login(Membership.objects.get(project=project, user__username="ann").user)
    assert client.get("/api/projects/jars/members/").status_code == 403
    page = client.get("/projects/jars/members/")
    assert page.status_code == 403 and "This needs the researcher role in project jars." in page.content.decode()
    assert "members-link" not in client.get("/projects/jars/").content.decode()


# --- invites ------------------------------------------------------------------------------------


def test_invite_joins_once_and_then_says_why_not(team, make_user):
    project, lead = team
    invite, token = invite_create(project=project, actor=lead, role="reviewer", hours=24)
    assert invite.token_sha256 == hashlib.sha256(token.encode()).hexdigest() and token not in str(invite.__dict__)
    newbie, other = make_user("joiner"), make_user("late")
    membership, outcome = invite_accept(token=token, user=newbie)
    assert (membership.role, outcome) == ("reviewer", "added")
    with pytest.raises(InviteGone, match="used already"):
        invite_accept(token=token, user=other)
    old, old_token = invite_create(project=project, actor=lead, role="annotator", hours=1)
    ProjectInvite.objects.filter(pk=old.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    with pytest.raises(InviteGone, match="expired"):
        invite_accept(token=old_token, user=other)
    with pytest.raises(InviteGone, match="not valid"):
        invite_accept(token="nonsense", user=other)
    with pytest.raises(MemberRefused):
        invite_create(project=project, actor=lead, role="admin", hours=24)
    assert "late" not in roles(project)


def test_invite_api_and_page(team, make_user):
    project, lead = team
    client = Client()
    client.force_login(lead)
    made = client.post(
        "/api/projects/jars/invites/", {"role": "annotator", "hours": 48}, content_type="application/json"
    )
    assert made.status_code == 201
    url = made.json()["url"]
    assert url.startswith("http://testserver/invites/")
    assert client.get("/api/projects/jars/invites/").json()[0]["state"] == "open"
    joiner = make_user("joiner")
    client.force_login(joiner)
    path = url.removeprefix("http://testserver")
    assert "Join as annotator" in client.get(path).content.decode()
    assert client.post(path).status_code == 302
    assert roles(project)["joiner"] == "annotator"
    gone = client.get(path)
    assert gone.status_code == 410 and "used already" in gone.content.decode()
    token = path.split("/")[2]
    client.force_login(make_user("third"))
    assert client.post(f"/api/invites/{token}/accept/").status_code == 410
