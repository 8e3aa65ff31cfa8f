"""Annotators' own history (annotation/amend.py, annotation/apis/amend.py): their recent work
newest first, amending while the item is not reviewed (the earlier version kept, the amendment the
one that counts), refused after review."""

from __future__ import annotations

import pytest
from django.test import Client

from annotation.amend import annotation_amend, own_recent_annotations
from annotation.models import Annotation, AnnotationRevision, AuditEvent, Item, ItemStatus, Role
from annotation.queue import TaskConflict, TaskNotFound
from annotation.results import ResultInvalid
from annotation.services import review_decide
from tests.annotation.work_factories import make_item, valid_result
from tests.browser.work_helpers import annotate_through_queue

pytestmark = pytest.mark.django_db


@pytest.fixture
def rated(make_user, make_project):
    """Two raters, two videos rated by both (three annotations per item needed: still pending)."""
    ann, other, rev = make_user("ann"), make_user("other"), make_user("rev")
    project = make_project(
        "osc",
        "oscbench",
        members={ann: Role.ANNOTATOR, other: Role.ANNOTATOR, rev: Role.REVIEWER},
        annotations_per_item=2,
    )
    for i in range(2):
        make_item(project, f"v{i}")
    annotate_through_queue(project, ann, [valid_result("rating")] * 2)
    annotate_through_queue(project, other, [valid_result("rating")] * 2)
    return project, ann, other, rev


def scores(**changes) -> dict:
    out = valid_result("rating")
    out["scores"] = {**out["scores"], **changes}
    return out


def test_recent_work_lists_only_ones_own_newest_first(rated):
    project, ann, other, _ = rated
    mine = own_recent_annotations(user=ann, project=project)
    assert [r["id"] for r in mine] == list(
        Annotation.objects.filter(annotator=ann).order_by("-created_at", "-pk").values_list("pk", flat=True)
    )
    assert {r["amendable"] for r in mine} == {True} and mine[0]["summary"] == "4 5 4 3 3 N/A 2 3"
    assert not {r["id"] for r in mine} & set(Annotation.objects.filter(annotator=other).values_list("pk", flat=True))


def test_amend_keeps_the_earlier_version_and_the_amendment_counts(rated):
    project, ann, _, rev = rated
    annotation = Annotation.objects.filter(annotator=ann).order_by("pk").first()
    first, measured = dict(annotation.result), annotation.time_spent_ms
    amended = annotation_amend(annotation_id=annotation.pk, user=ann, result=scores(realism=5), time_spent_ms=2000)
    assert amended.changed
    annotation.refresh_from_db()
    # The time stays what the submit measured: an amendment adds none (the client's count is not used).
    assert annotation.result["scores"]["realism"] == 5 and annotation.time_spent_ms == measured
    (revision,) = AnnotationRevision.objects.filter(annotation=annotation)
    assert revision.result == first and revision.submitted_at == annotation.created_at
    assert AuditEvent.objects.get(action="amend").details == {"item": annotation.item_id, "revision": revision.pk}
    # The same answer again changes nothing.
    assert not annotation_amend(annotation_id=annotation.pk, user=ann, result=scores(realism=5)).changed
    assert AnnotationRevision.objects.count() == 1
    # What review (and through it releases) reads is the amended answer.
    assert Item.objects.get(pk=annotation.item_id).status == ItemStatus.ANNOTATED
    review_decide(item_id=annotation.item_id, reviewer=rev, decision="accept", annotation_id=annotation.pk)
    assert annotation.item.reviews.get().result["scores"]["realism"] == 5


def test_amend_is_validated_and_refused_after_review_or_for_others(rated):
    project, ann, other, rev = rated
    annotation = Annotation.objects.filter(annotator=ann).order_by("pk").first()
    with pytest.raises(ResultInvalid) as caught:
        annotation_amend(annotation_id=annotation.pk, user=ann, result={"scores": {"realism": 9}})
    assert "scores.realism" in caught.value.errors
    with pytest.raises(TaskNotFound):
        annotation_amend(annotation_id=annotation.pk, user=other, result=scores(realism=5))
    review_decide(item_id=annotation.item_id, reviewer=rev, decision="discard")
    with pytest.raises(TaskConflict, match="reviewed already"):
        annotation_amend(annotation_id=annotation.pk, user=ann, result=scores(realism=5))
    annotation.refresh_from_db()
    assert annotation.result == valid_result("rating") and not AnnotationRevision.objects.exists()
    assert [r["amendable"] for r in own_recent_annotations(user=ann, project=project) if r["id"] == annotation.pk] == [
        False
    ]


def test_amend_api_and_page(rated):
    project, ann, other, rev = rated
    annotation = Annotation.objects.filter(annotator=ann).order_by("pk").first()
    client = Client()
    client.force_login(ann)
    listed = client.get("/api/projects/osc/my-annotations/").json()
    assert len(listed) == 2 and listed[0]["amend_url"].startswith("/projects/osc/my-work/")
    detail = client.get(f"/api/annotations/{annotation.pk}/").json()
    assert detail["result"] == annotation.result and detail["amendable"] and detail["item"]["id"] == annotation.item_id
    assert "generator" not in str(detail["item"])  # the annotator-safe payload, as a claim gives it
    bad = client.post(
        f"/api/annotations/{annotation.pk}/amend/", {"result": {"scores": {}}}, content_type="application/json"
    )
    assert bad.status_code == 400 and "scores.subject" in bad.json()["errors"]
    ok = client.post(
        f"/api/annotations/{annotation.pk}/amend/",
        {"result": scores(action=1), "time_spent_ms": 10},
        content_type="application/json",
    )
    assert ok.status_code == 200 and ok.json()["changed"] and ok.json()["result"]["scores"]["action"] == 1
    page = client.get(f"/projects/osc/my-work/{annotation.pk}/")
    assert page.status_code == 200 and f'data-amend="{annotation.pk}"' in page.content.decode()
    assert f"/projects/osc/my-work/{annotation.pk}/" in client.get("/projects/osc/").content.decode()
    # Someone else's annotation is not found, superusers' and reviewers' too.
    client.force_login(other)
    assert client.get(f"/api/annotations/{annotation.pk}/").status_code == 404
    assert client.get(f"/projects/osc/my-work/{annotation.pk}/").status_code == 404
    # After review: 409 with the reason, and the page sends the annotator back with it.
    Item.objects.filter(pk=annotation.item_id).update(status=ItemStatus.VERIFIED)
    client.force_login(ann)
    refused = client.post(
        f"/api/annotations/{annotation.pk}/amend/", {"result": scores(action=2)}, content_type="application/json"
    )
    assert refused.status_code == 409 and "reviewed already" in refused.json()["detail"]
    assert client.get(f"/projects/osc/my-work/{annotation.pk}/").status_code == 302
