"""Crowd participants: joining through a study link (a password-less account bound to the
platform's id, the same id always the same account), finishing (the completion code), and the
researcher's approval or rejection. A rejected participant's annotations move to
ExcludedAnnotation, so nothing that reads annotations sees them, and their items go back to the
queue (the counts drop; an item that was complete is pending again). A reviewed item keeps its
reviewer's decision unless it rested on a rejected annotation the remaining ones do not support:
then it goes back to review, or, frozen in a release, is reported (reopen.py)."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from ..audit.record import audit_record
from ..models import (
    Annotation,
    AuditAction,
    CrowdAccount,
    ExcludedAnnotation,
    Item,
    ItemStatus,
    Membership,
    ParticipantStatus,
    Role,
    Study,
    StudyParticipant,
    StudyPlatform,
    Task,
    TaskStatus,
)
from ..queue import queue_claim_next
from ..queue.quota import tasks_done, time_over
from .reopen import decisions_resting_on, decisions_settle, edits_started_from
from .setup import StudyRefused

# Prolific ids are 24 hex digits, MTurk worker ids about 14 capitals and digits; anything of
# letters, digits, - and _ (starting with a letter or digit) is taken, so ids stay safe in CSV.
PLATFORM_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
# Query parameters each platform appends to the study link: (participant id, study, session).
PLATFORM_PARAMS = {
    StudyPlatform.PROLIFIC: ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID"),
    StudyPlatform.MTURK: ("workerId", "hitId", "assignmentId"),
}
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"


class StudyUnavailable(Exception):
    """The study takes nobody new (closed, or its participants quota is full); `reason` says which."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class PlatformIdInvalid(ValueError):
    pass


@dataclass(frozen=True)
class PlatformIds:
    external_id: str
    study_id: str = ""
    session_id: str = ""
    preview: bool = False  # MTurk shows the page before the worker accepts the HIT


def platform_ids(study: Study, params) -> PlatformIds | None:
    """The participant's ids from the link's query string (None: no id given)."""
    pid_name, study_name, session_name = PLATFORM_PARAMS[study.platform]
    session = (params.get(session_name) or "").strip()
    if study.platform == StudyPlatform.MTURK and session == MTURK_PREVIEW:
        return PlatformIds("", preview=True)
    pid = (params.get(pid_name) or "").strip()
    if not pid:
        return None
    if not PLATFORM_ID_RE.match(pid):
        raise PlatformIdInvalid(f"{pid_name} is not a valid participant id.")
    return PlatformIds(pid, (params.get(study_name) or "").strip()[:100], session[:100])


def _crowd_user(platform: str, external_id: str):
    """The account of (platform, id), made on first use: no password (unusable), a username
    derived from both (suffixed when a person already has that name)."""
    account = CrowdAccount.objects.select_related("user").filter(platform=platform, external_id=external_id).first()
    if account is not None:
        return account.user
    User = get_user_model()
    username = f"{platform}-{external_id}"[:150]
    if User.objects.filter(username=username).exists():
        username = f"{username[:140]}-{secrets.token_hex(4)}"
    try:
        with transaction.atomic():
            user = User.objects.create_user(username, password=None)
            CrowdAccount.objects.create(user=user, platform=platform, external_id=external_id)
    except IntegrityError:  # the same id joining from a second browser at the same moment
        return CrowdAccount.objects.select_related("user").get(platform=platform, external_id=external_id).user
    return user


