"""Claiming: the task an annotator should work on now (their active one, else a new one)."""

from __future__ import annotations

import random
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.numeric import Int8

from .. import db
from ..models import Item, Project, Task, TaskStatus
from ..project_setup import project_setting
from . import quota, sql
from .gold import gold_take_over
from .rules import claim_lock, claim_passes, item_accepts_annotations, lease_until, renew_active

_AGAIN = object()
_CAPPED = object()  # the user reached the project's annotator_cap: no new claim (quota.cap_left)


def queue_claim_next(
    *,
    project: Project,
    user,
    now: datetime | None = None,
    exclude: tuple[int, ...] = (),
    rng: random.Random | None = None,
) -> Task | None:
    """The task this user should work on now: their active one, else a newly claimed item.

    `exclude` lists task ids the caller already shows (a page preloading the next task); a user
    has at most rules.MAX_ACTIVE_TASKS active at once. Returns None when nothing is left for this user.
    """
    now = now or timezone.now()
    limit = quota.claim_limit(project=project, user=user, now=now)  # crowd-study participants only
    if limit is not None and limit.new_claims <= 0:
        return quota.active_task(project=project, user=user, now=now, exclude=exclude) if limit.keep_active else None
    want_gold = (rng or random).random() < project_setting(project.settings, "gold_share", 0.0, project=project.slug)
    ignore: list[int] = list(exclude)  # active tasks not to hand out again: shown by the caller, or gone
    cap, capped = quota.annotator_cap(project), []

    def claim(passes: tuple) -> Task | None:
        while (
            task := _claim(project=project, user=user, now=now, exclude=exclude, ignore=ignore, passes=passes, cap=cap)
        ) is _AGAIN:
            pass
        if task is _CAPPED:  # only the user's active tasks are handed back
            capped.append(True)
            return quota.active_task(project=project, user=user, now=now, exclude=exclude)
        return task

    if want_gold:
        # Gold first: a free gold item, else one in someone else's task (gold.py: one annotator's
        # task never blocks a gold item), else the draw falls through to the ordinary items.
        task = claim(tuple(claim_passes(project, want_gold=True)[:1]))
        if task is None and not capped:
            task = gold_take_over(project=project, user=user, now=now, exclude=exclude)
        if task is not None:
            return task
    return claim(tuple(claim_passes(project, want_gold=False)))


@transaction.atomic
def _claim(
    *,
    project: Project,
    user,
    now: datetime,
    exclude: tuple[int, ...],
    ignore: list[int],
    passes: tuple[tuple[int, bool, int | None], ...],
    cap: int | None = None,
):
    """One transaction of queue_claim_next; _AGAIN when it must commit and start over.

    The active-task path waits for an item lock. It does so only while this transaction has no
    other item lock: otherwise two claims (two tabs, or a claim and a submit) could each lock one
    item and wait for the other's. When a second wait would be needed, what was done so far (tasks
    found gone or expired) is committed, which releases every lock, and a fresh transaction goes on.
    """
    claim_lock(user=user)
    if cap is not None and quota.cap_left(project=project, user=user, cap=cap) <= 0:
        return _CAPPED
    lease = lease_until(project, now)
    passed: list[int] = []  # items locked but not claimable
    has_item_locks = False
    while True:
        (row,) = db.rows(
            sql.claim_next_sql(passes),
            {
                "project": Int8(project.pk),
                "user": Int8(user.pk),
                "now": now,
                "lease": lease,
                "needed": project.annotations_per_item,
                "passed": sql.ids(passed),
                "ignore": sql.ids(ignore),
                "shown": sql.ids(exclude),
            },
        )
        active_ids, active_items, task_pk, *item_row = row
        active = [(t, i) for t, i in zip(active_ids or (), active_items or ()) if t not in ignore]
        if active:
            # The caller has an active task it does not show (a reload, a second tab): hand that back.
            for task_pk, item_pk in active:
                if has_item_locks:
                    return _AGAIN
                ignore.append(task_pk)
                has_item_locks = True
                item = Item.objects.select_for_update().get(pk=item_pk)
                item.project = project
                task = Task.objects.select_for_update().get(pk=task_pk)
                if task.status != TaskStatus.ACTIVE:  # reclaimed by someone while we waited
                    continue
                if not item_accepts_annotations(item):  # a reviewer settled the item meanwhile
                    task.status = TaskStatus.EXPIRED
                    task.save(update_fields=["status", "updated_at"])
                    continue
                task.item = item
                return renew_active(task, item, now)
            continue  # none of them stands: claim (the statement now ignores them)
        if item_row[0] is None:  # nothing left, or the caller already shows MAX_ACTIVE_TASKS
            return None
        item, active_before = db.instance(Item, item_row[:-1]), item_row[-1]
        item.project = project
        has_item_locks = True  # the statement locked this item
        if task_pk is None:
            if not (active_before and item_accepts_annotations(item)):
                passed.append(item.pk)  # changed or renewed between our snapshot and our lock
                continue
            # Lazy reclaim: a task whose lease ran out gives the item back to the queue.
            with connection.cursor() as cursor:
                cursor.execute(sql.EXPIRE_LAPSED_TASK_SQL, [now, item.pk, now])
                cursor.execute(sql.INSERT_TASK_SQL, {"item": item.pk, "user": user.pk, "lease": lease, "now": now})
                inserted = cursor.fetchone()
            if inserted is None:  # renewed by its annotator between our snapshot and our lock
                passed.append(item.pk)
                continue
            task_pk = inserted[0]
        task = Task(
            pk=task_pk,
            item=item,
            annotator=user,
            status=TaskStatus.ACTIVE,
            lease_expires=lease,
            draft={},
            draft_version=0,
            created_at=now,
            updated_at=now,
        )
        task._state.adding = False
        return task
