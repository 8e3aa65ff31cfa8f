"""Task queue services against PostgreSQL, the writes that repeat or are refused: a submit repeated
(by its idempotency key, by its task, from another tab), a bad answer, someone else's task, and
draft versions (a stale save, a replayed one). Claims, holds and expiry: test_tasks_queue.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import Annotation, Item, Task
from annotation.queue import (
    AlreadySubmitted,
    TaskConflict,
    TaskNotFound,
    annotation_submit,
    queue_claim_next,
    task_renew,
    task_save_draft,
    task_skip,
)
from annotation.results import ResultInvalid
from tests.annotation.work_factories import make_item, make_items_fast, valid_result

pytestmark = pytest.mark.django_db


def test_submit_is_idempotent_by_key_by_task_and_across_tabs(make_project, people):
    project = make_project("q", "changeit", annotations_per_item=2)
    make_item(project)
    task = queue_claim_next(project=project, user=people[0])

    first = annotation_submit(task_id=task.pk, user=people[0], result=valid_result("box"), idempotency_key="k-1")
    retry = annotation_submit(task_id=task.pk, user=people[0], result=valid_result("box"), idempotency_key="k-1")
    other_tab = annotation_submit(task_id=task.pk, user=people[0], result=valid_result("box"))

    assert (first.created, retry.created, other_tab.created) == (True, False, False)
    assert retry.annotation.pk == first.annotation.pk == other_tab.annotation.pk
    assert Annotation.objects.count() == 1
    assert Item.objects.get().annotation_count == 1


def test_a_repeat_is_compared_after_validation(make_project, people):
    project = make_project("q", "changeit")
    make_item(project)  # a 640x480 image
    task = queue_claim_next(project=project, user=people[0])
    first = annotation_submit(
        task_id=task.pk, user=people[0], result={"bbox": [600, 400, 100, 200], "state": "peeled apple"}
    )

    # The same raw answer is clipped to the same box, so it is the same answer.
    again = annotation_submit(
        task_id=task.pk, user=people[0], result={"bbox": [600, 400, 100, 200], "state": "peeled apple"}
    )

    assert (first.created, again.created, again.annotation.pk) == (True, False, first.annotation.pk)
    assert first.annotation.result == {"bbox": [600.0, 400.0, 40.0, 80.0], "state": "peeled apple"}


@pytest.mark.parametrize("key", ["tab-key", None])
def test_a_second_tab_with_a_different_answer_gets_a_conflict_and_the_first_answer_stands(make_project, people, key):
    # Two tabs share the page's Idempotency-Key (kept in localStorage), or send none at all.
    project = make_project("q", "changeit", annotations_per_item=2)
    make_item(project)
    task = queue_claim_next(project=project, user=people[0])
    first = annotation_submit(task_id=task.pk, user=people[0], result=valid_result("box"), idempotency_key=key)

    with pytest.raises(AlreadySubmitted) as err:
        annotation_submit(task_id=task.pk, user=people[0], result=valid_result("box", 5), idempotency_key=key)

    assert "already submitted with a different answer" in str(err.value)
    assert err.value.annotation.pk == first.annotation.pk
    assert err.value.annotation.result == valid_result("box")
    assert list(Annotation.objects.values_list("result", flat=True)) == [valid_result("box")]
    assert Item.objects.get().annotation_count == 1


def test_an_invalid_repeat_of_a_submitted_task_is_a_conflict_too(make_project, people):
    project = make_project("q", "changeit")
    make_item(project)
    task = queue_claim_next(project=project, user=people[0])
    annotation_submit(task_id=task.pk, user=people[0], result=valid_result("box"), idempotency_key="k")

    with pytest.raises(AlreadySubmitted):
        annotation_submit(task_id=task.pk, user=people[0], result={"bbox": "nope"}, idempotency_key="k")

    assert Annotation.objects.count() == 1


def test_idempotency_keys_are_per_annotator(make_project, people):
    # External clients often number their submits "1", "2", ...: two annotators may use the same key.
    project = make_project("q", "changeit", annotations_per_item=2)
    make_item(project)
    t0 = queue_claim_next(project=project, user=people[0])
    a = annotation_submit(task_id=t0.pk, user=people[0], result=valid_result("box"), idempotency_key="1")
    t1 = queue_claim_next(project=project, user=people[1])
    assert t1.item_id == t0.item_id

    b = annotation_submit(task_id=t1.pk, user=people[1], result=valid_result("box", 1), idempotency_key="1")
    retry = annotation_submit(task_id=t1.pk, user=people[1], result=valid_result("box", 1), idempotency_key="1")

    assert (a.created, b.created, retry.created) == (True, True, False)
    assert retry.annotation.pk == b.annotation.pk != a.annotation.pk
    assert sorted(Annotation.objects.values_list("annotator__username", "idempotency_key")) == [
        ("ann0", "1"),
        ("ann1", "1"),
    ]


def test_the_database_refuses_one_annotator_reusing_a_key(make_project, people):
    from django.db import IntegrityError, transaction

    project = make_project("q", "changeit")
    i1, i2 = make_item(project), make_item(project)
    Annotation.objects.create(item=i1, annotator=people[0], idempotency_key="k")
    Annotation.objects.create(item=i1, annotator=people[1], idempotency_key="k")

    with pytest.raises(IntegrityError), transaction.atomic():
        Annotation.objects.create(item=i2, annotator=people[0], idempotency_key="k")

    assert Annotation.objects.count() == 2


def test_an_idempotency_key_cannot_be_reused_for_another_task(make_project, people):
    project = make_project("q", "changeit")
    make_items_fast(project, 2)
    t1 = queue_claim_next(project=project, user=people[0])
    annotation_submit(task_id=t1.pk, user=people[0], result=valid_result("box"), idempotency_key="same")
    t2 = queue_claim_next(project=project, user=people[0])

    with pytest.raises(TaskConflict):
        annotation_submit(task_id=t2.pk, user=people[0], result=valid_result("box"), idempotency_key="same")

    assert Annotation.objects.count() == 1
    assert Task.objects.get(pk=t2.pk).status == "active"


def test_a_bad_result_names_the_field_and_writes_nothing(make_project, people):
    project = make_project("q", "changeit")
    item = make_item(project)
    task = queue_claim_next(project=project, user=people[0])

    with pytest.raises(ResultInvalid) as err:
        annotation_submit(task_id=task.pk, user=people[0], result={"bbox": [1, 2, 3], "state": "peeled apple"})

    assert list(err.value.errors) == ["bbox"]
    item.refresh_from_db()
    assert (Annotation.objects.count(), item.annotation_count, Task.objects.get().status) == (0, 0, "active")


def test_someone_elses_task_is_not_found_and_unchanged(make_project, people):
    project = make_project("q", "changeit")
    make_item(project)
    task = queue_claim_next(project=project, user=people[0])

    for call in (
        lambda: annotation_submit(task_id=task.pk, user=people[1], result=valid_result("box")),
        lambda: task_skip(task_id=task.pk, user=people[1]),
        lambda: task_save_draft(task_id=task.pk, user=people[1], draft={"x": 1}, version=0),
        lambda: task_renew(task_id=task.pk, user=people[1]),
    ):
        with pytest.raises(TaskNotFound):
            call()

    task.refresh_from_db()
    assert (task.status, task.draft, task.draft_version, Annotation.objects.count()) == ("active", {}, 0, 0)


def test_draft_versions_and_stale_write_conflict(make_project, people):
    project = make_project("q", "changeit", settings={"lease_seconds": 60})
    make_item(project)
    now = timezone.now()
    task = queue_claim_next(project=project, user=people[0], now=now)

    saved = task_save_draft(
        task_id=task.pk, user=people[0], draft={"bbox": [1, 1, 5, 5]}, version=0, now=now + timedelta(seconds=50)
    )
    assert (saved.draft_version, saved.lease_expires) == (1, now + timedelta(seconds=110))

    with pytest.raises(TaskConflict) as err:
        task_save_draft(task_id=task.pk, user=people[0], draft={"bbox": [9, 9, 9, 9]}, version=0)
    assert "another tab" in str(err.value)
    task.refresh_from_db()
    assert (task.draft, task.draft_version) == ({"bbox": [1, 1, 5, 5]}, 1)


def test_a_replayed_draft_save_succeeds_and_a_different_stale_one_still_conflicts(make_project, people):
    # The client retries a PUT whose answer it never got: same draft, same base version.
    project = make_project("q", "changeit", settings={"lease_seconds": 60})
    make_item(project)
    now = timezone.now()
    task = queue_claim_next(project=project, user=people[0], now=now)
    task_save_draft(task_id=task.pk, user=people[0], draft={"bbox": [1, 1, 5, 5], "note": "x"}, version=0, now=now)

    replay = task_save_draft(
        task_id=task.pk,
        user=people[0],
        draft={"note": "x", "bbox": [1, 1, 5, 5]},
        version=0,
        now=now + timedelta(seconds=30),
    )

    assert (replay.draft_version, replay.draft) == (1, {"bbox": [1, 1, 5, 5], "note": "x"})
    assert replay.lease_expires == now + timedelta(seconds=90)  # a replay keeps the hold like any save
    with pytest.raises(TaskConflict):
        task_save_draft(task_id=task.pk, user=people[0], draft={"bbox": [2, 2, 5, 5]}, version=0)
    task_save_draft(task_id=task.pk, user=people[0], draft={"bbox": [3, 3, 5, 5]}, version=1)
    # An older save replayed after a newer one is stale, not a replay of the current version.
    with pytest.raises(TaskConflict):
        task_save_draft(task_id=task.pk, user=people[0], draft={"bbox": [1, 1, 5, 5], "note": "x"}, version=0)
    task.refresh_from_db()
    assert (task.draft, task.draft_version) == ({"bbox": [3, 3, 5, 5]}, 2)
