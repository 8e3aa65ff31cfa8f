"""Task queue services against PostgreSQL: claim, hold, submit, skip, expiry, gold. Repeated and
refused submits and draft versions: test_tasks_queue_conflicts.py."""

from __future__ import annotations

import os
import random
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import Annotation, Item, Project, Review, Task
from annotation.queue import (
    TaskConflict,
    annotation_submit,
    queue_claim_next,
    rules,
    task_renew,
    task_skip,
    tasks_expire_stale,
)
from tests.annotation.work_factories import make_item, make_items_fast, valid_result
from tests.helpers.timed import claim_and_submit

pytestmark = pytest.mark.django_db


def test_claim_hands_the_first_free_item_with_a_lease(make_project, people):
    project = make_project("q", "changeit", annotations_per_item=2, settings={"lease_seconds": 90})
    ids = make_items_fast(project, 3)
    now = timezone.now()

    task = queue_claim_next(project=project, user=people[0], now=now)

    assert task.item_id == ids[0]
    assert task.status == "active"
    assert task.lease_expires == now + timedelta(seconds=90)
    assert task.draft == {} and task.draft_version == 0


def test_claim_again_returns_the_held_task_and_renews_it(make_project, people):
    project = make_project("q", "changeit")
    make_items_fast(project, 3)
    now = timezone.now()
    first = queue_claim_next(project=project, user=people[0], now=now)

    again = queue_claim_next(project=project, user=people[0], now=now + timedelta(seconds=30))

    assert again.pk == first.pk
    assert again.lease_expires == now + timedelta(seconds=630)
    assert Task.objects.count() == 1


def test_two_annotators_never_hold_the_same_item(make_project, people):
    project = make_project("q", "changeit", annotations_per_item=3)
    ids = make_items_fast(project, 2)

    a = queue_claim_next(project=project, user=people[0])
    b = queue_claim_next(project=project, user=people[1])
    c = queue_claim_next(project=project, user=people[2])

    assert (a.item_id, b.item_id) == (ids[0], ids[1])
    assert c is None


def test_submit_counts_and_finishes_the_item_at_the_configured_number(make_project, people):
    project = make_project("q", "changeit", annotations_per_item=2)
    item = make_item(project)

    out1 = claim_and_submit(project, people[0], valid_result("box"), ms=1200)
    t1 = out1.annotation.task
    item.refresh_from_db()
    assert (out1.created, item.annotation_count, item.status) == (True, 1, "pending")
    # The same annotator is never offered the item again.
    assert queue_claim_next(project=project, user=people[0]) is None

    t2 = claim_and_submit(project, people[1], valid_result("box", 1), ms=0).annotation.task
    item.refresh_from_db()

    assert (t2.item_id, item.annotation_count, item.status) == (item.pk, 2, "annotated")
    assert queue_claim_next(project=project, user=people[2]) is None
    assert list(Annotation.objects.order_by("pk").values_list("annotator__username", "time_spent_ms")) == [
        ("ann0", 1200),
        ("ann1", 0),
    ]
    assert Task.objects.get(pk=t1.pk).status == "submitted"


def test_depth_first_items_closest_to_done_go_first(make_project, people):
    project = make_project("q", "changeit", annotations_per_item=3)
    ids = make_items_fast(project, 3)
    t = queue_claim_next(project=project, user=people[0])
    annotation_submit(task_id=t.pk, user=people[0], result=valid_result("box"))
    # people[1] is offered the partly annotated first item; people[0] the next fresh one.
    Item.objects.filter(pk=ids[1]).update(annotation_count=0)

    assert queue_claim_next(project=project, user=people[1]).item_id == ids[0]
    assert queue_claim_next(project=project, user=people[0]).item_id == ids[1]


