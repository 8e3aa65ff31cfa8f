"""A re-opened item gets back the payload it had before the voided decision wrote its answer in
(annotation/studies/reopen.py, Review.payload_before): the next annotator's task and the review
page show the item as they did before it was ever reviewed, with no trace of the voided answer.
Every protocol whose decisions write into the payload (quintuplets, boxes, both QA protocols);
ratings stay as annotations. Production settings (the 10-minute lease)."""

from __future__ import annotations

import pytest

from annotation.models import AuditEvent, Item, ItemReopening, ItemStatus, Review, Role, StudyParticipant
from annotation.queue import annotation_submit, queue_claim_next
from annotation.services import review_decide
from annotation.studies.participants import participant_reject
from annotation.studies.setup import study_create
from tests.helpers.clients import logged_in
from tests.helpers.studies import UNGATED_STUDY, joined_participant, pid
from tests.helpers.work import next_task, submit_task

from .work_factories import PAYLOADS, make_item

pytestmark = pytest.mark.django_db

VOIDED_QUINTUPLET = {
    "state_a": "VOIDED shut jam jar",
    "state_b": "VOIDED unscrewed jam jar",
    "change": "VOIDED twist it",
    "change_distractors": ["VOIDED shake it", "VOIDED drop it", "VOIDED lick it"],
    "category": "positional",
    "difference": "slight",
}
LATER_QUINTUPLET = {
    "state_a": "a closed jar",
    "state_b": "an open jar",
    "change": "open the jar",
    "change_distractors": ["close the jar", "fill the jar", "break the jar"],
    "category": "functional",
    "difference": "significant",
}
# protocol -> (the answer the voided decision accepted, a later annotator's answer, the fields the
# decision writes into the payload). Each voided value differs from the imported truth.
CASES = {
    "status": (VOIDED_QUINTUPLET, LATER_QUINTUPLET, tuple(VOIDED_QUINTUPLET)),
    "changeit": (
        {"bbox": [11, 22, 133, 144], "state": "whole apple"},
        {"bbox": [10, 20, 100, 80], "state": "peeled apple"},
        ("bbox", "state"),
    ),
    "visualtrans": ({"answer": "A", "flags": []}, {"answer": "B", "flags": []}, ("answer",)),
    "m3verse": ({"answer": ["B", "C"], "flags": []}, {"answer": ["A"], "flags": []}, ("answer",)),  # D: "none listed"
}