@transaction.atomic
def participant_join(*, study: Study, ids: PlatformIds, now: datetime | None = None) -> tuple[StudyParticipant, bool]:
    """(participant, joined now?): the same id resumes its participation; a new one takes a place
    if the study is open and has one (the study row is locked, so the quota is exact)."""
    now = now or timezone.now()
    study = Study.objects.select_for_update().select_related("project").get(pk=study.pk)
    user = _crowd_user(study.platform, ids.external_id)
    participant = StudyParticipant.objects.filter(study=study, user=user).first()
    if participant is not None:
        changed = {
            k: v
            for k, v in (("platform_session_id", ids.session_id), ("platform_study_id", ids.study_id))
            if v and getattr(participant, k) != v
        }
        if changed:
            for k, v in changed.items():
                setattr(participant, k, v)
            participant.save(update_fields=list(changed))
        participant.study = study
        return participant, False
    if not study.is_open:
        raise StudyUnavailable("closed")
    taken = study.participants.exclude(status=ParticipantStatus.REJECTED).count()
    if taken >= study.max_participants:
        raise StudyUnavailable("full")
    Membership.objects.get_or_create(project=study.project, user=user, defaults={"role": Role.ANNOTATOR})
    participant = StudyParticipant.objects.create(
        study=study,
        user=user,
        external_id=ids.external_id,
        platform_study_id=ids.study_id,
        platform_session_id=ids.session_id,
        started_at=now,
    )
    return participant, True


def participant_of(*, study: Study, user) -> StudyParticipant | None:
    return StudyParticipant.objects.filter(study=study, user=user).select_related("study__project").first()


@dataclass(frozen=True)
class FinishState:
    state: str  # "working" (a task is waiting), "finished", "ended" (rejected)
    done: int
    quota: int
    time_over: bool = False


def participant_finish(*, participant: StudyParticipant, now: datetime | None = None) -> FinishState:
    """Where the participant stands when their page runs out of tasks. Finished (the code is
    shown) when they did their tasks, their time is up, or the queue has nothing left for them;
    when a task is still there for them they are "working" (it is claimed for them)."""
    now = now or timezone.now()
    study, project, user = participant.study, participant.study.project, participant.user
    quota = study.tasks_per_participant
    if participant.status == ParticipantStatus.REJECTED:
        return FinishState("ended", tasks_done(project=project, user=user), quota)
    done = tasks_done(project=project, user=user)
    over = time_over(participant, now)
    if done < quota and not over and participant.finished_at is None:
        if queue_claim_next(project=project, user=user, now=now) is not None:
            return FinishState("working", done, quota)
    if participant.finished_at is None:
        StudyParticipant.objects.filter(pk=participant.pk, finished_at__isnull=True).update(finished_at=now)
        participant.finished_at = now
    return FinishState("finished", done, quota, over)


def completion_url(study: Study) -> str:
    return study.return_url.replace("{code}", study.completion_code) if study.return_url else ""


# --- the researcher's decision ------------------------------------------------------------------


def _lock_participant(participant_id: int, study: Study) -> StudyParticipant:
    """The participant with their study, project and account, rows locked FOR NO KEY UPDATE: a
    second decision on them waits, and so does a threshold change (the project row), while the
    foreign-key checks of rows that merely refer to them (a review's or an amendment's audit
    record, the participant's own annotation) go through; FOR UPDATE blocked those, and a review
    holding its item then waited for this while this waited for the item: a deadlock."""
    return (
        StudyParticipant.objects.select_for_update(no_key=True)
        .select_related("study__project", "user")
        .get(pk=participant_id, study=study)
    )


@transaction.atomic
def participant_approve(*, study: Study, participant_id: int, actor, note: str = "") -> StudyParticipant:
    participant = _lock_participant(participant_id, study)
    if participant.status == ParticipantStatus.REJECTED:
        raise StudyRefused(
            "This participant was rejected; their annotations left the analysis, so they cannot be approved now."
        )
    if participant.status == ParticipantStatus.APPROVED:
        return participant
    _decide(participant, ParticipantStatus.APPROVED, actor, note)
    audit_record(
        action=AuditAction.STUDY_APPROVE,
        actor=actor,
        project=study.project,
        obj=participant,
        object_repr=f"{study.name}: {participant.external_id}",
        details={"note": participant.decision_note},
    )
    return participant


