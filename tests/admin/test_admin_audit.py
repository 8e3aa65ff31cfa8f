"""Changes made in the Django admin to what annotators, reviewers and releases see are in the audit
trail (admin_site.AuditedAdmin): an item's payload by the top-level keys a save changed, and who
saved it; projects, annotations, reviews and media files likewise; deletes with the row as it was. A
refused save and a save that changes nothing record nothing."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from django.contrib import admin
from django.test import RequestFactory

from annotation.admin_site import AuditedAdmin
from annotation.models import AuditEvent, Item, MediaAsset, Project, Role
from annotation.queue import annotation_submit, queue_claim_next
from annotation.services import review_decide
from tests.annotation.work_factories import make_item, visualtrans_payload
from tests.helpers.admin import admin_form_data, admin_save, admin_url
from tests.helpers.clients import logged_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def w(make_user, make_project):
    res, ann, rev, root = make_user("res"), make_user("ann"), make_user("rev"), make_user("root", superuser=True)
    lab = make_project(
        "lab",
        "visualtrans",
        settings={"gold_share": 0.1},
        members={res: Role.RESEARCHER, ann: Role.ANNOTATOR, rev: Role.REVIEWER},
    )
    item = make_item(lab, "tool")
    return SimpleNamespace(res=res, ann=ann, rev=rev, root=root, lab=lab, item=item)


def test_a_researchers_item_save_keeps_the_content_and_records_the_gold_flag(w):
    # An item's content (payload, media, split, tags, id) is read only in the admin: it changes only
    # through the audited services. What stays editable, the gold flag, is recorded.
    client = logged_in(w.res)
    data = admin_form_data(client, w.item)
    payload = {**visualtrans_payload(), "answer": "B", "note": "checked by hand"}

    r = client.post(admin_url(w.item), {**data, "payload": json.dumps(payload), "split": "dev", "is_gold": "on"})

    assert r.status_code == 302
    item = Item.objects.get(pk=w.item.pk)
    assert (item.payload, item.split, item.is_gold) == (visualtrans_payload(), "test", True)
    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.actor_name, event.project, event.object_type, event.object_id) == (
        "admin_change",
        w.res,
        "res",
        w.lab,
        "annotation.item",
        str(w.item.pk),
    )
    assert event.details == {"changes": {"is_gold": {"before": False, "after": True}}}

    # Saved again as it is: nothing changed, nothing recorded.
    assert client.post(admin_url(w.item), admin_form_data(client, item)).status_code == 302
    assert AuditEvent.objects.count() == 1


def test_content_posted_to_the_item_form_is_ignored_and_records_nothing(w):
    client = logged_in(w.res)
    data = admin_form_data(client, w.item)
    assert "payload" not in data and "media" not in data

    r = client.post(admin_url(w.item), {**data, "payload": "{'answer': 'B'}", "media": "{}", "split": "dev"})

    assert r.status_code == 302
    item = Item.objects.get(pk=w.item.pk)
    assert (item.payload, item.media, item.split) == (visualtrans_payload(), w.item.media, "test")
    assert not AuditEvent.objects.exists()


def test_items_deleted_in_the_admin_are_recorded_as_they_were(w):
    other = make_item(w.lab, "other")
    client = logged_in(w.res)

    assert client.post(admin_url(w.item, "delete"), {"post": "yes"}).status_code == 302
    client.post("/admin/annotation/item/", {"action": "delete_selected", "_selected_action": [other.pk], "post": "yes"})

    assert not Item.objects.filter(pk__in=[w.item.pk, other.pk]).exists()
    events = list(AuditEvent.objects.order_by("pk"))
    assert [(e.action, e.actor, e.project, e.object_id) for e in events] == [
        ("admin_delete", w.res, w.lab, str(w.item.pk)),
        ("admin_delete", w.res, w.lab, str(other.pk)),
    ]
    assert [(e.details["deleted"]["external_id"], e.details["deleted"]["payload"]) for e in events] == [
        ("tool", visualtrans_payload()),
        ("other", visualtrans_payload()),
    ]


def test_project_edits_in_the_admin_are_recorded(w):
    client = logged_in(w.root)
    project = Project.objects.get(pk=w.lab.pk)
    project.name, project.description = "Tools", "Which tool changed the state?"

    assert admin_save(client, project, {"gold_share": 0.2, "suggestions": False}).status_code == 302

    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.project, event.object_type) == (
        "admin_change",
        w.root,
        w.lab,
        "annotation.project",
    )
    assert event.details == {
        "changes": {
            "description": {"before": "", "after": "Which tool changed the state?"},
            "name": {"before": "lab", "after": "Tools"},
            "settings": {"gold_share": {"before": 0.1, "after": 0.2}, "suggestions": {"after": False}},
        }
    }


def test_annotation_review_and_media_edits_in_the_admin_are_recorded(w):
    task = queue_claim_next(project=w.lab, user=w.ann)
    annotation = annotation_submit(task_id=task.pk, user=w.ann, result={"answer": "A", "flags": []}).annotation
    review = review_decide(item_id=w.item.pk, reviewer=w.rev, decision="accept", annotation_id=annotation.pk)
    asset = MediaAsset.objects.get(sha256=w.item.media["images"][0])
    AuditEvent.objects.all().delete()  # the review's own event
    client = logged_in(w.root)

    for obj, change in (
        (annotation, {"result": json.dumps({"answer": "B", "flags": []})}),
        (review, {"comment": "answer B is right"}),
    ):
        assert client.post(admin_url(obj), {**admin_form_data(client, obj), **change}).status_code == 302, obj
    # Stored media are viewed only: a file or size set here would bypass the import's checks.
    assert client.get(admin_url(asset)).status_code == 200
    assert client.post(admin_url(asset), {"width": "320"}).status_code == 403
    asset.refresh_from_db()
    assert asset.width == 640

    events = list(AuditEvent.objects.order_by("pk"))
    assert [(e.action, e.actor, e.project, e.object_type, e.object_id, e.details) for e in events] == [
        (
            "admin_change",
            w.root,
            w.lab,
            "annotation.annotation",
            str(annotation.pk),
            {"changes": {"result": {"answer": {"before": "A", "after": "B"}}}},
        ),
        (
            "admin_change",
            w.root,
            w.lab,
            "annotation.review",
            str(review.pk),
            {"changes": {"comment": {"before": "", "after": "answer B is right"}}},
        ),
    ]


# Admins that change or delete rows but are not audited, and why.
NOT_AUDITED = {
    # Saved and deleted through the members page's services (annotation.members), which record
    # member_add / member_change / member_remove themselves (tests/admin/test_researcher_admin.py).
    "annotation.membership",
}


def test_every_annotation_admin_that_changes_or_deletes_rows_is_audited(w):
    request = RequestFactory().get("/admin/")
    request.user = w.root
    editable = {
        model._meta.label_lower
        for model, model_admin in admin.site._registry.items()
        if model._meta.app_label == "annotation"
        and (model_admin.has_change_permission(request) or model_admin.has_delete_permission(request))
    }
    audited = {
        model._meta.label_lower
        for model, model_admin in admin.site._registry.items()
        if isinstance(model_admin, AuditedAdmin)
    }
    assert audited == {"annotation.project", "annotation.item", "annotation.annotation", "annotation.review"}
    assert editable - NOT_AUDITED == audited


def test_import_records_cannot_be_deleted_even_by_a_superuser(w):
    from annotation.models import ImportRun

    run = ImportRun.objects.create(project=w.lab, file_name="items.jsonl")
    client = logged_in(w.root)
    assert client.get(admin_url(run, "delete")).status_code == 403
    assert client.post(admin_url(run, "delete"), {"post": "yes"}).status_code == 403
    listing = client.get("/admin/annotation/importrun/")
    assert listing.status_code == 200 and b"delete_selected" not in listing.content
    assert client.post(
        "/admin/annotation/importrun/", {"action": "delete_selected", "_selected_action": [run.pk], "post": "yes"}
    ).status_code in (200, 302)
    assert ImportRun.objects.filter(pk=run.pk).exists()


def test_a_superuser_still_deletes_a_project_with_import_records_but_not_one_an_import_is_writing(w):
    from annotation.models import ImportRun

    done = ImportRun.objects.create(project=w.lab, file_name="items.jsonl", status="finished")
    client = logged_in(w.root)
    running = ImportRun.objects.create(project=w.lab, file_name="more.jsonl", status="running")
    page = client.get(admin_url(w.lab, "delete"))
    assert page.status_code == 200 and b"Cannot delete project" in page.content, page.content.decode()[-3000:]
    assert b"more.jsonl" in page.content and b"still running" in page.content, page.content.decode()
    refused = client.post(admin_url(w.lab, "delete"), {"post": "yes"})
    assert refused.status_code == 200 and b"Cannot delete project" in refused.content  # the admin's refusal page
    assert Project.objects.filter(pk=w.lab.pk).exists()

    ImportRun.objects.filter(pk=running.pk).update(status="finished")
    assert client.post(admin_url(w.lab, "delete"), {"post": "yes"}).status_code == 302
    assert not Project.objects.filter(pk=w.lab.pk).exists() and not ImportRun.objects.filter(pk=done.pk).exists()
