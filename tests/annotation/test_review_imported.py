"""Review of labels that came with an import: shown as one source beside the annotations, accepted
as they are (verified, audited as accepted as imported), never counted as an annotation."""

from __future__ import annotations

import json

import pytest

from annotation import agreement
from annotation.importing import items_import
from annotation.importing.samples import write_sample_dataset
from annotation.models import AuditAction, AuditEvent, Item, ItemStatus, Review
from annotation.queue import queue_claim_next
from annotation.selectors_agreement import project_agreement
from tests.annotation.work_factories import make_item, make_people, valid_result
from tests.helpers.clients import session_client
from tests.helpers.timed import claim_and_submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def people():
    return make_people(3)


def imported_project(make_project, people, protocol, tmp_path, n=2):
    annotator, reviewer, other = people
    project = make_project("imp", protocol, members={annotator: "annotator", reviewer: "reviewer"})
    data = tmp_path / "data"
    data.mkdir()
    path = write_sample_dataset(data, protocol, n)
    items_import(project=project, path=path)
    return project, path


def test_imported_labels_show_as_one_source_and_accept_verifies_them_as_imported(
    make_project, people, tmp_path, _media_root
):
    annotator, reviewer, _ = people
    project, path = imported_project(make_project, people, "status", tmp_path)
    item = Item.objects.get(project=project, external_id="status-00000")
    assert item.status == ItemStatus.ANNOTATED and item.annotation_count == 0
    before = dict(item.payload)
    client = session_client(reviewer)

    detail = client.get(f"/api/items/{item.pk}/review/").json()
    assert detail["annotations"] == []
    imported = detail["imported"]
    assert imported["source"] == f"from the import {path.name} (statelab)"
    assert imported["file"] == path.name and imported["format"] == "statelab"
    assert imported["result"] == {name: before[name] for name in agreement.QUINTUPLET_FIELDS}

    answer = client.post(f"/api/items/{item.pk}/review/", {"decision": "accept", "imported": True}, format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["status"] == "verified"
    item.refresh_from_db()
    assert item.status == ItemStatus.VERIFIED
    assert item.payload == before  # the labels as they came
    review = Review.objects.get(item=item)
    assert review.decision == "accept" and review.accepted_annotation is None and review.reviewer == reviewer
    event = AuditEvent.objects.get(action=AuditAction.VERIFY, object_id=str(item.pk))
    assert event.details == {"review": review.pk, "annotation": None, "accepted": "as imported"}
    assert not AuditEvent.objects.filter(action=AuditAction.EDIT).exists()
    # No annotation counted anywhere: the agreement figures know of none.
    assert project_agreement(project=project)["annotators"] == []


def test_a_qa_import_is_accepted_with_its_answer_and_never_reaches_an_annotator(
    make_project, people, tmp_path, _media_root
):
    annotator, reviewer, _ = people
    project, _path = imported_project(make_project, people, "visualtrans", tmp_path)
    item = Item.objects.filter(project=project).order_by("pk").first()
    before = json.loads(json.dumps(item.payload))
    detail = session_client(reviewer).get(f"/api/items/{item.pk}/review/").json()
    assert detail["imported"]["result"] == {"answer": before["answer"]}
    # What an annotator receives is unchanged: the imported item is not in their queue.
    assert queue_claim_next(project=project, user=annotator) is None
    answer = session_client(reviewer).post(
        f"/api/items/{item.pk}/review/", {"decision": "accept", "imported": True}, format="json"
    )
    assert answer.status_code == 201, answer.content
    item.refresh_from_db()
    assert item.status == ItemStatus.VERIFIED and item.payload == before


def test_accepting_imported_labels_where_there_are_none_or_with_an_annotation_is_refused(make_project, people):
    annotator, reviewer, other = people
    project = make_project(
        "raw", "status", annotations_per_item=1, members={annotator: "annotator", reviewer: "reviewer"}
    )
    item = make_item(project, "raw-0")
    annotation = claim_and_submit(project, annotator, valid_result("quintuplet"), ms=1000).annotation
    client = session_client(reviewer)

    detail = client.get(f"/api/items/{item.pk}/review/").json()
    assert detail["imported"] is None  # a normal item's review is as it was
    assert [a["id"] for a in detail["annotations"]] == [annotation.pk]

    none = client.post(f"/api/items/{item.pk}/review/", {"decision": "accept", "imported": True}, format="json")
    assert none.status_code == 400
    assert "no imported labels" in none.json()["errors"]["imported"]
    both = client.post(
        f"/api/items/{item.pk}/review/",
        {"decision": "accept", "imported": True, "annotation": annotation.pk},
        format="json",
    )
    assert both.status_code == 400 and "not both" in both.json()["errors"]["imported"]
    discard = client.post(f"/api/items/{item.pk}/review/", {"decision": "discard", "imported": True}, format="json")
    assert discard.status_code == 400 and "only be accepted" in discard.json()["errors"]["imported"]
    item.refresh_from_db()
    assert item.status == ItemStatus.ANNOTATED and not Review.objects.exists()

    # The ordinary accept still works, audited without the imported flag.
    ok = client.post(
        f"/api/items/{item.pk}/review/", {"decision": "accept", "annotation": annotation.pk}, format="json"
    )
    assert ok.status_code == 201
    event = AuditEvent.objects.get(action=AuditAction.VERIFY)
    assert "accepted" not in event.details and event.details["annotation"] == annotation.pk
