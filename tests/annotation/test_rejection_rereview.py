"""Rejecting a crowd participant after a reviewer settled items (annotation/studies/reopen.py): a
verified decision that rested on one of their annotations goes back to review (marked, audited)
unless the remaining annotations support it; decisions that did not rest on them stand; an item
frozen in a release keeps its decision and is reported. Production settings (the 10-minute lease)."""

from __future__ import annotations

import pytest
from django.test import Client

from annotation.models import (
    AuditEvent,
    Item,
    ItemReopening,
    ItemStatus,
    Release,
    ReleaseItem,
    Review,
    Role,
    StudyParticipant,
)
from annotation.queue import queue_claim_next
from annotation.releases import release_freeze
from annotation.services import review_decide
from annotation.studies.participants import participant_reject
from annotation.studies.setup import study_create
from tests.helpers.studies import UNGATED_STUDY, do_tasks, joined_participant, pid

from .work_factories import make_item, valid_result

pytestmark = pytest.mark.django_db
A, B, C = ({"answer": letter, "flags": []} for letter in "ABC")


@pytest.fixture
def world(make_user, make_project):
    def make(protocol: str = "visualtrans", items=("x",), per_item: int = 2, **settings):
        researcher, reviewer = make_user("res"), make_user("rev")
        project = make_project(
            "crowd",
            protocol,
            members={researcher: Role.RESEARCHER, reviewer: Role.REVIEWER},
            annotations_per_item=per_item,
            settings=settings,
        )
        made = [make_item(project, ext) for ext in items]
        study = study_create(project=project, actor=researcher, **UNGATED_STUDY)
        return project, study, researcher, reviewer, made

    return make


def reject(study, user, researcher) -> dict:
    participant = StudyParticipant.objects.get(study=study, user=user)
    return participant_reject(study=study, participant_id=participant.pk, actor=researcher, note="spam")


def test_an_accept_that_rested_on_the_rejected_annotation_goes_back_to_review(world):
    project, study, researcher, reviewer, (x,) = world()
    p1, p2 = joined_participant(study, "P1"), joined_participant(study, "P2")
    (mine,) = do_tasks(project, p1, [A])
    (theirs,) = do_tasks(project, p2, [B])
    review = review_decide(item_id=x.pk, reviewer=reviewer, decision="accept", annotation_id=mine.pk)

    outcome = reject(study, p1, researcher)

    assert outcome == {
        "annotations_excluded": 1,
        "items_reopened": 0,
        "reviewed_items_kept": 0,
        "holds_ended": 0,
        "items_back_to_review": 1,
        "released_items_kept": [],
    }
    x.refresh_from_db()
    assert (x.status, x.annotation_count, x.disagreement) == (ItemStatus.ANNOTATED, 1, None)
    reopening = ItemReopening.objects.get(item=x)
    assert (reopening.reason, reopening.decision, reopening.review, reopening.annotation_id, reopening.created_by) == (
        f"needs re-review: participant {pid('P1')} rejected",
        "accept",
        review,
        mine.pk,
        researcher,
    )
    event = AuditEvent.objects.get(action="review_reopen")
    assert (event.actor, event.project, event.object_id) == (researcher, project, str(x.pk))
    assert event.details == {
        "reason": f"needs re-review: participant {pid('P1')} rejected",
        "study": study.pk,
        "participant": pid("P1"),
        "review": review.pk,
        "decision": "accept",
        "annotation": mine.pk,
        "back_to": "review",
        "payload": "recorded",
    }
    # The item's answer is the imported one again; the voided one is kept on the reopening.
    assert (x.payload["answer"], reopening.voided_payload["answer"], reopening.payload_restore) == (
        "C",
        "A",
        "recorded",
    )
    assert AuditEvent.objects.get(action="study_reject").details["back_to_review"] == [x.pk]
    # The earlier review stays as the record (its link to the deleted annotation is cleared).
    assert list(Review.objects.filter(item=x).values_list("decision", "accepted_annotation")) == [("accept", None)]

    # The reviewer sees it first in the queue, with why; the item is not offered to annotators again.
    client = Client()
    client.force_login(reviewer)
    queue = client.get("/api/projects/crowd/review/").json()["items"]
    assert [(r["id"], r["reopened"]) for r in queue] == [(x.pk, f"needs re-review: participant {pid('P1')} rejected")]
    detail = client.get(f"/api/items/{x.pk}/review/").json()
    assert (detail["reopened"]["reason"], detail["reopened"]["decision"]) == (
        f"needs re-review: participant {pid('P1')} rejected",
        "accept",
    )
    assert [a["id"] for a in detail["annotations"]] == [theirs.pk]
    assert queue_claim_next(project=project, user=joined_participant(study, "P3")) is None

    # Settled again: verified, out of the queue, the mark gone with it.
    review_decide(item_id=x.pk, reviewer=reviewer, decision="accept", annotation_id=theirs.pk)
    x.refresh_from_db()
    assert (x.status, x.payload["answer"]) == (ItemStatus.VERIFIED, "B")
    assert client.get("/api/projects/crowd/review/").json()["items"] == []
    assert client.get(f"/api/items/{x.pk}/review/").json()["reopened"] is None


