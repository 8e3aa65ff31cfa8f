"""The operations on a claimed task: renew its lease, autosave its draft, skip it; expire the tasks
whose lease nobody renewed."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone
from psycopg.types.numeric import Int8

from .. import db
from ..models import ROLE_RANK, Item, Project, Task, TaskStatus
from . import sql
from .errors import TaskConflict, TaskNotFound
from .rules import item_accepts_annotations, lease_until

_INT8 = range(-(2**63), 2**63)


def lock_own_task(
    task_id: int, user, *, idempotency_key: str | None = None, role: str | None = None, priors: bool = True
) -> tuple[Task, Item]:
    """Lock the task's item, then the task (the global lock order); 404 for other people's tasks.

    With `priors` the task comes with `prior_ids`: what makes a submit a repeat
    (sql.LOCK_OWN_TASK_SQL says which); renew, autosave and skip need none. With `role`, the same
    statement reads the caller's role in the task's project (sql.SUBMIT_LOCK_SQL), checked as
    annotation.permissions.require_role does: 404 without a role there, 403 with a lower one. The
    API checks the caller so, in its one read of the task.
    """
    if task_id not in _INT8:
        raise TaskNotFound("No such task.")  # no row can have it (the ORM answers such lookups so, too)
    statement = sql.lock_own_task_sql(priors=priors, role=role is not None)
    params = {"task": Int8(task_id), "user": Int8(user.pk)}
    if priors:
        params["key"] = idempotency_key
    rows = db.rows(statement, params)
    if not rows:
        raise TaskNotFound("No such task.")
    (row,) = rows
    n, m = sql.N_ITEM_COLUMNS, sql.N_ITEM_COLUMNS + sql.N_PROJECT_COLUMNS
    item = db.instance(Item, row[:n])
    item.project = db.instance(Project, row[n:m])
    if role is not None:
        *row, have = row
        require_role(user, item.project, have, role)
    if priors:
        *row, prior_ids = row
    task = db.instance(Task, row[m:])
    if priors:
        task.prior_ids = prior_ids
    task.item = item
    return task, item


def require_role(user, project: Project, have: str | None, role: str) -> None:
    """annotation.permissions.require_role on the role read with the task or the project (superusers
    act as admin; the claim's statement reads it too, claim.py)."""
    if user.is_superuser:
        return
    if have is None:
        raise TaskNotFound("No such project.")
    if ROLE_RANK[have] < ROLE_RANK[role]:
        raise PermissionDenied(f"This needs the {role} role in project {project.slug}.")


def _keep_active(task: Task, item: Item, now: datetime) -> None:
    """Extend the lease; an expired task comes back if nobody took the item meanwhile. A gold
    task whose item someone else has taken over stays open to its annotator (gold.py): its clock
    runs on, the other task stays active, and its answer is still taken."""
    if task.status == TaskStatus.ACTIVE:
        task.lease_expires = lease_until(item.project, now)
        return
    if task.status == TaskStatus.EXPIRED:
        taken = Task.objects.filter(item=item, status=TaskStatus.ACTIVE).exclude(pk=task.pk).exists()
        if not taken and item_accepts_annotations(item):
            task.status = TaskStatus.ACTIVE
            task.lease_expires = lease_until(item.project, now)
            return
        if item.is_gold and item_accepts_annotations(item):
            task.lease_expires = lease_until(item.project, now)
            return
        raise TaskConflict(
            "Your lease on this task expired and the item went to someone else. Your draft is kept "
            "on this task, but it can no longer be submitted; load the next task."
        )
    if task.status == TaskStatus.SUBMITTED:
        raise TaskConflict("This task was already submitted.")
    raise TaskConflict("You skipped this task; load the next one.")


def _store(task: Task, now: datetime, *, draft: bool = False) -> None:
    """Write the task back (its row is locked): status and lease, with `draft` the draft and its
    version too; one prepared statement (sql.TASK_KEEP_SQL / TASK_DRAFT_SQL)."""
    task.updated_at = now
    params = {"task": Int8(task.pk), "status": task.status, "lease": task.lease_expires, "now": now}
    if draft:
        params.update(draft=json.dumps(task.draft), version=task.draft_version)
    db.rows(sql.TASK_DRAFT_SQL if draft else sql.TASK_KEEP_SQL, params)


@transaction.atomic
def task_renew(*, task_id: int, user, now: datetime | None = None, role: str | None = None) -> Task:
    """Renew the task's lease. `role`: as lock_own_task's (the API's check, with the one read)."""
    now = now or timezone.now()
    task, item = lock_own_task(task_id, user, role=role, priors=False)
    _keep_active(task, item, now)
    _store(task, now)
    return task


@transaction.atomic
def task_save_draft(
    *,
    task_id: int,
    user,
    draft: dict | None = None,
    version: int | None = None,
    now: datetime | None = None,
    role: str | None = None,
    read_input: Callable[[], tuple[dict, int]] | None = None,
) -> Task:
    """Autosave. `version` is the draft version the client last saw; the save makes it version + 1.

    A stale version gets TaskConflict, except a replay of the save that made the current version
    (same draft at version + 1), which returns the task unchanged.

    One read of the task, in the save's transaction. For the API: `role` as lock_own_task's, and
    `read_input`, in place of `draft` and `version`, called once that check passed (the body is
    read then, so someone else's task is a 404 whatever the body says; it may raise ResultInvalid,
    and nothing is written).
    """
    now = now or timezone.now()
    task, item = lock_own_task(task_id, user, role=role, priors=False)
    if read_input is not None:
        draft, version = read_input()
    if version + 1 == task.draft_version and json.loads(json.dumps(draft)) == task.draft:
        # The same save replayed (a client retry after the first one committed but its answer
        # was lost): answer as the first time did, keeping the task active as any save does.
        if task.status == TaskStatus.ACTIVE:
            _keep_active(task, item, now)
            _store(task, now)
        return task
    if version != task.draft_version:
        raise TaskConflict(
            f"This draft was saved from another tab or window in the meantime (version {task.draft_version}, "
            f"yours is based on version {version}). Reload the task to continue from the latest draft.",
            version=task.draft_version,
            draft=task.draft,
        )
    _keep_active(task, item, now)
    task.draft = draft
    task.draft_version += 1
    _store(task, now, draft=True)
    return task


def task_save_draft_plain(
    *, task_id: int, user, draft: dict, version: int, role: str, now: datetime | None = None
) -> tuple[int, datetime] | None:
    """The API's autosave in its plain case, in one statement outside any transaction of its own
    (sql.draft_save_sql): the caller's active task, saved at the version the client saw, its
    lease renewed; the caller's role checked as lock_own_task checks it. Returns (the new version,
    the lease) once saved; None when anything is not plain (another's task, a role too low, a
    stale version or a replay, a task no longer active, a lease setting the statement does not
    read), having written nothing: the caller then runs task_save_draft, which answers each of
    those as always. `draft` and `version` must be what the API's input serializer accepts."""
    if task_id not in _INT8:
        return None
    now = now or timezone.now()
    found = db.rows(
        sql.draft_save_sql(role),
        {
            "task": Int8(task_id),
            "user": Int8(user.pk),
            "superuser": bool(user.is_superuser),
            "draft": json.dumps(draft),
            "version": Int8(version),
            "now": now,
        },
    )
    if not found:
        return None
    ((saved, seconds),) = found
    return saved, now + timedelta(seconds=seconds)  # the lease written: lease_until with those seconds


@transaction.atomic
def task_skip(*, task_id: int, user, role: str | None = None, now: datetime | None = None) -> Task:
    now = now or timezone.now()
    task, _item = lock_own_task(task_id, user, role=role, priors=False)
    if task.status == TaskStatus.SKIPPED:
        return task
    if task.status == TaskStatus.SUBMITTED:
        raise TaskConflict("This task was already submitted; it cannot be skipped.")
    task.status = TaskStatus.SKIPPED
    _store(task, now)
    return task


@transaction.atomic
def tasks_expire_stale(*, now: datetime | None = None) -> int:
    """Mark every active task whose lease ran out as expired (claims also do this lazily per item)."""
    now = now or timezone.now()
    return Task.objects.filter(status=TaskStatus.ACTIVE, lease_expires__lte=now).update(
        status=TaskStatus.EXPIRED, updated_at=now
    )