@pytest.mark.parametrize(
    "protocol, expected", [("oscbench", 3), ("changeit", 1), ("status", 1), ("visualtrans", 1), ("m3verse", 1)]
)
def test_annotations_per_item_defaults_by_protocol(make_project, protocol, expected):
    assert make_project("q", protocol).annotations_per_item == expected
    assert Project.objects.get(slug="q").annotations_per_item == expected


def test_an_explicit_annotations_per_item_wins_over_the_protocol_default(make_project):
    assert make_project("q", "oscbench", annotations_per_item=1).annotations_per_item == 1
    assert make_project("r", "changeit", annotations_per_item=4).annotations_per_item == 4


def test_every_way_of_creating_a_project_gets_the_protocol_default(db):
    from django.contrib.admin.sites import site
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory

    from annotation.importing.items import project_for_import

    imported, created = project_for_import(slug="rated", protocol="oscbench", create=True)
    assert (created, imported.annotations_per_item) == (True, 3)
    got, _ = Project.objects.get_or_create(slug="boxes", defaults={"name": "b", "protocol": "changeit"})
    assert got.annotations_per_item == 1
    # The admin form leaves the field empty: save() fills in the protocol's default.
    # (the form of a superuser, who may set every field: annotation/admin_site.py OwnProjectsAdmin)
    request = RequestFactory().get("/")
    request.user = get_user_model().objects.create_superuser("root", "root@example.org", "pw")
    form_class = site._registry[Project].get_form(request)
    form = form_class(
        data={
            "slug": "admin-made",
            "name": "A",
            "protocol": "oscbench",
            "settings": "{}",
            "option_seed": 0,
            "description": "",
        }
    )
    assert form.is_valid(), form.errors
    assert form.save().annotations_per_item == 3
    assert Project.objects.get(slug="admin-made").annotations_per_item == 3


def test_skip_hands_the_item_to_others_but_not_back(make_project, people):
    project = make_project("q", "changeit")
    ids = make_items_fast(project, 2)
    task = queue_claim_next(project=project, user=people[0])

    skipped = task_skip(task_id=task.pk, user=people[0])

    assert skipped.status == "skipped"
    assert queue_claim_next(project=project, user=people[0]).item_id == ids[1]
    assert queue_claim_next(project=project, user=people[1]).item_id == ids[0]
    with pytest.raises(TaskConflict):
        annotation_submit(task_id=task.pk, user=people[0], result=valid_result("box"))
    assert Annotation.objects.count() == 0


def test_an_expired_lease_returns_the_item_to_the_queue(make_project, people):
    project = make_project("q", "changeit", settings={"lease_seconds": 60})
    item = make_item(project)
    now = timezone.now()
    old = queue_claim_next(project=project, user=people[0], now=now)
    assert queue_claim_next(project=project, user=people[1], now=now + timedelta(seconds=59)) is None

    new = queue_claim_next(project=project, user=people[1], now=now + timedelta(seconds=61))

    assert new.item_id == item.pk
    assert Task.objects.get(pk=old.pk).status == "expired"
    # The late submit of the first holder is refused; nothing is written.
    with pytest.raises(TaskConflict) as err:
        annotation_submit(task_id=old.pk, user=people[0], result=valid_result("box"), now=now + timedelta(seconds=62))
    assert "another annotator took the item" in str(err.value)
    with pytest.raises(TaskConflict):
        task_renew(task_id=old.pk, user=people[0])
    assert Annotation.objects.count() == 0
    item.refresh_from_db()
    assert item.annotation_count == 0


def test_an_expired_lease_nobody_took_can_still_be_renewed_and_submitted(make_project, people):
    project = make_project("q", "changeit", settings={"lease_seconds": 60})
    make_item(project)
    now = timezone.now()
    task = queue_claim_next(project=project, user=people[0], now=now)
    assert tasks_expire_stale(now=now + timedelta(seconds=61)) == 1

    renewed = task_renew(task_id=task.pk, user=people[0], now=now + timedelta(seconds=70))
    out = annotation_submit(task_id=task.pk, user=people[0], result=valid_result("box"))

    assert (renewed.status, renewed.lease_expires) == ("active", now + timedelta(seconds=130))
    assert out.created and Annotation.objects.count() == 1