def entries(value, key=None):
    """Every (key, value) pair of a JSON document, nested ones included."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k, v
            yield from entries(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from entries(v, key)


def traces(document, answer: dict, fields: tuple[str, ...]) -> list:
    """Where `document` carries a field of the voided answer with the voided value (an M3-Verse
    answer compared in its stored form, sorted letters)."""
    wanted = {(f, repr(answer[f])) for f in fields}
    wanted |= {(f, repr(sorted(answer[f]))) for f in fields if isinstance(answer[f], list)}
    return [(k, v) for k, v in entries(document) if (k, repr(v)) in wanted]


@pytest.fixture
def crowd(make_user, make_project):
    def make(protocol: str, per_item: int = 1, **settings):
        researcher, reviewer = make_user("res"), make_user("rev")
        project = make_project(
            "crowd",
            protocol,
            members={researcher: Role.RESEARCHER, reviewer: Role.REVIEWER},
            annotations_per_item=per_item,
            settings=settings,
        )
        item = make_item(project, "x")
        study = study_create(project=project, actor=researcher, **UNGATED_STUDY)
        return project, study, researcher, reviewer, item

    return make


def reject(study, user, researcher) -> dict:
    participant = StudyParticipant.objects.get(study=study, user=user)
    return participant_reject(study=study, participant_id=participant.pk, actor=researcher, note="spam")


@pytest.mark.parametrize("protocol", list(CASES))
def test_an_item_back_in_the_queue_shows_annotators_and_reviewers_what_it_showed_before_its_review(crowd, protocol):
    voided, later, fields = CASES[protocol]
    project, study, researcher, reviewer, x = crowd(protocol)
    imported = dict(x.payload)
    p1 = joined_participant(study, "P1")
    first = next_task(logged_in(p1))
    mine = submit_task(logged_in(p1), first, voided)
    rev = logged_in(reviewer)
    before_review = rev.get(f"/api/items/{x.pk}/review/").json()
    assert before_review["item"]["payload"] == imported
    decided = rev.post(
        f"/api/items/{x.pk}/review/", {"decision": "accept", "annotation": mine}, content_type="application/json"
    )
    assert decided.status_code == 201
    x.refresh_from_db()
    assert traces(x.payload, voided, fields)  # the decision wrote its answer into the item
    written = dict(x.payload)

    outcome = reject(study, p1, researcher)

    assert outcome["items_reopened"] == 1 and outcome["items_back_to_review"] == 0  # no annotation left: the queue
    x.refresh_from_db()
    assert (x.status, x.payload) == (ItemStatus.PENDING, imported)
    reopening = ItemReopening.objects.get(item=x)
    assert (reopening.voided_payload, reopening.payload_restore) == (written, "recorded")
    # The next annotator gets the item exactly as the first one did: a ChangeIt item proposes its
    # imported state again, not the one the voided decision accepted.
    p2 = joined_participant(study, "P2")
    again = next_task(logged_in(p2))
    assert again["item"] == first["item"]
    assert traces(again, voided, fields) == []
    if protocol == "changeit":
        assert (first["item"]["proposed_state"], again["item"]["proposed_state"]) == ("peeled apple", "peeled apple")
    # Annotated again, the review page shows the item as before its first review; the voided
    # decision is listed as voided, without its answer.
    submit_task(logged_in(p2), again, later)
    after = rev.get(f"/api/items/{x.pk}/review/").json()
    assert after["item"] == before_review["item"]
    assert traces(after, voided, fields) == []
    assert [(r["decision"], r["result"], r["voided"]["reason"]) for r in after["reviews"]] == [
        ("accept", None, f"needs re-review: participant {pid('P1')} rejected")
    ]
    assert after["reopened"]["reason"] == f"needs re-review: participant {pid('P1')} rejected"


@pytest.mark.parametrize("protocol", list(CASES))
def test_an_item_back_in_review_shows_the_current_item_from_before_its_review(crowd, protocol):
    voided, later, fields = CASES[protocol]
    project, study, researcher, reviewer, x = crowd(protocol, per_item=2)
    imported = dict(x.payload)
    p1, p2 = joined_participant(study, "P1"), joined_participant(study, "P2")
    mine = submit_task(logged_in(p1), next_task(logged_in(p1)), voided)
    submit_task(logged_in(p2), next_task(logged_in(p2)), later)
    rev = logged_in(reviewer)
    before_review = rev.get(f"/api/items/{x.pk}/review/").json()
    rev.post(f"/api/items/{x.pk}/review/", {"decision": "accept", "annotation": mine}, content_type="application/json")
    assert Item.objects.get(pk=x.pk).payload != imported

    outcome = reject(study, p1, researcher)

    assert outcome["items_back_to_review"] == 1
    after = rev.get(f"/api/items/{x.pk}/review/").json()
    assert after["item"]["payload"] == imported == before_review["item"]["payload"]
    assert {k: v for k, v in after["item"].items() if k != "annotation_count"} == {
        k: v for k, v in before_review["item"].items() if k != "annotation_count"
    }
    assert traces(after, voided, fields) == []


def test_an_auto_verified_consensus_is_taken_out_of_the_payload(crowd):
    project, study, researcher, reviewer, x = crowd("visualtrans", per_item=2, auto_verify=True)
    assert x.payload["answer"] == "C"
    p1, p2 = joined_participant(study, "P1"), joined_participant(study, "P2")
    for person in (p1, p2):
        submit_task(logged_in(person), next_task(logged_in(person)), {"answer": "A", "flags": []})
    x.refresh_from_db()
    assert (x.status, x.payload["answer"]) == (ItemStatus.VERIFIED, "A")  # the annotators agreed on A

    reject(study, p1, researcher)

    x.refresh_from_db()
    assert (x.status, x.payload) == (ItemStatus.ANNOTATED, PAYLOADS["visualtrans"]())
    assert Review.objects.get(item=x).payload_before == PAYLOADS["visualtrans"]()


@pytest.mark.parametrize(
    "protocol, kept",
    [
        ("status", {"image_a", "image_b"}),
        ("changeit", {"image", "object", "state", "distractors"}),
        ("visualtrans", {"images", "question", "format", "options", "subtask", "scene"}),
    ],
)
def test_a_decision_older_than_the_record_has_its_answer_fields_taken_out(crowd, protocol, kept):
    """A review made before Review.payload_before existed: what the payload held before it is not
    known, so the fields a decision writes are taken out (a raw item's payload) and the reopening
    says so."""
    voided, _later, fields = CASES[protocol]
    project, study, researcher, reviewer, x = crowd(protocol)
    p1 = joined_participant(study, "P1")
    task = queue_claim_next(project=project, user=p1)
    mine = annotation_submit(task_id=task.pk, user=p1, result=voided).annotation
    review_decide(item_id=x.pk, reviewer=reviewer, decision="accept", annotation_id=mine.pk)
    Review.objects.filter(item=x).update(payload_before=None)
    written = Item.objects.get(pk=x.pk).payload

    reject(study, p1, researcher)

    x.refresh_from_db()
    assert set(x.payload) == kept
    assert x.payload == {k: v for k, v in written.items() if k in kept}
    assert traces(x.payload, voided, tuple(f for f in fields if f != "state")) == []
    assert ItemReopening.objects.get(item=x).payload_restore == "labels_removed"
    assert AuditEvent.objects.get(action="review_reopen").details["payload"] == "labels_removed"


def test_a_discard_keeps_no_payload_and_a_review_records_the_one_before(crowd):
    project, study, _researcher, reviewer, x = crowd("changeit", per_item=1)
    imported = dict(x.payload)
    p1 = joined_participant(study, "P1")
    mine = submit_task(logged_in(p1), next_task(logged_in(p1)), CASES["changeit"][0])

    review_decide(item_id=x.pk, reviewer=reviewer, decision="accept", annotation_id=mine)

    review = Review.objects.get(item=x)
    assert (review.payload_before, Item.objects.get(pk=x.pk).payload["state"]) == (imported, "whole apple")
    other = make_item(project, "y")
    p2 = joined_participant(study, "P2")
    submit_task(logged_in(p2), next_task(logged_in(p2)), CASES["changeit"][1])
    review_decide(item_id=other.pk, reviewer=reviewer, decision="discard")
    assert Review.objects.get(item=other).payload_before is None


def test_only_what_the_voided_decision_wrote_is_undone(crowd):
    """A field the decision did not write, changed after it (a researcher fixing the question in the
    admin), stays; the answer it wrote goes back to the imported one."""
    project, study, researcher, reviewer, x = crowd("visualtrans")
    p1 = joined_participant(study, "P1")
    mine = submit_task(logged_in(p1), next_task(logged_in(p1)), {"answer": "A", "flags": []})
    review_decide(item_id=x.pk, reviewer=reviewer, decision="accept", annotation_id=mine)
    fixed = {**Item.objects.get(pk=x.pk).payload, "question": "Which tool was used to cut?"}
    Item.objects.filter(pk=x.pk).update(payload=fixed)

    reject(study, p1, researcher)

    x.refresh_from_db()
    assert x.payload == {**PAYLOADS["visualtrans"](), "question": "Which tool was used to cut?"}
    assert x.payload["answer"] == "C"
