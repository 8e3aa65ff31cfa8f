"""Gold items are never blocked by one holder.

A gold item has a known answer and takes one answer from everyone (it is never counted or
completed), so a hold on it protects nothing but the holder's own work. When a claim's draw asks
for gold and every gold item this annotator may still answer is held by someone else (say a crowd
participant who closed the tab, holding a study's only gold item for the rest of the 10-minute
lease), the claim takes over the hold that was renewed longest ago: that hold is ended (expired)
and the item is held for the claimer. The one-active-hold-per-item constraint stays as it is.

Nobody loses work by this: a gold task whose hold went to someone else stays open to its holder
(hold._keep_hold renews its clock without taking the hold back, submit stores the answer), and the
database still stores at most one answer per annotator and item. A claimer never takes over a gold
item they held before (theirs would otherwise come back to them twice).

Rare (only when gold is wanted and none is free), so it is one ORM query, not a statement of sql.py.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import Exists, OuterRef, Subquery

from ..models import Annotation, Item, ItemStatus, Project, Task, TaskStatus
from .rules import MAX_HELD_TASKS, claim_lock, lease_until


@transaction.atomic
def gold_take_over(*, project: Project, user, now: datetime, exclude: tuple[int, ...] = ()) -> Task | None:
    """Hold for `user` a gold item that someone else holds (the stalest hold first), or None when
    there is none, or the caller already shows MAX_HELD_TASKS. The item is locked first (SKIP
    LOCKED: an item its holder is saving or submitting right now is left alone), then its hold ends.
    Serialized with the user's other claims (rules.claim_lock)."""
    claim_lock(user=user)
    if (
        exclude
        and Task.objects.filter(annotator=user, status=TaskStatus.ACTIVE, pk__in=exclude, item__project=project).count()
        >= MAX_HELD_TASKS
    ):
        return None
    held_by_others = Task.objects.filter(item=OuterRef("pk"), status=TaskStatus.ACTIVE, lease_expires__gt=now).exclude(
        annotator=user
    )
    item = (
        Item.objects.filter(project=project, is_gold=True, status=ItemStatus.PENDING)
        .filter(Exists(held_by_others))
        .exclude(Exists(Task.objects.filter(item=OuterRef("pk"), annotator=user)))
        .exclude(Exists(Annotation.objects.filter(item=OuterRef("pk"), annotator=user)))
        .annotate(held_until=Subquery(held_by_others.values("lease_expires")[:1]))
        .order_by("held_until", "pk")
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