def test_the_celery_task_expires_stale_leases(make_project, people):
    from annotation.tasks import expire_task_leases

    project = make_project("q", "changeit", settings={"lease_seconds": 60})
    make_items_fast(project, 2)
    fresh = queue_claim_next(project=project, user=people[1])
    stale = queue_claim_next(project=project, user=people[0], now=timezone.now() - timedelta(seconds=120))
    assert fresh.item_id != stale.item_id

    assert expire_task_leases.apply().get() == 1
    assert Task.objects.get(pk=stale.pk).status == "expired"
    assert Task.objects.get(pk=fresh.pk).status == "active"


def test_preloading_holds_at_most_two_tasks(make_project, people):
    project = make_project("q", "changeit")
    ids = make_items_fast(project, 4)
    t1 = queue_claim_next(project=project, user=people[0])
    t2 = queue_claim_next(project=project, user=people[0], exclude=(t1.pk,))

    assert (t1.item_id, t2.item_id) == (ids[0], ids[1])
    assert queue_claim_next(project=project, user=people[0], exclude=(t1.pk, t2.pk)) is None
    # A reload without exclude returns the oldest held task.
    assert queue_claim_next(project=project, user=people[0]).pk == t1.pk


def test_gold_items_are_mixed_in_do_not_count_and_go_to_everyone(make_project, people):
    project = make_project("q", "changeit", annotations_per_item=1, settings={"gold_share": 0.5})
    gold = make_item(
        project,
        "gold",
        is_gold=True,
        payload={**make_item.__globals__["changeit_payload"](), "bbox": [10, 20, 100, 80]},
    )
    normal = make_item(project, "normal")
    always, never = random.Random(), random.Random()
    always.random, never.random = (lambda: 0.0), (lambda: 0.99)

    t0 = queue_claim_next(project=project, user=people[0], rng=always)
    annotation_submit(task_id=t0.pk, user=people[0], result=valid_result("box"))
    t1 = queue_claim_next(project=project, user=people[1], rng=always)
    annotation_submit(task_id=t1.pk, user=people[1], result={"bbox": [300, 300, 10, 10], "state": "whole apple"})
    t2 = queue_claim_next(project=project, user=people[2], rng=never)

    assert (t0.item_id, t1.item_id, t2.item_id) == (gold.pk, gold.pk, normal.pk)
    gold.refresh_from_db()
    assert (gold.status, gold.annotation_count) == ("pending", 0)
    from annotation.selectors_agreement import project_agreement

    figures = project_agreement(project=project)
    rows = {r["annotator"]: r for r in figures["annotators"]}
    assert (rows["ann0"]["gold_accuracy"], rows["ann1"]["gold_accuracy"]) == (1.0, 0.0)
    # Gold stays pending for good, so progress counts it apart (agreement and overview alike).
    assert figures["gold_items"] == 1
    assert figures["status_counts"] == {"pending": 1, "annotated": 0, "verified": 0, "discarded": 0}  # "normal", held
    from annotation.overview import project_overview_data

    overview = project_overview_data(project=project, user=people[0])
    assert (overview["status_counts"], overview["gold_items"], overview["total"]) == (figures["status_counts"], 1, 2)


def test_auto_verify_when_annotators_agree(make_project, people):
    project = make_project("q", "changeit", annotations_per_item=2, settings={"auto_verify": True})
    agreeing, disagreeing = make_item(project, "a"), make_item(project, "b")
    for user, boxes in (
        (people[0], ([10, 20, 100, 80], [0, 0, 50, 50])),
        (people[1], ([12, 20, 100, 80], [300, 300, 50, 50])),
    ):
        for bbox in boxes:
            t = queue_claim_next(project=project, user=user)
            annotation_submit(task_id=t.pk, user=user, result={"bbox": bbox, "state": "peeled apple"})

    agreeing.refresh_from_db()
    disagreeing.refresh_from_db()
    assert (agreeing.status, agreeing.payload["bbox"], agreeing.payload["state"]) == (
        "verified",
        [11.0, 20.0, 100.0, 80.0],
        "peeled apple",
    )
    assert disagreeing.status == "annotated" and "bbox" not in disagreeing.payload
    review = Review.objects.get()
    assert (review.item_id, review.decision, review.reviewer) == (agreeing.pk, "auto", None)


