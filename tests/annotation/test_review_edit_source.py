"""An edit records the annotation it started from (services.review_decide, Review.source_annotation_id):
checked (one of the item's annotations, not one that left the analysis; a 400 naming `annotation`
otherwise, nothing written), shown in the item's review history and the audit trail. An edit that
started from a rejected participant's annotation is the reviewer's own answer: it stands, and the
rejection lists it (studies/reopen.py says why)."""

from __future__ import annotations

import pytest

from annotation.models import AuditEvent, Item, ItemReopening, ItemStatus, Review, Role, StudyParticipant
from annotation.studies.participants import participant_reject
from annotation.studies.setup import study_create
from tests.helpers.clients import logged_in
from tests.helpers.studies import UNGATED_STUDY, joined_participant
from tests.helpers.work import next_task, submit_task

from .work_factories import make_item

pytestmark = pytest.mark.django_db
EDIT = {"decision": "edit", "result": {"answer": "B"}}


@pytest.fixture
def world(make_user, make_project):
    researcher, reviewer = make_user("res"), make_user("rev")
    project = make_project(
        "crowd", "visualtrans", members={researcher: Role.RESEARCHER, reviewer: Role.REVIEWER}, annotations_per_item=2
    )
    x, y = make_item(project, "x"), make_item(project, "y")
    study = study_create(project=project, actor=researcher, **UNGATED_STUDY)
    p1, p2 = joined_participant(study, "P1"), joined_participant(study, "P2")
    ids = {}
    for person, answers in ((p1, ("A", "A")), (p2, ("C", "B"))):
        for answer in answers:
            task = next_task(logged_in(person))
            ids[person.username, task["item"]["id"]] = submit_task(
                logged_in(person), task, {"answer": answer, "flags": []}
            )
    return project, study, researcher, reviewer, x, y, p1, p2, ids


def decide(reviewer, item, body) -> object:
    return logged_in(reviewer).post(f"/api/items/{item.pk}/review/", body, content_type="application/json")


def unchanged(item, payload) -> bool:
    item.refresh_from_db()
    return (
        item.status,
        item.payload,
        Review.objects.filter(item=item).exists(),
        AuditEvent.objects.filter(action="edit").exists(),
    ) == (ItemStatus.ANNOTATED, payload, False, False)


def test_an_edit_records_the_annotation_it_started_from(world):
    project, study, researcher, reviewer, x, y, p1, p2, ids = world
    source = ids[p2.username, x.pk]

    r = decide(reviewer, x, {**EDIT, "annotation": source})

    assert r.status_code == 201
    review = Review.objects.get(item=x)
    assert (review.decision, review.source_annotation_id, review.accepted_annotation_id, review.result) == (
        "edit",
        source,
        None,
        {"answer": "B"},
    )
    assert AuditEvent.objects.get(action="edit").details == {
        "review": review.pk,
        "annotation": None,
        "started_from": source,
    }
    history = logged_in(reviewer).get(f"/api/items/{x.pk}/review/").json()["reviews"]
    assert [(h["decision"], h["started_from"], h["voided"]) for h in history] == [
        ("edit", {"annotation": source, "annotator": p2.username, "excluded": False}, None)
    ]
    # Without one (the page has no annotation to offer, or an API client names none): nothing recorded.
    assert decide(reviewer, y, EDIT).status_code == 201
    assert Review.objects.get(item=y).source_annotation_id is None
    assert logged_in(reviewer).get(f"/api/items/{y.pk}/review/").json()["reviews"][0]["started_from"] is None


@pytest.mark.parametrize(
    "bad, message",
    [
        ("other item", "is not one of this item's annotations."),
        ("missing", "is not one of this item's annotations."),
        ("text", "A valid integer is required."),
        ("zero", "Ensure this value is greater than or equal to 1."),
    ],
)
def test_an_edit_naming_another_items_or_no_annotation_is_refused(world, bad, message):
    project, study, researcher, reviewer, x, y, p1, p2, ids = world
    payload = dict(Item.objects.get(pk=x.pk).payload)
    value = {"other item": ids[p2.username, y.pk], "missing": 10**12, "text": "first", "zero": 0}[bad]

    r = decide(reviewer, x, {**EDIT, "annotation": value})

    assert r.status_code == 400
    assert list(r.json()["errors"]) == ["annotation"] and r.json()["errors"]["annotation"].endswith(message)
    assert unchanged(x, payload)


def test_an_edit_cannot_start_from_an_annotation_that_left_the_analysis(world):
    project, study, researcher, reviewer, x, y, p1, p2, ids = world
    gone = ids[p1.username, x.pk]
    participant_reject(study=study, participant_id=StudyParticipant.objects.get(user=p1).pk, actor=researcher)
    p3 = joined_participant(study, "P3")
    submit_task(logged_in(p3), next_task(logged_in(p3)), {"answer": "C", "flags": []})
    payload = dict(Item.objects.get(pk=x.pk).payload)
    assert Item.objects.get(pk=x.pk).status == ItemStatus.ANNOTATED

    r = decide(reviewer, x, {**EDIT, "annotation": gone})

    assert r.status_code == 400
    assert r.json()["errors"] == {
        "annotation": f"Annotation {gone} left the analysis (its participant was rejected): "
        "start the edit from one of the item's annotations."
    }
    assert unchanged(x, payload)


def test_an_edit_that_started_from_a_rejected_participants_annotation_stands(world):
    project, study, researcher, reviewer, x, y, p1, p2, ids = world
    source = ids[p1.username, x.pk]
    assert decide(reviewer, x, {**EDIT, "annotation": source}).status_code == 201
    accepted = decide(reviewer, y, {"decision": "accept", "annotation": ids[p1.username, y.pk]})
    assert accepted.status_code == 201

    participant_reject(study=study, participant_id=StudyParticipant.objects.get(user=p1).pk, actor=researcher)

    # The accept of P1's answer goes back to review; the reviewer's edit stands, payload and all.
    x.refresh_from_db()
    assert (x.status, x.payload["answer"]) == (ItemStatus.VERIFIED, "B")
    assert list(ItemReopening.objects.values_list("item_id", flat=True)) == [y.pk]
    details = AuditEvent.objects.get(action="study_reject").details
    assert (details["edits_started_from"], details["back_to_review"], details["reviewed_items_kept"]) == (
        [x.pk],
        [y.pk],
        1,
    )
    # The history still tells where the edit started: P1's annotation, now out of the analysis.
    history = logged_in(reviewer).get(f"/api/items/{x.pk}/review/").json()["reviews"]
    assert [(h["decision"], h["started_from"], h["result"], h["voided"]) for h in history] == [
        ("edit", {"annotation": source, "annotator": p1.username, "excluded": True}, {"answer": "B"}, None)
    ]


def test_a_bad_answer_and_a_bad_annotation_are_named_together(world):
    project, study, researcher, reviewer, x, y, p1, p2, ids = world
    payload = dict(Item.objects.get(pk=x.pk).payload)

    r = decide(reviewer, x, {"decision": "edit", "result": {"answer": "Z"}, "annotation": ids[p2.username, y.pk]})

    assert r.status_code == 400
    assert sorted(r.json()["errors"]) == ["annotation", "answer"]
    assert unchanged(x, payload)
