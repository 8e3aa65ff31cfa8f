"""The queue's rules through the ORM, for the embedded SQLite of the one-command demo.

SQLite has neither row locks nor the statements of sql.py; it serializes writers instead. Each
function here is the twin of one PostgreSQL statement (or of the code around it) and says which;
claim.py, hold.py and submit.py pick a twin when in_use(). Production runs PostgreSQL;
tests/annotation/test_queue_portable.py runs the same cases through both paths on PostgreSQL and
tests/annotation/test_demo_sqlite.py drives this path on SQLite.
"""
from __future__ import annotations

from datetime import datetime

from django.db import IntegrityError, connection, transaction
from django.db.models import Case, Exists, F, OuterRef, Q, Value, When

from ..models import Annotation, Item, ItemStatus, Project, Suggestion, Task, TaskStatus
from .errors import TaskNotFound
from .rules import MAX_HELD_TASKS, item_accepts_annotations, lease_until, renew_held


def in_use() -> bool:
    """Whether the queue runs these twins instead of the PostgreSQL statements."""
    return connection.vendor != "postgresql"


def claim(*, project: Project, user, now: datetime, exclude: tuple[int, ...], ignore: list[int],
          passes: tuple[tuple[int, bool, int | None], ...]):
    """Twin of claim._claim: the held-task hand-back, then sql.claim_next_sql (the passes given,
    from rules.claim_passes; the MAX_HELD_TASKS gate), then the lazy reclaim of a lapsed hold
    (sql.EXPIRE_LAPSED_HOLD_SQL) and the insert the one-active-task-per-item constraint guards.
    Returns the task, or None when nothing is left (never _AGAIN: there are no locks to give up)."""
    held = list(Task.objects.filter(annotator=user, status=TaskStatus.ACTIVE, item__project=project)
                .order_by("created_at", "pk").values_list("pk", "item_id"))
    for task_pk, item_pk in held:
        if task_pk in ignore:
            continue
        ignore.append(task_pk)
        item = Item.objects.get(pk=item_pk)
        item.project = project
        task = Task.objects.get(pk=task_pk)
        if not item_accepts_annotations(item):
            task.status = TaskStatus.EXPIRED
            task.save(update_fields=["status", "updated_at"])
            continue
        task.item = item
        return renew_held(task, item, now)
    if sum(1 for task_pk, _ in held if task_pk in exclude) >= MAX_HELD_TASKS:
        return None
    lease = lease_until(project, now)
    active = Task.objects.filter(item=OuterRef("pk"), status=TaskStatus.ACTIVE, lease_expires__gt=now)
    mine = Annotation.objects.filter(item=OuterRef("pk"), annotator=user)
    skipped = Task.objects.filter(item=OuterRef("pk"), annotator=user, status=TaskStatus.SKIPPED)
    passed: list[int] = []
    while True:
        for count, gold, window in passes:
            level = Item.objects.filter(project=project, status=ItemStatus.PENDING, annotation_count=count, is_gold=gold)
            if window is not None:
                level = Item.objects.filter(pk__in=list(level.order_by("pk").values_list("pk", flat=True)[:window]))
            item = (level.exclude(pk__in=passed).exclude(Exists(active)).exclude(Exists(mine)).exclude(Exists(skipped))
                    .order_by("pk").first())
            if item is not None:
                break
        else:
            return None
        item.project = project
        try:
            with transaction.atomic():
                Task.objects.filter(item=item, status=TaskStatus.ACTIVE, lease_expires__lte=now).update(
                    status=TaskStatus.EXPIRED, updated_at=now)
                return Task.objects.create(item=item, annotator=user, status=TaskStatus.ACTIVE, lease_expires=lease,
                                           draft={}, draft_version=0)
        except IntegrityError:  # held meanwhile (the one-active-task-per-item constraint)
            passed.append(item.pk)


def prior_ids(item_id: int, user, key: str | None) -> list[int]:
    """Twin of sql.PRIOR_IDS_SQL (and of LOCK_OWN_TASK_SQL's prior_ids): this annotator's
    annotation of the item, or theirs stored under the same Idempotency-Key."""
    mine = Q(item_id=item_id, annotator=user)
    if key is not None:
        mine |= Q(annotator=user, idempotency_key=key)
    return list(Annotation.objects.filter(mine).order_by("pk").values_list("pk", flat=True))


def lock_own_task(task_id: int, user, *, idempotency_key: str | None = None) -> tuple[Task, Item]:
    """Twin of sql.LOCK_OWN_TASK_SQL (hold.lock_own_task): the caller's task with its item and
    project, and prior_ids; 404 for other people's tasks. No locks: SQLite serializes writers."""
    task = Task.objects.select_related("item__project").filter(pk=task_id, annotator=user).first()
    if task is None:
        raise TaskNotFound("No such task.")
    task.prior_ids = prior_ids(task.item_id, user, idempotency_key)
    return task, task.item


def store(*, item: Item, user, task: Task, result: dict, ms: int, key: str | None, now: datetime,
          needed: int, suggestable: bool) -> tuple[int, int | None, str | None, bool]:
    """Twin of sql.STORE_SQL: store the annotation, mark the task submitted, count the annotation
    (never on a gold item). The same row back: (annotation id, count, item status, with_suggestion)."""
    suggested = suggestable and Suggestion.objects.filter(item=item, created_at__lte=now).exists()
    annotation = Annotation.objects.create(item=item, annotator=user, external_rater="", task=task, result=result,
                                           time_spent_ms=ms, idempotency_key=key, source="task",
                                           with_suggestion=suggested)
    Task.objects.filter(pk=task.pk).update(status=TaskStatus.SUBMITTED, updated_at=now)
    if item.is_gold:
        return annotation.pk, None, None, suggested
    Item.objects.filter(pk=item.pk).update(
        annotation_count=F("annotation_count") + 1, updated_at=now,
        status=Case(When(annotation_count__gte=needed - 1, then=Value(str(ItemStatus.ANNOTATED))), default=F("status")))
    count, status = Item.objects.filter(pk=item.pk).values_list("annotation_count", "status").get()
    return annotation.pk, count, status, suggested
