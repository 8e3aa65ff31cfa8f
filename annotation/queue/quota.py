"""Per-annotator limits on claiming, for crowd-study participants (annotation/studies/).

A participant does at most their study's `tasks_per_participant` tasks, and none after their
time limit or once rejected. claim.queue_claim_next asks `claim_limit` before it claims; everyone
else (a user with a usable password, or no participation in the project) is unlimited and costs
no query. Active tasks count against the quota, so a page's preloaded next task never goes past it; two
claims racing from two tabs can overshoot by at most one task, which submit then stores as usual.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction

from ..models import Annotation, Item, ParticipantStatus, Project, StudyParticipant, Task, TaskStatus
from .rules import item_accepts_annotations, renew_active


@dataclass(frozen=True)
class ClaimLimit:
    new_claims: int  # how many more items this user may claim now (<= 0: none)
    keep_active: bool  # whether the user's active tasks are still handed back


def participation_of(*, project: Project, user) -> StudyParticipant | None:
    """The user's latest participation in a study of the project (crowd accounts only)."""
    if getattr(user, "has_usable_password", None) is None or user.has_usable_password():
        return None  # crowd accounts never have a password: the common case asks nothing
    return (
        StudyParticipant.objects.filter(user=user, study__project=project)
        .select_related("study")
        .order_by("-started_at", "-pk")
        .first()
    )


def time_over(participant: StudyParticipant, now: datetime) -> bool:
    minutes = participant.study.time_limit_minutes
    return bool(minutes) and now >= participant.started_at + timedelta(minutes=minutes)


def tasks_done(*, project: Project, user) -> int:
    return Annotation.objects.filter(annotator=user, item__project=project).count()


def claim_limit(*, project: Project, user, now: datetime) -> ClaimLimit | None:
    """None: no limit. Otherwise what this study participant may still claim."""
    participant = participation_of(project=project, user=user)
    if participant is None:
        return None
    if participant.status == ParticipantStatus.REJECTED or time_over(participant, now):
        return ClaimLimit(0, keep_active=False)
    active = Task.objects.filter(
        annotator=user, status=TaskStatus.ACTIVE, lease_expires__gt=now, item__project=project
    ).count()
    left = participant.study.tasks_per_participant - tasks_done(project=project, user=user) - active
    return ClaimLimit(left, keep_active=True)


def active_task(*, project: Project, user, now: datetime, exclude: tuple[int, ...] = ()) -> Task | None:
    """An active task of the user that the caller does not show, its lease renewed (the part of
    a claim that stays open when the quota is used up). One item lock per transaction."""
    active = (
        Task.objects.filter(annotator=user, status=TaskStatus.ACTIVE, item__project=project)
        .exclude(pk__in=exclude)
        .order_by("created_at", "pk")
        .values_list("pk", "item_id")
    )
    for task_pk, item_pk in list(active):
        task = _take_active(project, task_pk, item_pk, now)
        if task is not None:
            return task
    return None


@transaction.atomic
def _take_active(project: Project, task_pk: int, item_pk: int, now: datetime) -> Task | None:
    item = Item.objects.select_for_update().get(pk=item_pk)  # item first, then task: the queue's lock order
    item.project = project
    task = Task.objects.select_for_update().get(pk=task_pk)
    if task.status != TaskStatus.ACTIVE:
        return None
    if not item_accepts_annotations(item):
        task.status = TaskStatus.EXPIRED
        task.save(update_fields=["status", "updated_at"])
        return None
    task.item = item
    return renew_active(task, item, now)
