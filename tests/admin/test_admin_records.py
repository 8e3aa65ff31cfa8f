"""A project's records in the admin (annotation/admin.py, admin_site.ProjectRecordAdmin): invites,
the audit trail, tasks, revisions, suggestions, release items, studies, participants, excluded
annotations and predictions are read only for everyone, superusers included (no save, no delete,
by URL or by bulk action); invite digests and study tokens are never shown; open invites are
revoked through the same service as on the members page, audited, within the researcher's
projects and role."""

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.contrib import admin
from django.utils import timezone

from annotation.members import invite_create
from annotation.models import AuditEvent, ProjectInvite, Role, Study
from tests.helpers.admin import RECORDS

pytestmark = pytest.mark.django_db


@pytest.fixture
def w(make_user, make_project):
    res, boss, other, root = make_user("res"), make_user("boss"), make_user("other"), make_user("root", superuser=True)
    a = make_project("proj-a", "status", members={res: Role.RESEARCHER, boss: Role.ADMIN})
    b = make_project("proj-b", "status", members={other: Role.RESEARCHER})
    invite_a, _ = invite_create(project=a, actor=res, role="annotator", hours=24)
    admin_invite, _ = invite_create(project=a, actor=boss, role="admin", hours=24)
    invite_b, _ = invite_create(project=b, actor=other, role="annotator", hours=24)
    study = Study.objects.create(
        project=a,
        name="s",
        token="secret-study-token",
        max_participants=1,
        tasks_per_participant=1,
        completion_code="C",
    )
    return SimpleNamespace(
        res=res,
        boss=boss,
        other=other,
        root=root,
        a=a,
        invite_a=invite_a,
        admin_invite=admin_invite,
        invite_b=invite_b,
        study=study,
    )


def url(obj, page: str = "change") -> str:
    return f"/admin/{obj._meta.app_label}/{obj._meta.model_name}/{obj.pk}/{page}/"


def snapshot() -> list:
    return [
        list(model.objects.order_by("pk").values())
        for model in admin.site._registry
        if model._meta.label_lower in RECORDS
    ]


def test_the_records_are_read_only_for_everyone(client, w):
    event = AuditEvent.objects.filter(project=w.a).first()
    for user in (w.res, w.root):
        client.force_login(user)
        for obj in (w.invite_a, w.study, event):
            page = client.get(url(obj))
            assert page.status_code == 200 and 'name="_save"' not in page.content.decode(), (user, obj)
            before = snapshot()
            assert client.post(url(obj), {"role": "admin", "name": "x", "action": "freeze"}).status_code == 403
            assert client.get(url(obj, "delete")).status_code == 403
            assert client.post(url(obj, "delete"), {"post": "yes"}).status_code == 403
            listing = f"/admin/{obj._meta.app_label}/{obj._meta.model_name}/"
            client.post(listing, {"action": "delete_selected", "_selected_action": [obj.pk], "post": "yes"})
            assert "delete_selected" not in client.get(listing).content.decode()
            assert snapshot() == before, (user, obj)


def test_no_invite_digest_nor_study_token_is_shown(client, w):
    for user in (w.res, w.root):
        client.force_login(user)
        pages = [
            client.get(p).content.decode()
            for p in ("/admin/annotation/projectinvite/", url(w.invite_a), "/admin/annotation/study/", url(w.study))
        ]
        assert "Token sha256" not in pages[1] and "open" in pages[1]
        for html in pages:
            assert w.invite_a.token_sha256 not in html and w.study.token not in html


def revoke(client, *invites):
    return client.post(
        "/admin/annotation/projectinvite/",
        {"action": "revoke", "_selected_action": [i.pk for i in invites], "index": 0},
        follow=True,
    )


def test_a_researcher_revokes_their_projects_open_invites_through_the_service(client, w):
    client.force_login(w.res)
    html = revoke(client, w.invite_a, w.admin_invite, w.invite_b).content.decode()
    assert "Revoked 1 invite link(s)." in html and "for the admin role, above yours" in html
    revoked = dict(ProjectInvite.objects.values_list("pk", "revoked_by"))
    assert revoked == {w.invite_a.pk: w.res.pk, w.admin_invite.pk: None, w.invite_b.pk: None}  # B's: not in the list
    event = AuditEvent.objects.get(action="invite_revoke")
    assert (event.actor, event.project, event.object_id) == (w.res, w.a, str(w.invite_a.pk))
    # The project's admin revokes the admin link; a link revoked already is reported, not revoked twice.
    client.force_login(w.boss)
    html = revoke(client, w.admin_invite, w.invite_a).content.decode()
    assert "Revoked 1 invite link(s)." in html and "is revoked already" in html
    assert ProjectInvite.objects.get(pk=w.admin_invite.pk).revoked_by == w.boss
    assert AuditEvent.objects.filter(action="invite_revoke").count() == 2


def test_a_superuser_revokes_any_projects_invite(client, w):
    ProjectInvite.objects.filter(pk=w.invite_a.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    client.force_login(w.root)
    html = revoke(client, w.invite_a, w.invite_b).content.decode()
    assert "Revoked 1 invite link(s)." in html and "is expired already" in html
    assert ProjectInvite.objects.get(pk=w.invite_b.pk).revoked_by == w.root
    assert ProjectInvite.objects.get(pk=w.invite_a.pk).revoked_at is None
