"""32 annotator threads against PostgreSQL until the queue is empty: exact counts, no duplicates.

Each thread has its own database connection (transactional test database) and closes it at
the end. Threads start together behind a barrier so claims really race.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict

import pytest
from django.db import connection
from django.db.models import Count

from annotation.models import Annotation, Item, Review, Role, Task
from annotation.queue import AlreadySubmitted, TaskConflict, annotation_submit, queue_claim_next
from annotation.services import review_decide
from tests.annotation.work_factories import make_items_fast, make_people

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

N_ITEMS = 60
PER_ITEM = 3


def run_threads(targets) -> list[BaseException]:
    barrier = threading.Barrier(len(targets))
    errors: list[BaseException] = []

    def wrap(fn):
        try:
            barrier.wait()
            fn()
        except BaseException as exc:  # surfaced by the test, never swallowed
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=wrap, args=(fn,)) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    return errors


def next_task_or_none(project, user):
    """Claim; when nothing is free but someone still holds a task, wait for it to be settled."""
    while True:
        task = queue_claim_next(project=project, user=user)
        if task is not None:
            return task
        if not Task.objects.filter(item__project=project, status="active").exists():
            return queue_claim_next(project=project, user=user)
        time.sleep(0.005)


def assert_queue_drained_exactly(project, n_people: int):
    counts = dict(Item.objects.filter(project=project).values_list("id", "annotation_count"))
    real = dict(
        Annotation.objects.filter(item__project=project).values("item").annotate(n=Count("id")).values_list("item", "n")
    )
    assert len(counts) == N_ITEMS
    assert set(counts.values()) == {PER_ITEM}
    assert real == counts
    assert set(Item.objects.filter(project=project).values_list("status", flat=True)) == {"annotated"}
    pairs = list(Annotation.objects.filter(item__project=project).values_list("item_id", "annotator_id"))
    assert len(pairs) == len(set(pairs)) == N_ITEMS * PER_ITEM
    assert not Task.objects.filter(item__project=project, status="active").exists()
    # Every annotation belongs to the submitted task it came from.
    assert Annotation.objects.filter(task__status="submitted").count() == N_ITEMS * PER_ITEM
    assert len({a for _, a in pairs}) <= n_people


def test_32_annotators_claim_and_submit_until_the_queue_is_empty(make_project):
    people = make_people(32)
    project = make_project("conc", "changeit", annotations_per_item=PER_ITEM)
    make_items_fast(project, N_ITEMS)
    created = Counter()
    lock = threading.Lock()

    def annotator(user):
        def run():
            while (task := next_task_or_none(project, user)) is not None:
                out = annotation_submit(
                    task_id=task.pk,
                    user=user,
                    result={"outcome": "cannot_determine"},
                    idempotency_key=f"{user.pk}:{task.pk}",
                )
                with lock:
                    created[out.created] += 1

        return run

    errors = run_threads([annotator(u) for u in people])

    assert errors == []
    assert created == {True: N_ITEMS * PER_ITEM}
    assert_queue_drained_exactly(project, 32)


def test_duplicated_submits_and_two_tabs_never_create_two_annotations(make_project):
    # 16 annotators with two tabs each (32 threads). A tab claims (the held task comes back to
    # both tabs), submits, retries the same submit with the same key, and races the other tab.
    # The keyed tab submits as the API does (the role read with the task it locks, the answer
    # read once that check passed: sql.SUBMIT_LOCK_SQL), the other as the services' callers do.
    people = make_people(16)
    project = make_project(
        "dup", "changeit", members={u: Role.ANNOTATOR for u in people}, annotations_per_item=PER_ITEM
    )
    make_items_fast(project, N_ITEMS)
    seen: dict[int, set[int]] = defaultdict(set)
    created = Counter()
    lock = threading.Lock()

    def tab(user, keyed: bool):
        def run():
            while (task := next_task_or_none(project, user)) is not None:
                key = f"{user.pk}:{task.pk}" if keyed else None
                api = {"role": Role.ANNOTATOR, "read_result": lambda: {"outcome": "nothing_to_label"}} if keyed else {}
                for _ in range(2):
                    out = annotation_submit(
                        task_id=task.pk,
                        user=user,
                        result=None if keyed else {"outcome": "nothing_to_label"},
                        idempotency_key=key,
                        **api,
                    )
                    with lock:
                        seen[task.pk].add(out.annotation.pk)
                        created[out.created] += 1

        return run

    errors = run_threads([tab(u, keyed) for u in people for keyed in (True, False)])

    assert errors == []
    assert created[True] == N_ITEMS * PER_ITEM
    assert created[False] >= N_ITEMS * PER_ITEM  # every task was submitted at least twice
    assert all(len(ids) == 1 for ids in seen.values())
    assert sorted(a for ids in seen.values() for a in ids) == sorted(
        Annotation.objects.filter(item__project=project).values_list("pk", flat=True)
    )
    assert_queue_drained_exactly(project, 16)


def test_two_tabs_racing_with_different_answers_keep_one_and_tell_the_other(make_project):
    # 16 annotators with two tabs each sharing the page's Idempotency-Key but answering
    # differently: one answer is stored, the other tab hears 409 (never a silent "Submitted").
    people = make_people(16)
    project = make_project("diff", "changeit", annotations_per_item=PER_ITEM)
    make_items_fast(project, N_ITEMS)
    outcomes: dict[int, list[tuple[str, int, dict]]] = defaultdict(list)
    lock = threading.Lock()

    def tab(user, answer: dict):
        def run():
            while (task := next_task_or_none(project, user)) is not None:
                key = f"page-{user.pk}-{task.pk}"
                try:
                    out = annotation_submit(task_id=task.pk, user=user, result=answer, idempotency_key=key)
                    seen = ("created" if out.created else "repeat", out.annotation.pk, out.annotation.result)
                except AlreadySubmitted as exc:
                    seen = ("conflict", exc.annotation.pk, exc.annotation.result)
                with lock:
                    outcomes[task.pk].append((seen[0], seen[1], seen[2]))

        return run

    answers = ({"outcome": "nothing_to_label"}, {"outcome": "cannot_determine"})
    errors = run_threads([tab(u, answer) for u in people for answer in answers])

    assert errors == []
    stored = dict(Annotation.objects.filter(item__project=project).values_list("task_id", "pk"))
    assert set(outcomes) == set(stored)
    for task_id, seen in outcomes.items():
        kinds = sorted(kind for kind, _pk, _result in seen)
        # One tab stored its answer; a tab that came back with the other answer got a conflict.
        assert kinds.count("created") == 1 and "repeat" not in kinds, (task_id, seen)
        assert {pk for _kind, pk, _result in seen} == {stored[task_id]}
        assert len({repr(result) for _kind, _pk, result in seen}) == 1
    assert_queue_drained_exactly(project, 16)


def test_a_claim_never_waits_for_a_held_item_while_it_keeps_another_locked(make_project):
    # ann0 holds two tasks (a page with a preloaded one). A reviewer settles the first item, and
    # a submit elsewhere holds the second item's lock. The claim must drop the first hold without
    # keeping its item locked while it waits for the second: otherwise whoever holds the second
    # item and then needs the first would deadlock with it.
    from django.db import transaction

    (user,) = make_people(1)
    project = make_project("hold", "changeit", annotations_per_item=2)
    first_id, second_id = make_items_fast(project, 2)
    t1 = queue_claim_next(project=project, user=user)
    t2 = queue_claim_next(project=project, user=user, exclude=(t1.pk,))
    assert (t1.item_id, t2.item_id) == (first_id, second_id)
    Item.objects.filter(pk=first_id).update(status="discarded")

    second_locked = threading.Event()
    seen: dict = {}

    def blocker():
        with transaction.atomic():
            Item.objects.select_for_update().get(pk=second_id)
            second_locked.set()
            # Wait until the claim is blocked on the second item, then try the first one.
            deadline = time.monotonic() + 30
            with connection.cursor() as cursor:
                while time.monotonic() < deadline:
                    cursor.execute("SELECT pg_stat_clear_snapshot()")  # a fresh view inside this transaction
                    cursor.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
                    )
                    if cursor.fetchone()[0]:
                        break
                    time.sleep(0.01)
                seen["claim_waiting"] = time.monotonic() < deadline
                cursor.execute("SELECT id FROM annotation_item WHERE id = %s FOR UPDATE NOWAIT", [first_id])
                seen["first_free"] = cursor.fetchall() == [(first_id,)]

    def claimer():
        second_locked.wait(10)
        seen["task"] = queue_claim_next(project=project, user=user)

    errors = run_threads([blocker, claimer])

    assert errors == []
    assert seen["claim_waiting"] and seen["first_free"]
    assert seen["task"].pk == t2.pk
    assert Task.objects.get(pk=t1.pk).status == "expired"


def test_two_reviewers_racing_on_one_item_make_one_decision(make_project):
    a, b, r1, r2 = make_people(4)
    project = make_project("race", "changeit", annotations_per_item=2)
    (item_id,) = make_items_fast(project, 1)
    for user in (a, b):
        task = queue_claim_next(project=project, user=user)
        annotation_submit(task_id=task.pk, user=user, result={"outcome": "cannot_determine"})
    outcomes = []

    def decide(reviewer, decision):
        def run():
            try:
                review_decide(item_id=item_id, reviewer=reviewer, decision=decision)
                outcomes.append(decision)
            except TaskConflict:
                outcomes.append("conflict")

        return run

    assert run_threads([decide(r1, "discard"), decide(r2, "discard")]) == []

    assert sorted(outcomes) == ["conflict", "discard"]
    assert Review.objects.filter(item_id=item_id).count() == 1
    assert Item.objects.get(pk=item_id).status == "discarded"


def test_16_annotators_all_wanting_one_held_gold_item_each_answer_it_once(make_project):
    """One gold item, held by someone who left (a live 10-minute hold), and 16 annotators whose
    every draw asks for gold: the hold is taken over again and again as they race (gold.py), each
    answers the gold item exactly once, every ordinary item gets exactly its one annotation, and
    the item never has two live holds."""
    import random

    leaver, *people = make_people(17)
    project = make_project("gold-race", "changeit", annotations_per_item=1, settings={"gold_share": 1.0})
    gold_pk, *_ = make_items_fast(project, 33)
    Item.objects.filter(pk=gold_pk).update(is_gold=True)
    always = random.Random()
    always.random = lambda: 0.0
    held = queue_claim_next(project=project, user=leaver, rng=always)
    assert held.item_id == gold_pk
    result = {"outcome": "cannot_determine"}

    def annotator(user):
        def run():
            for _ in range(500):  # bounded: a stuck loop fails the test instead of hanging it
                task = queue_claim_next(project=project, user=user, rng=always)
                if task is None:
                    if (
                        Annotation.objects.filter(annotator=user, item_id=gold_pk).exists()
                        and not Task.objects.filter(item__project=project, status="active")
                        .exclude(annotator=leaver)
                        .exists()
                    ):
                        return
                    time.sleep(0.005)
                    continue
                annotation_submit(task_id=task.pk, user=user, result=result)
            raise AssertionError(f"{user} did not finish")

        return run

    errors = run_threads([annotator(u) for u in people])

    assert errors == []
    gold_answers = Counter(Annotation.objects.filter(item_id=gold_pk).values_list("annotator_id", flat=True))
    assert gold_answers == Counter({u.pk: 1 for u in people})
    per_item = Counter(
        Annotation.objects.filter(item__project=project, item__is_gold=False).values_list("item_id", flat=True)
    )
    assert len(per_item) == 32 and set(per_item.values()) == {1}
    assert set(Item.objects.filter(project=project, is_gold=False).values_list("annotation_count", flat=True)) == {1}
    assert Task.objects.get(pk=held.pk).status == "expired"
    assert Task.objects.filter(item_id=gold_pk, status="active").count() == 0