def test_an_accept_a_remaining_annotation_still_supports_stands(world):
    project, study, researcher, reviewer, (x,) = world()
    p1, p2 = joined_participant(study, "P1"), joined_participant(study, "P2")
    (mine,) = do_tasks(project, p1, [C])
    do_tasks(project, p2, [C])
    review_decide(item_id=x.pk, reviewer=reviewer, decision="accept", annotation_id=mine.pk)

    outcome = reject(study, p1, researcher)

    assert (outcome["items_back_to_review"], outcome["reviewed_items_kept"]) == (0, 1)
    x.refresh_from_db()
    assert (x.status, x.annotation_count) == (ItemStatus.VERIFIED, 1)
    assert not ItemReopening.objects.exists() and not AuditEvent.objects.filter(action="review_reopen").exists()


def test_an_accept_of_another_annotation_and_an_edit_stand(world):
    project, study, researcher, reviewer, (x, y) = world(items=("x", "y"))
    p1, p2 = joined_participant(study, "P1"), joined_participant(study, "P2")
    do_tasks(project, p1, [A, A])
    theirs = do_tasks(project, p2, [B, B])
    review_decide(item_id=theirs[0].item_id, reviewer=reviewer, decision="accept", annotation_id=theirs[0].pk)
    review_decide(item_id=theirs[1].item_id, reviewer=reviewer, decision="edit", result={"answer": "A"})

    outcome = reject(study, p1, researcher)

    assert (outcome["annotations_excluded"], outcome["items_back_to_review"], outcome["reviewed_items_kept"]) == (
        2,
        0,
        2,
    )
    assert sorted(Item.objects.values_list("status", flat=True)) == ["verified", "verified"]
    assert not ItemReopening.objects.exists()


def test_an_auto_verified_item_goes_back_to_review(world):
    project, study, researcher, reviewer, (x,) = world(auto_verify=True)
    p1, p2 = joined_participant(study, "P1"), joined_participant(study, "P2")
    (mine,) = do_tasks(project, p1, [C])
    do_tasks(project, p2, [C])
    x.refresh_from_db()
    assert x.status == ItemStatus.VERIFIED  # the two agreed: no reviewer needed

    outcome = reject(study, p1, researcher)

    # One agreeing annotation is fewer than the two the project verifies on.
    assert (outcome["items_back_to_review"], outcome["reviewed_items_kept"]) == (1, 0)
    x.refresh_from_db()
    assert (x.status, x.annotation_count) == (ItemStatus.ANNOTATED, 1)
    assert ItemReopening.objects.get(item=x).decision == "auto"


def test_an_accepted_rating_rests_on_every_rater(world):
    project, study, researcher, reviewer, (video,) = world(protocol="oscbench", items=("video",))
    p1, p2 = joined_participant(study, "P1"), joined_participant(study, "P2")
    do_tasks(project, p1, [valid_result("rating")])
    (theirs,) = do_tasks(project, p2, [valid_result("rating")])
    # Accepting a rating keeps the raters' mean as the Human score: P1's ratings are in it.
    review_decide(item_id=video.pk, reviewer=reviewer, decision="accept", annotation_id=theirs.pk)

    outcome = reject(study, p1, researcher)

    assert outcome["items_back_to_review"] == 1
    video.refresh_from_db()
    assert video.status == ItemStatus.ANNOTATED