@transaction.atomic
def participant_reject(*, study: Study, participant_id: int, actor, note: str = "") -> dict:
    """Reject: end the participant's active tasks, move their annotations out of the analysis, give their
    items back to the queue, and send back to review the verified items whose decision they
    carried (reopen.py; items frozen in a release keep theirs and are listed in
    `released_items_kept`). Returns what was done (also in the audit event)."""
    participant = _lock_participant(participant_id, study)
    if participant.status == ParticipantStatus.REJECTED:
        raise StudyRefused("This participant is rejected already.")
    # The project as read under the lock (_lock_participant locks its row too): its thresholds are
    # those in force, a threshold change (which locks the row first) being before or after this.
    project, user, now = participant.study.project, participant.user, timezone.now()
    item_ids = sorted(
        set(Annotation.objects.filter(annotator=user, item__project=project).values_list("item_id", flat=True))
        | set(
            Task.objects.filter(annotator=user, status=TaskStatus.ACTIVE, item__project=project).values_list(
                "item_id", flat=True
            )
        )
    )
    items = {i.pk: i for i in Item.objects.select_for_update().filter(pk__in=item_ids).order_by("pk")}  # items first
    ended = Task.objects.filter(annotator=user, status=TaskStatus.ACTIVE, item_id__in=item_ids).update(
        status=TaskStatus.EXPIRED, updated_at=now
    )
    reopened = kept_reviewed = 0
    annotations = list(
        Annotation.objects.filter(annotator=user, item_id__in=item_ids).prefetch_related("revisions").order_by("pk")
    )
    resting = decisions_resting_on(project=project, items=items, annotations=annotations)
    edits_kept = edits_started_from(items=items, annotations=annotations)  # they stand (reopen.py says why)
    ExcludedAnnotation.objects.bulk_create(
        [
            ExcludedAnnotation(
                participant=participant,
                item_id=a.item_id,
                annotation_id=a.pk,
                result=a.result,
                time_spent_ms=a.time_spent_ms,
                with_suggestion=a.with_suggestion,
                created_at=a.created_at,
                excluded_at=now,
                revisions=[
                    {
                        "result": r.result,
                        "time_spent_ms": r.time_spent_ms,
                        "submitted_at": r.submitted_at.isoformat(),
                        "replaced_at": r.replaced_at.isoformat(),
                    }
                    for r in a.revisions.all()
                ],
            )
            for a in annotations
        ]
    )
    Annotation.objects.filter(pk__in=[a.pk for a in annotations]).delete()
    for a in annotations:
        item = items[a.item_id]
        if item.is_gold:
            continue
        item.annotation_count = max(0, item.annotation_count - 1)
        if item.status == ItemStatus.ANNOTATED:
            item.status = ItemStatus.PENDING
            item.disagreement = None  # marked again when it is complete again
            reopened += 1
        elif item.status != ItemStatus.PENDING and a.item_id not in resting:
            kept_reviewed += 1
        item.save(update_fields=["annotation_count", "status", "disagreement", "updated_at"])
    participant.study = study
    settled = decisions_settle(project=project, participant=participant, actor=actor, items=items, resting=resting)
    _decide(participant, ParticipantStatus.REJECTED, actor, note)
    outcome = {
        "annotations_excluded": len(annotations),
        "items_reopened": reopened + len(settled.back_to_queue),
        "reviewed_items_kept": kept_reviewed + len(settled.kept),
        "holds_ended": ended,
        "items_back_to_review": len(settled.back_to_review),
        "released_items_kept": settled.released,
    }
    audit_record(
        action=AuditAction.STUDY_REJECT,
        actor=actor,
        project=project,
        obj=participant,
        object_repr=f"{study.name}: {participant.external_id}",
        details={
            **outcome,
            "back_to_review": settled.back_to_review,
            "back_to_queue": settled.back_to_queue,
            "edits_started_from": edits_kept,
            "note": participant.decision_note,
        },
    )
    return outcome


def _decide(participant: StudyParticipant, status: str, actor, note: str) -> None:
    participant.status = status
    participant.decided_by = actor
    participant.decided_at = timezone.now()
    participant.decision_note = (note or "").strip()[:500]
    participant.save(update_fields=["status", "decided_by", "decided_at", "decision_note"])