def test_windowed_levels_still_hand_out_every_item_before_saying_done(make_project, people, monkeypatch):
    # Level 1 starts with items ann0 already did (waiting for a second annotator); with a window
    # of 2 they hide item 3 from the first pass, so ann0 gets the fresh items first, then item 3
    # from the last unbounded pass; only then is the queue empty for ann0.
    monkeypatch.setattr(rules, "CLAIM_WINDOW", 2)
    project = make_project("q", "changeit", annotations_per_item=2)
    ids = make_items_fast(project, 6)
    for _ in range(3):
        t = queue_claim_next(project=project, user=people[0])
        annotation_submit(task_id=t.pk, user=people[0], result=valid_result("box"))
    for expected in ids[:2]:
        t = queue_claim_next(project=project, user=people[1])
        assert t.item_id == expected
        task_skip(task_id=t.pk, user=people[1])
    # The window (items 0 and 1, both skipped) hides item 2 from ann1 too: a fresh item comes first.
    t = queue_claim_next(project=project, user=people[1])
    annotation_submit(task_id=t.pk, user=people[1], result=valid_result("box"))
    assert t.item_id == ids[3]

    got = []
    while (t := queue_claim_next(project=project, user=people[0])) is not None:
        got.append(t.item_id)
        annotation_submit(task_id=t.pk, user=people[0], result=valid_result("box"))

    assert got == [ids[4], ids[5], ids[3]]
    assert list(Item.objects.order_by("id").values_list("annotation_count", flat=True)) == [1, 1, 1, 2, 1, 1]


def test_a_held_task_whose_item_was_settled_is_dropped_on_the_next_claim(make_project, people):
    project = make_project("q", "changeit")
    ids = make_items_fast(project, 2)
    held = queue_claim_next(project=project, user=people[0])
    Item.objects.filter(pk=held.item_id).update(status="discarded")

    nxt = queue_claim_next(project=project, user=people[0])

    assert (held.item_id, nxt.item_id) == (ids[0], ids[1])
    assert Task.objects.get(pk=held.pk).status == "expired"


@pytest.mark.skipif(os.environ.get("DATABASE_PREPARE", "1") == "0", reason="prepared statements turned off")
def test_claim_and_submit_run_as_prepared_statements_with_their_generic_plan(make_project, people):
    # The hot path is the claim's lock (with the crowd quota's standing, for these password-less
    # accounts: queue/sql.py CLAIM_OPEN_SQL) and statement and two submit statements per call, each
    # prepared and planned once per connection: PostgreSQL must reuse the generic plan, never re-plan.
    from django.db import connection

    project = make_project("q", "changeit", annotations_per_item=1)
    make_items_fast(project, 3)
    for user in people[:3]:
        task = queue_claim_next(project=project, user=user)
        annotation_submit(task_id=task.pk, user=user, result=valid_result("box"))

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT left(btrim(statement, E' \\n'), 12), generic_plans, custom_plans FROM pg_prepared_statements "
            "ORDER BY 1"
        )
        plans = cursor.fetchall()
    assert plans == [
        ("SELECT p.set", 3, 0),  # a completing submit's thresholds (annotations_per_item=1: every one)
        ("SELECT pg_ad", 3, 0),
        ("WITH it AS (", 3, 0),
        ("WITH mine AS", 3, 0),
        ("WITH stored ", 3, 0),
    ]
    assert Annotation.objects.filter(item__project=project).count() == 3
