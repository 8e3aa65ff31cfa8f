"""Claiming: the task an annotator should work on now (the one they hold, else a new one)."""

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
from .rules import claim_lock, claim_passes, item_accepts_annotations, lease_until, renew_held

_AGAIN = object()


def queue_claim_next(
    *,
    project: Project,
    user,
    now: datetime | None = None,
    exclude: tuple[int, ...] = (),
    rng: random.Random | None = None,
) -> Task | None:
    """The task this user should work on now: the one they hold, else a newly claimed item.

    `exclude` lists task ids the caller already shows (a page preloading the next task); a user
    holds at most rules.MAX_HELD_TASKS at once. Returns None when nothing is left for this user.
    """
    now = now or timezone.now()
    limit = quota.claim_limit(project=project, user=user, now=now)  # crowd-study participants only
    if limit is not None and limit.new_claims <= 0:
        return quota.held_task(project=project, user=user, now=now, exclude=exclude) if limit.keep_holds else None
    want_gold = (rng or random).random() < project_setting(project.settings, "gold_share", 0.0, project=project.slug)
    ignore: list[int] = list(exclude)  # holds not to hand out again: shown by the caller, or gone

    def claim(passes: tuple) -> Task | None:
        while (
            task := _claim(project=project, user=user, now=now, exclude=exclude, ignore=ignore, passes=passes)
        ) is _AGAIN:
            pass
        return task

    if want_gold:
        # Gold first: a free gold item, else one someone else holds (gold.py: one holder never
        # blocks a gold item), else the draw falls through to the ordinary items.
        task = claim(tuple(claim_passes(project, want_gold=True)[:1]))
        if task is None:
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
):
    """One transaction of queue_claim_next; _AGAIN when it must commit and start over.

    The held-task path waits for an item lock. It does so only while this transaction holds no
    other item lock: otherwise two claims (two tabs, or a claim and a submit) could each hold one
    item and wait for the other's. When a second wait would be needed, what was done so far (holds
    found gone or expired) is committed, which releases every lock, and a fresh transaction goes on.
    """
    claim_lock(user=user)
    lease = lease_until(project, now)
    passed: list[int] = []  # items locked but not claimable
    holds_item_locks = False
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
        held_ids, held_items, task_pk, *item_row = row
        held = [(t, i) for t, i in zip(held_ids or (), held_items or ()) if t not in ignore]
        if held:
            # The caller holds a task it does not show (a reload, a second tab): hand that back.
            for task_pk, item_pk in held:
                if holds_item_locks:
                    return _AGAIN
                ignore.append(task_pk)
                holds_item_locks = True
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
                return renew_held(task, item, now)
            continue  # none of them stands: claim (the statement now ignores them)
        if item_row[0] is None:  # nothing left, or the caller already shows MAX_HELD_TASKS
            return None
        item, held_before = db.instance(Item, item_row[:-1]), item_row[-1]
        item.project = project
        holds_item_locks = True  # the statement locked this item
        if task_pk is None:
            if not (held_before and item_accepts_annotations(item)):
                passed.append(item.pk)  # changed or renewed between our snapshot and our lock
                continue
            # Lazy reclaim: a hold whose lease ran out gives the item back to the queue.
            with connection.cursor() as cursor:
                cursor.execute(sql.EXPIRE_LAPSED_HOLD_SQL, [now, item.pk, now])
                cursor.execute(sql.INSERT_TASK_SQL, {"item": item.pk, "user": user.pk, "lease": lease, "now": now})
                inserted = cursor.fetchone()
            if inserted is None:  # renewed by its holder between our snapshot and our lock
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
