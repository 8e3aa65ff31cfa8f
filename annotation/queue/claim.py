"""Claiming: the task an annotator should work on now (their active one, else a new one)."""

from __future__ import annotations

import random
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.numeric import Int8

from .. import db, selectors
from ..models import Item, Project, Task, TaskStatus
from ..project_setup import project_setting
from . import quota, sql
from .errors import TaskNotFound
from .gold import gold_take_over
from .progress import progress_figures, progress_params
from .rules import claim_lock, claim_passes, item_accepts_annotations, lease_until, renew_active
from .task_ops import require_role

_AGAIN = object()
_CAPPED = object()  # the user reached the project's annotator_cap: no new claim (quota.cap_left)
_LIMITED = object()  # a crowd participant's study allows no new claim (quota.claim_limit)


class _Claim:
    """One queue_claim_next: what its transactions share. The first statement of each is the
    claim's per-user lock; in the first it also reads the participant's standing
    (quota.claim_limit), and for the API the project by its slug with the caller's role in it
    (sql.CLAIM_OPEN_PROJECT_SQL: one statement where there were three)."""

    def __init__(self, *, user, now, exclude, rng, project=None, slug=None, role=None):
        self.user, self.now, self.exclude, self.rng = user, now, exclude, rng
        self.project, self.slug, self.role = project, slug, role
        self.opened = False
        self.limit: quota.ClaimLimit | None = None
        self.want_gold = False
        self.cap: int | None = None
        self.cap_of_progress = 0  # selectors.PROGRESS_CAP, as the claim's statement counted to

    def open(self) -> bool:
        """The transaction's first statement; False when a study allows no new claim (self.limit)."""
        if self.opened:
            claim_lock(user=self.user)
            return True
        self.opened = True
        user, now = self.user, self.now
        params = {"user": Int8(user.pk), "now": now, "crowd": quota.is_crowd(user)}
        if self.project is None:  # the API's claim: the project by its slug, the caller's role in it
            found = db.rows(sql.CLAIM_OPEN_PROJECT_SQL, {**params, "slug": self.slug})
            if not found:
                raise TaskNotFound("No such project.")
            ((*row,),) = found
            self.project = db.instance(Project, row[: sql.N_PROJECT_COLUMNS])
            require_role(user, self.project, row[sql.N_PROJECT_COLUMNS], self.role)
        else:
            ((*row,),) = db.rows(sql.CLAIM_OPEN_SQL, {**params, "project": Int8(self.project.pk)})
        project = self.project
        self.limit = quota.limit_of(row[-sql.N_LIMIT_COLUMNS :], now)  # crowd-study participants only
        if self.limit is not None and self.limit.new_claims > 0:
            # That read's snapshot predates the wait for the lock: a claim of the same participant
            # that held it may have taken their last task since. Read again under the lock (a
            # statement of its own, so a snapshot of its own): crowd participants only.
            self.limit = quota.claim_limit(project=self.project, user=user, now=now)
        if self.limit is not None and self.limit.new_claims <= 0:
            return False
        share = project_setting(project.settings, "gold_share", 0.0, project=project.slug)
        self.want_gold = (self.rng or random).random() < share
        self.cap = quota.annotator_cap(project)
        return True

    def progress(self, task: Task, figures) -> Task:
        """The caller's progress as the claim's statement read it for `task` (selectors.task_view)."""
        if figures[0] is not None:
            task.claim_progress = progress_figures(*figures, self.cap_of_progress)
        return task


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
    return _claim_next(_Claim(project=project, user=user, now=now or timezone.now(), exclude=exclude, rng=rng))


def queue_claim_for(
    *,
    slug: str,
    user,
    role: str,
    exclude: tuple[int, ...] = (),
    now: datetime | None = None,
    rng: random.Random | None = None,
) -> tuple[Project, Task | None]:
    """The API's claim: queue_claim_next in the project named by `slug`, which the claim's first
    statement reads with the caller's role in it (TaskNotFound for no such project or no role
    there, PermissionDenied for a lower one: as annotation/permissions.py get_project_for)."""
    claim = _Claim(slug=slug, role=role, user=user, now=now or timezone.now(), exclude=exclude, rng=rng)
    task = _claim_next(claim)
    return claim.project, task


def _claim_next(ctx: _Claim) -> Task | None:
    user, now, exclude = ctx.user, ctx.now, ctx.exclude
    ignore: list[int] = list(exclude)  # active tasks not to hand out again: shown by the caller, or gone
    capped: list[bool] = []

    def claim(gold: bool | None) -> Task | None:
        """gold: the gold pass (True), the ordinary passes (False), or as the draw says (None: the
        first claim, in whose first transaction the draw is made)."""
        while (task := _claim(ctx, gold=gold, ignore=ignore)) is _AGAIN:
            pass
        if task is _LIMITED:
            keep = ctx.limit.keep_active
            return quota.active_task(project=ctx.project, user=user, now=now, exclude=exclude) if keep else None
        if task is _CAPPED:  # only the user's active tasks are handed back
            capped.append(True)
            return quota.active_task(project=ctx.project, user=user, now=now, exclude=exclude)
        return task

    task = claim(None)
    if ctx.limit is not None and ctx.limit.new_claims <= 0:
        return task
    if ctx.want_gold:
        # Gold first: a free gold item, else one in someone else's task (gold.py: one annotator's
        # task never blocks a gold item), else the draw falls through to the ordinary items.
        if task is None and not capped:
            task = gold_take_over(project=ctx.project, user=user, now=now, exclude=exclude)
        if task is not None:
            return task
        return claim(False)
    return task


@transaction.atomic
def _claim(ctx: _Claim, *, gold: bool | None, ignore: list[int]):
    """One transaction of queue_claim_next; _AGAIN when it must commit and start over.

    The active-task path waits for an item lock. It does so only while this transaction has no
    other item lock: otherwise two claims (two tabs, or a claim and a submit) could each lock one
    item and wait for the other's. When a second wait would be needed, what was done so far (tasks
    found gone or expired) is committed, which releases every lock, and a fresh transaction goes on.
    """
    if not ctx.open():
        return _LIMITED
    project, user, now, exclude, cap = ctx.project, ctx.user, ctx.now, ctx.exclude, ctx.cap
    if cap is not None and quota.cap_left(project=project, user=user, cap=cap) <= 0:
        return _CAPPED
    gold = ctx.want_gold if gold is None else gold
    passes = tuple(claim_passes(project, want_gold=True)[:1] if gold else claim_passes(project, want_gold=False))
    lease = lease_until(project, now)
    ctx.cap_of_progress = selectors.PROGRESS_CAP  # read per claim, as selectors.annotator_progress reads it
    figures = progress_params(project=project, user=user, cap=ctx.cap_of_progress)
    passed: list[int] = []  # items locked but not claimable
    has_item_locks = False
    while True:
        (row,) = db.rows(
            sql.claim_next_sql(passes),
            {
                **figures,
                "now": now,
                "lease": lease,
                "passed": sql.ids(passed),
                "ignore": sql.ids(ignore),
                "shown": sql.ids(exclude),
            },
        )
        active_ids, active_items, task_pk, *item_row = row
        item_row, figures_read = item_row[: sql.N_ITEM_COLUMNS + 1], item_row[sql.N_ITEM_COLUMNS + 1 :]
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
        inserted_here = task_pk is not None  # by the statement, which then read the progress too
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
        return ctx.progress(task, figures_read) if inserted_here else task