def test_an_item_frozen_in_a_release_keeps_its_decision_and_is_reported(world):
    project, study, researcher, reviewer, (x,) = world()
    p1, p2 = joined_participant(study, "P1"), joined_participant(study, "P2")
    (mine,) = do_tasks(project, p1, [A])
    do_tasks(project, p2, [B])
    review_decide(item_id=x.pk, reviewer=reviewer, decision="accept", annotation_id=mine.pk)
    release = release_freeze(project=project, version="v1", user=researcher)
    frozen = list(ReleaseItem.objects.filter(release=release).values_list("item_id", "position", "payload"))
    participant = StudyParticipant.objects.get(study=study, user=p1)
    client = Client()
    client.force_login(researcher)

    r = client.post(
        f"/projects/crowd/studies/{study.pk}/", {"action": "reject", "participant": participant.pk}, follow=True
    )

    assert r.status_code == 200
    shown = [str(m) for m in r.context["messages"]]
    assert shown[1] == (
        "1 verified item(s) rested on this participant's annotations but are frozen in a release, "
        "which cannot change; they keep their decision: x (v1)."
    )
    x.refresh_from_db()
    assert (x.status, x.payload["answer"]) == (ItemStatus.VERIFIED, "A")
    assert list(ReleaseItem.objects.filter(release=release).values_list("item_id", "position", "payload")) == frozen
    assert Release.objects.get(pk=release.pk).checksum == release.checksum
    assert not ItemReopening.objects.exists() and not AuditEvent.objects.filter(action="review_reopen").exists()
    details = AuditEvent.objects.get(action="study_reject").details
    assert details["released_items_kept"] == [{"item": x.pk, "external_id": "x", "releases": ["v1"]}]
    assert details["items_back_to_review"] == 0


def test_the_api_reports_items_frozen_in_a_release(world):
    project, study, researcher, reviewer, (x,) = world()
    p1, p2 = joined_participant(study, "P1"), joined_participant(study, "P2")
    (mine,) = do_tasks(project, p1, [A])
    do_tasks(project, p2, [B])
    review_decide(item_id=x.pk, reviewer=reviewer, decision="accept", annotation_id=mine.pk)
    release_freeze(project=project, version="v1", user=researcher)
    participant = StudyParticipant.objects.get(study=study, user=p1)
    client = Client()
    client.force_login(researcher)

    r = client.post(
        f"/api/projects/crowd/studies/{study.pk}/participants/{participant.pk}/decision/",
        {"decision": "reject"},
        content_type="application/json",
    )

    assert r.status_code == 200
    assert r.json() == {
        "status": "rejected",
        "annotations_excluded": 1,
        "items_reopened": 0,
        "reviewed_items_kept": 0,
        "holds_ended": 0,
        "items_back_to_review": 0,
        "released_items_kept": [{"item": x.pk, "external_id": "x", "releases": ["v1"]}],
    }


def test_an_item_sent_back_to_review_comes_before_older_calm_ones(world):
    project, study, researcher, reviewer, (calm, contested) = world(items=("calm", "contested"))
    p1, p2, p3 = joined_participant(study, "P1"), joined_participant(study, "P2"), joined_participant(study, "P3")
    do_tasks(project, p2, [C, C])  # calm, then contested
    do_tasks(project, p3, [C])  # calm is complete, and agreed
    (mine,) = do_tasks(project, p1, [A])  # contested is complete
    review_decide(item_id=contested.pk, reviewer=reviewer, decision="accept", annotation_id=mine.pk)

    reject(study, p1, researcher)

    client = Client()
    client.force_login(reviewer)
    queue = client.get("/api/projects/crowd/review/").json()["items"]
    assert [(r["id"], r["disagreement"], r["reopened"]) for r in queue] == [
        (contested.pk, [], f"needs re-review: participant {pid('P1')} rejected"),
        (calm.pk, [], None),
    ]


def test_with_no_annotation_left_the_item_goes_back_to_the_queue_and_comes_to_review_marked(world):
    project, study, researcher, reviewer, (x,) = world(per_item=1)
    p1, p2 = joined_participant(study, "P1"), joined_participant(study, "P2")
    (mine,) = do_tasks(project, p1, [A])
    review_decide(item_id=x.pk, reviewer=reviewer, decision="accept", annotation_id=mine.pk)

    outcome = reject(study, p1, researcher)

    assert (outcome["items_reopened"], outcome["items_back_to_review"], outcome["reviewed_items_kept"]) == (1, 0, 0)
    x.refresh_from_db()
    assert (x.status, x.annotation_count) == (ItemStatus.PENDING, 0)  # nothing to review: annotated again first
    assert AuditEvent.objects.get(action="review_reopen").details["back_to"] == "queue"
    assert AuditEvent.objects.get(action="study_reject").details["back_to_queue"] == [x.pk]
    (again,) = do_tasks(project, p2, [B])
    assert again.item_id == x.pk
    client = Client()
    client.force_login(reviewer)
    queue = client.get("/api/projects/crowd/review/").json()["items"]
    assert [(r["id"], r["reopened"]) for r in queue] == [(x.pk, f"needs re-review: participant {pid('P1')} rejected")]
