"""Gold items are never blocked by one annotator's task.

A gold item has a known answer and takes one answer from everyone (it is never counted or
completed), so an active task on it protects nothing but its annotator's own work. When a claim's
draw asks for gold and every gold item this annotator may still answer is in someone else's active
task (say a crowd participant who closed the tab, keeping a study's only gold item for the rest of
the 10-minute lease), the claim takes over the task that was renewed longest ago: that task is
ended (expired) and a new task on the item is created for the claimer. The one-active-task-per-item
constraint stays as it is.

Nobody loses work by this: a gold task whose item went to someone else stays open to its annotator
(task_ops._keep_active renews its clock without making it active again, submit stores the answer),
and the database still stores at most one answer per annotator and item. A claimer never takes over
a gold item they had a task on before (theirs would otherwise come back to them twice), nor
one their crowd account in another study of the project had (the same person, sql.SIBLINGS).

Rare (only when gold is wanted and none is free), so it is one ORM query (two more for a crowd
account), not a statement of sql.py.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef, Subquery

from ..models import Annotation, Item, ItemStatus, Project, Task, TaskStatus
from .quota import annotator_cap, cap_left, sibling_accounts
from .rules import MAX_ACTIVE_TASKS, claim_lock, lease_until


@transaction.atomic
def gold_take_over(*, project: Project, user, now: datetime, exclude: tuple[int, ...] = ()) -> Task | None:
    """A task for `user` on a gold item in someone else's active task (the stalest first), or None
    when there is none, or the caller already shows MAX_ACTIVE_TASKS. The item is locked first (SKIP
    LOCKED: an item whose annotator is saving or submitting right now is left alone), then that
    task ends.
    Serialized with the user's other claims (rules.claim_lock)."""
    claim_lock(user=user)
    # The project's cap, read again under the lock: another claim of the user's may have taken the
    # last place since this claim's own check.
    if (cap := annotator_cap(project)) is not None and cap_left(project=project, user=user, cap=cap) <= 0:
        return None
    if (
        exclude
        and Task.objects.filter(annotator=user, status=TaskStatus.ACTIVE, pk__in=exclude, item__project=project).count()
        >= MAX_ACTIVE_TASKS
    ):
        return None
    # The claimer and, for a crowd participant, their accounts in the project's other studies
    # (sql.SIBLINGS): one person answers a gold item once.
    people = [user.pk, *sibling_accounts(project=project, user=user)]
    active_for_others = Task.objects.filter(
        item=OuterRef("pk"), status=TaskStatus.ACTIVE, lease_expires__gt=now
    ).exclude(annotator=user)
    item = (
        Item.objects.filter(project=project, is_gold=True, status=ItemStatus.PENDING)
        .filter(Exists(active_for_others))
        .exclude(Exists(Task.objects.filter(item=OuterRef("pk"), annotator__in=people)))
        .exclude(Exists(Annotation.objects.filter(item=OuterRef("pk"), annotator__in=people)))
        .annotate(lease_ends=Subquery(active_for_others.values("lease_expires")[:1]))
        .order_by("lease_ends", "pk")
        .select_for_update(skip_locked=True, of=("self",))
        .first()
    )
    if item is None:
        return None
    Task.objects.filter(item=item, status=TaskStatus.ACTIVE).update(status=TaskStatus.EXPIRED, updated_at=now)
    task = Task.objects.create(
        item=item,
        annotator=user,
        status=TaskStatus.ACTIVE,
        lease_expires=lease_until(project, now),
        draft={},
        draft_version=0,
    )
    item.project = project
    task.item = item
    return task
