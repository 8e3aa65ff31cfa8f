"""Per-annotator limits on claiming: for crowd-study participants (annotation/studies/), and a
project's ``annotator_cap`` for everyone (``cap_left``, below).

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
from psycopg.types.numeric import Int8

from .. import db
from ..models import Annotation, CrowdAccount, Item, ParticipantStatus, Project, StudyParticipant, Task, TaskStatus
from ..project_setup import project_setting
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


def sibling_accounts(*, project: Project, user) -> list[int]:
    """The user ids of the same crowd participant's accounts in the project's other studies (one
    account per study: the same platform and participant id); none for anyone else. The queue's
    claim reads them in its statement (sql.SIBLINGS); this is for the rare ORM paths (gold.py)."""
    if getattr(user, "has_usable_password", None) is None or user.has_usable_password():
        return []  # crowd accounts never have a password
    own = CrowdAccount.objects.filter(user=user).values("platform", "external_id").first()
    if own is None:
        return []
    return list(
        CrowdAccount.objects.filter(study__project=project, **own).exclude(user=user).values_list("user_id", flat=True)
    )


def time_over(participant: StudyParticipant, now: datetime) -> bool:
    minutes = participant.study.time_limit_minutes
    return bool(minutes) and now >= participant.started_at + timedelta(minutes=minutes)


def tasks_done(*, project: Project, user) -> int:
    return Annotation.objects.filter(annotator=user, item__project=project).count()


# A participant's standing in one statement (annotation/db.py runs it prepared, as the claim's):
# their latest participation in a study of the project, that study's limits, their annotations
# in the project and their live tasks there. No row: not a participant.
CLAIM_LIMIT_SQL = """
SELECT p.status, p.started_at, p.time_limit_minutes, p.tasks_per_participant,
       (SELECT count(*) FROM annotation_annotation a JOIN annotation_item i ON i.id = a.item_id
        WHERE a.annotator_id = %(user)s AND i.project_id = %(project)s),
       (SELECT count(*) FROM annotation_task t JOIN annotation_item i ON i.id = t.item_id
        WHERE t.annotator_id = %(user)s AND t.status = 'active' AND t.lease_expires > %(now)s
          AND i.project_id = %(project)s)
FROM (SELECT sp.status, sp.started_at, s.time_limit_minutes, s.tasks_per_participant
      FROM annotation_studyparticipant sp JOIN annotation_study s ON s.id = sp.study_id
      WHERE sp.user_id = %(user)s AND s.project_id = %(project)s
      ORDER BY sp.started_at DESC, sp.id DESC
      LIMIT 1) p
"""


def is_crowd(user) -> bool:
    """Whether the user may be a study participant: crowd accounts never have a password."""
    return not (getattr(user, "has_usable_password", None) is None or user.has_usable_password())


def limit_of(row, now: datetime) -> ClaimLimit | None:
    """claim_limit from CLAIM_LIMIT_SQL's columns (all NULL, or no row: not a participant)."""
    if not row or row[0] is None:
        return None
    status, started_at, minutes, per_participant, done, active = row
    if status == ParticipantStatus.REJECTED or (minutes and now >= started_at + timedelta(minutes=minutes)):
        return ClaimLimit(0, keep_active=False)
    return ClaimLimit(per_participant - done - active, keep_active=True)


def claim_limit(*, project: Project, user, now: datetime) -> ClaimLimit | None:
    """None: no limit. Otherwise what this study participant may still claim (participation_of,
    time_over, tasks_done and the live tasks, read in one statement). The claim reads the same
    with its lock (queue/sql.py CLAIM_OPEN_SQL)."""
    if not is_crowd(user):
        return None  # crowd accounts never have a password: the common case asks nothing
    found = db.rows(CLAIM_LIMIT_SQL, {"user": Int8(user.pk), "project": Int8(project.pk), "now": now})
    return limit_of(found[0] if found else None, now)


# annotator_cap (a project setting, every protocol): how many answers one annotator may give in the
# project. Their answers there and their live tasks there count (a task is an answer on its way),
# read by ``cap_left`` under the claim's per-user lock (rules.claim_lock), so two claims racing
# from two tabs never pass the cap together.
CAP_COUNT_SQL = """
SELECT (SELECT count(*) FROM annotation_annotation a JOIN annotation_item i ON i.id = a.item_id
        WHERE a.annotator_id = %(user)s AND i.project_id = %(project)s)
     + (SELECT count(*) FROM annotation_task t JOIN annotation_item i ON i.id = t.item_id
        WHERE t.annotator_id = %(user)s AND t.status = 'active' AND i.project_id = %(project)s)
"""


def annotator_cap(project: Project) -> int | None:
    """The project's cap of answers per annotator (None: none)."""
    return project_setting(project.settings, "annotator_cap", None, project=project.slug)


def cap_left(*, project: Project, user, cap: int) -> int:
    """How many more items the user may claim under the project's cap (<= 0: none)."""
    ((used,),) = db.rows(CAP_COUNT_SQL, {"user": Int8(user.pk), "project": Int8(project.pk)})
    return cap - used


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


def queue_done_headers(project: Project, user) -> dict[str, str]:
    """Why a claim found nothing, as headers of its 204 answer: ``StateLab-Queue-Done`` when the
    user reached the project's annotator_cap; none otherwise."""
    cap = annotator_cap(project)
    if cap is None or cap_left(project=project, user=user, cap=cap) > 0:
        return {}
    noun = "answer" if cap == 1 else "answers"
    return {"StateLab-Queue-Done": f"You reached this project's cap of {cap} {noun}."}
