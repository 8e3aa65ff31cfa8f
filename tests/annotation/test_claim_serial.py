"""Two claims by one user at once (two tabs, a script claiming in parallel) on the real PostgreSQL.

Claims take items with FOR UPDATE SKIP LOCKED. Without serializing one user's claims, the second
claim skipped the item the first had locked and answered "nothing left" while an item was still
there for them. The first claim is stopped inside a real function with the last item locked and its
transaction open; the second runs until it commits or waits on a lock (tests/annotation/db_race.py).
"""

from __future__ import annotations

import types

import pytest

from annotation import db
from annotation.models import Role, Task, TaskStatus
from annotation.queue import claim as claim_module
from annotation.queue import queue_claim_next
from tests.annotation.db_race import race
from tests.annotation.work_factories import make_items_fast, make_people

pytestmark = pytest.mark.django_db(transaction=True)


def stop_after_the_claim_statement(monkeypatch):
    """claim.py's `db` with `instance` (called right after the statement locked the claimed item)
    wrapped by the race; everything else is the real module."""
    stand_in = types.SimpleNamespace(rows=db.rows, instance=db.instance)
    monkeypatch.setattr(claim_module, "db", stand_in)
    return stand_in


def test_a_second_claim_by_the_same_user_waits_and_gets_the_task_the_first_took(make_project, monkeypatch):
    (annotator,) = make_people(1)
    project = make_project("serial", "status", annotations_per_item=1, members={annotator: Role.ANNOTATOR})
    (item_id,) = make_items_fast(project, 1)

    how, first, second = race(
        monkeypatch,
        stop_in=stop_after_the_claim_statement(monkeypatch),
        at="instance",
        first=lambda: queue_claim_next(project=project, user=annotator),
        second=lambda: queue_claim_next(project=project, user=annotator),
    )

    assert (first.error, second.error) == (None, None)
    # Without the user's claim lock the second claim skipped the locked item and committed "nothing
    # left" (None) while the first still held it.
    assert how == "blocked"
    assert first.result is not None and second.result is not None
    assert first.result.item_id == second.result.item_id == item_id
    assert second.result.pk == first.result.pk  # handed back as the hold it is, not a second task
    assert list(Task.objects.filter(annotator=annotator).values_list("status", flat=True)) == [TaskStatus.ACTIVE]


def test_claims_by_different_users_do_not_wait_for_each_other(make_project, monkeypatch):
    a, b = make_people(2)
    project = make_project("parallel", "status", annotations_per_item=1, members={a: Role.ANNOTATOR, b: Role.ANNOTATOR})
    make_items_fast(project, 2)

    how, first, second = race(
        monkeypatch,
        stop_in=stop_after_the_claim_statement(monkeypatch),
        at="instance",
        first=lambda: queue_claim_next(project=project, user=a),
        second=lambda: queue_claim_next(project=project, user=b),
    )

    assert (first.error, second.error) == (None, None)
    assert how == "committed"  # b took the other item while a's claim was stopped with its item locked
    assert first.result.item_id != second.result.item_id
