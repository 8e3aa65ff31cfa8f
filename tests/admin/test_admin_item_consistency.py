"""The item admin cannot change an item's status or count (the queue and the review services do),
and an annotation deleted in the admin keeps its item's count and status consistent: superusers
only, one at a time, and only while the item waits for annotations or review."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from annotation.models import Annotation, AuditEvent, Item, ItemStatus, Role
from annotation.queue import annotation_submit, queue_claim_next
from annotation.services import review_decide
from tests.annotation.work_factories import make_item
from tests.helpers.admin import admin_form_data, admin_url
from tests.helpers.clients import logged_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def w(make_user, make_project):
    res, a1, a2, rev = make_user("res"), make_user("a1"), make_user("a2"), make_user("rev")
    root, staff = make_user("root", superuser=True), make_user("staff")
    staff.is_staff = True
    staff.save()
    from django.contrib.auth.models import Permission

    staff.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_annotation", "delete_annotation", "change_annotation"])
    )
    lab = make_project(
        "lab",
        "visualtrans",
        annotations_per_item=2,
        members={res: Role.RESEARCHER, a1: Role.ANNOTATOR, a2: Role.ANNOTATOR, rev: Role.REVIEWER},
    )
    item = make_item(lab, "tool")
    return SimpleNamespace(res=res, a1=a1, a2=a2, rev=rev, root=root, staff=staff, lab=lab, item=item)


def annotate(w, user) -> Annotation:
    task = queue_claim_next(project=w.lab, user=user)
    return annotation_submit(task_id=task.pk, user=user, result={"answer": "A", "flags": []}).annotation


def test_the_item_admin_shows_status_count_and_content_read_only_and_ignores_them_when_posted(w):
    client = logged_in(w.res)
    form = client.get(admin_url(w.item)).context["adminform"].form
    assert not {"status", "annotation_count", "payload", "media", "split", "tags"} & set(form.fields)

    r = client.post(
        admin_url(w.item),
        {**admin_form_data(client, w.item), "status": "verified", "annotation_count": "2", "split": "dev"},
    )

    assert r.status_code == 302
    item = Item.objects.get(pk=w.item.pk)
    assert (item.status, item.annotation_count, item.split) == (ItemStatus.PENDING, 0, "test")
    assert not AuditEvent.objects.exists()


def test_a_superuser_deleting_an_annotation_of_an_annotated_item_sends_it_back_to_the_queue(w):
    first, second = annotate(w, w.a1), annotate(w, w.a2)
    item = Item.objects.get(pk=w.item.pk)
    assert (item.status, item.annotation_count) == (ItemStatus.ANNOTATED, 2)
    client = logged_in(w.root)

    assert client.post(admin_url(second, "delete"), {"post": "yes"}).status_code == 302

    item = Item.objects.get(pk=w.item.pk)
    assert (item.status, item.annotation_count, item.disagreement) == (ItemStatus.PENDING, 1, None)
    assert list(Annotation.objects.values_list("pk", flat=True)) == [first.pk]
    event = AuditEvent.objects.get(action="admin_delete")
    assert (event.actor, event.project, event.object_id) == (w.root, w.lab, str(second.pk))


def test_an_annotation_of_a_reviewed_item_is_not_deleted_in_the_admin(w):
    first, _second = annotate(w, w.a1), annotate(w, w.a2)
    review_decide(item_id=w.item.pk, reviewer=w.rev, decision="accept", annotation_id=first.pk)
    AuditEvent.objects.all().delete()
    client = logged_in(w.root)

    assert client.post(admin_url(first, "delete"), {"post": "yes"}).status_code == 403

    item = Item.objects.get(pk=w.item.pk)
    assert (item.status, item.annotation_count) == (ItemStatus.VERIFIED, 2)
    assert Annotation.objects.count() == 2 and not AuditEvent.objects.exists()


def test_staff_with_delete_permission_and_bulk_delete_cannot_remove_annotations(w):
    first = annotate(w, w.a1)

    assert logged_in(w.staff).post(admin_url(first, "delete"), {"post": "yes"}).status_code == 403
    r = logged_in(w.root).post(
        "/admin/annotation/annotation/", {"action": "delete_selected", "_selected_action": [first.pk], "post": "yes"}
    )

    assert r.status_code in (200, 302)
    assert Annotation.objects.filter(pk=first.pk).exists()
    assert Item.objects.get(pk=w.item.pk).annotation_count == 1


def test_the_annotation_form_keeps_whose_answer_to_which_item_it_is(w):
    first = annotate(w, w.a1)
    other = make_item(w.lab, "other")
    client = logged_in(w.root)
    data = admin_form_data(client, first)
    assert "item" not in data and "annotator" not in data

    r = client.post(admin_url(first), {**data, "item": other.pk, "annotator": w.a2.pk})

    assert r.status_code == 302
    assert Annotation.objects.filter(pk=first.pk, item=w.item, annotator=w.a1).exists()
