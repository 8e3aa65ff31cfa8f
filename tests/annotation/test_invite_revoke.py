"""Revoking invite links (annotation/members.py invite_revoke; the members page and API): the
project's researchers and admins list the links (never a token or its digest) and revoke an open
one; the link then answers 410 like a used or expired one; each revocation is in the audit trail;
a revocation the rules refuse changes nothing."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from annotation.members import InviteGone, MemberRefused, invite_accept, invite_create, invite_revoke, invites_of
from annotation.models import AuditEvent, Membership, ProjectInvite, Role

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(make_user, make_project):
    lead, boss, ann = make_user("lead"), make_user("boss"), make_user("ann")
    make_user("joiner")
    project = make_project("jars", "status", members={lead: Role.RESEARCHER, boss: Role.ADMIN, ann: Role.ANNOTATOR})
    return project, lead, boss, ann


def invite_rows() -> list[tuple]:
    return list(ProjectInvite.objects.order_by("pk").values_list("pk", "used_at", "revoked_at", "revoked_by"))


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_revoked_link_is_gone_and_the_revocation_is_audited(team, make_user):
    project, lead, _boss, _ann = team
    invite, token = invite_create(project=project, actor=lead, role="reviewer", hours=24)
    revoked = invite_revoke(project=project, actor=lead, invite_id=invite.pk)
    assert (revoked.revoked_by, revoked.revoked_at is not None) == (lead, True)
    event = AuditEvent.objects.get(action="invite_revoke")
    assert (event.actor, event.project, event.object_type, event.object_id) == (
        lead,
        project,
        "annotation.projectinvite",
        str(invite.pk),
    )
    assert event.details == {"role": "reviewer", "created_by": "lead", "expires_at": invite.expires_at.isoformat()}
    with pytest.raises(InviteGone, match="was revoked on"):
        invite_accept(token=token, user=make_user("late"))
    assert "late" not in set(Membership.objects.filter(project=project).values_list("user__username", flat=True))
    assert [row["state"] for row in invites_of(project=project)] == ["revoked"]


def test_refused_revocations_change_nothing(team, make_user, make_project):
    project, lead, boss, _ann = team
    used, used_token = invite_create(project=project, actor=lead, role="annotator", hours=24)
    invite_accept(token=used_token, user=make_user("first"))
    expired, _ = invite_create(project=project, actor=lead, role="annotator", hours=1)
    ProjectInvite.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    for_admins, _ = invite_create(project=project, actor=boss, role="admin", hours=24)
    done, _ = invite_create(project=project, actor=lead, role="annotator", hours=24)
    invite_revoke(project=project, actor=lead, invite_id=done.pk)
    elsewhere = make_project("other", "status", members={lead: Role.RESEARCHER})
    theirs, _ = invite_create(project=elsewhere, actor=lead, role="annotator", hours=24)
    rows, events = invite_rows(), AuditEvent.objects.count()

    for invite, message in (
        (used, "is used already"),
        (expired, "is expired already"),
        (done, "is revoked already"),
        (for_admins, "for the admin role, above yours"),
    ):
        with pytest.raises(MemberRefused, match=message):
            invite_revoke(project=project, actor=lead, invite_id=invite.pk)
    with pytest.raises(ProjectInvite.DoesNotExist):
        invite_revoke(project=project, actor=lead, invite_id=theirs.pk)  # another project's link
    assert (invite_rows(), AuditEvent.objects.count()) == (rows, events)
    # The admin may revoke the admin link.
    assert invite_revoke(project=project, actor=boss, invite_id=for_admins.pk).revoked_by == boss


def test_invites_of_filters_by_state(team, make_user):
    project, lead, _boss, _ann = team
    made = {}
    for name in ("open", "used", "revoked", "expired"):
        made[name], token = invite_create(project=project, actor=lead, role="annotator", hours=24)
        if name == "used":
            invite_accept(token=token, user=make_user("first"))
        elif name == "revoked":
            invite_revoke(project=project, actor=lead, invite_id=made[name].pk)
        elif name == "expired":
            ProjectInvite.objects.filter(pk=made[name].pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    for name, invite in made.items():
        assert [(row["id"], row["state"]) for row in invites_of(project=project, state=name)] == [(invite.pk, name)]
    assert len(invites_of(project=project)) == 4


def test_the_api_lists_without_tokens_and_revokes(team, make_user):
    project, lead, _boss, ann = team
    client = client_of(lead)
    made = client.post(
        "/api/projects/jars/invites/", {"role": "annotator", "hours": 48}, content_type="application/json"
    )
    token = made.json()["url"].rstrip("/").rsplit("/", 1)[1]
    invite = ProjectInvite.objects.get()
    listed = client.get("/api/projects/jars/invites/?state=open")
    assert listed.status_code == 200
    row = listed.json()[0]
    assert set(row) == {
        "id",
        "role",
        "state",
        "expires_at",
        "created_by",
        "created_at",
        "used_by",
        "used_at",
        "revoked_by",
        "revoked_at",
    }
    assert (row["id"], row["role"], row["state"], row["created_by"], row["used_by"], row["revoked_at"]) == (
        invite.pk,
        "annotator",
        "open",
        "lead",
        "",
        None,
    )
    assert token not in listed.content.decode() and invite.token_sha256 not in listed.content.decode()
    bad = client.get("/api/projects/jars/invites/?state=gone")
    assert bad.status_code == 400 and set(bad.json()["errors"]) == {"state"}

    # An annotator may not; the researcher may, once.
    assert client_of(ann).post(f"/api/projects/jars/invites/{invite.pk}/revoke/").status_code == 403
    assert ProjectInvite.objects.get().revoked_at is None
    revoked = client.post(f"/api/projects/jars/invites/{invite.pk}/revoke/")
    assert revoked.status_code == 200
    assert (revoked.json()["state"], revoked.json()["revoked_by"]) == ("revoked", "lead")
    again = client.post(f"/api/projects/jars/invites/{invite.pk}/revoke/")
    assert again.status_code == 409 and "revoked already" in again.json()["detail"]
    assert client.post("/api/projects/jars/invites/999999/revoke/").status_code == 404
    assert client.get("/api/projects/jars/invites/?state=open").json() == []
    assert AuditEvent.objects.filter(action="invite_revoke").count() == 1

    # The link: 410 on the page and through the API.
    joiner = client_of(make_user("someone"))
    page = joiner.get(f"/invites/{token}/")
    assert page.status_code == 410 and "revoked" in page.content.decode()
    accepted = joiner.post(f"/api/invites/{token}/accept/")
    assert accepted.status_code == 410 and "revoked" in accepted.json()["detail"]
    assert not Membership.objects.filter(user__username="someone").exists()


def test_the_members_page_lists_and_revokes(team):
    project, lead, _boss, _ann = team
    open_one, _ = invite_create(project=project, actor=lead, role="annotator", hours=24)
    other, _ = invite_create(project=project, actor=lead, role="reviewer", hours=24)
    invite_revoke(project=project, actor=lead, invite_id=other.pk)
    client = client_of(lead)
    html = client.get("/projects/jars/members/").content.decode()
    assert re.findall(r'data-revoke="(\d+)"', html) == [str(open_one.pk)]  # only the open link offers it
    assert open_one.token_sha256 not in html and other.token_sha256 not in html
    assert f'<tr data-invite="{other.pk}" data-state="revoked">' in html

    refused = client.post("/projects/jars/members/", {"action": "revoke", "invite_id": "x"})
    assert refused.status_code == 400 and 'data-field="invite_id"' in refused.content.decode()
    assert client.post("/projects/jars/members/", {"action": "revoke", "invite_id": "999999"}).status_code == 404
    conflict = client.post("/projects/jars/members/", {"action": "revoke", "invite_id": str(other.pk)})
    assert conflict.status_code == 409 and "revoked already" in conflict.content.decode()
    assert ProjectInvite.objects.get(pk=open_one.pk).revoked_at is None

    done = client.post("/projects/jars/members/", {"action": "revoke", "invite_id": str(open_one.pk)})
    assert (done.status_code, done["Location"]) == (302, "/projects/jars/members/")
    assert ProjectInvite.objects.get(pk=open_one.pk).revoked_by == lead
    assert "data-revoke=" not in client.get("/projects/jars/members/").content.decode()
