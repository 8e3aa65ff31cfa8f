"""Crowd participants: joining through a study link (a password-less account of the platform's id
in that study: the same id always the same account there, another study another account),
finishing (the completion code, once the study's tasks are done), and the researcher's approval
or rejection. A rejected participant's annotations move to ExcludedAnnotation, so nothing that
reads annotations sees them, and their items go back to the queue (the counts drop; an item that
was complete is pending again). A reviewed item keeps its reviewer's decision unless it rested on
a rejected annotation the remaining ones do not support: then it goes back to review, or, frozen
in a release, is reported (reopen.py).

A study's places (max_participants) are held by participants who did work (an annotation, or a
task they hold now) and, for one lease length after joining, by those who have not started yet:
ids made up to fill the quota give their places back when that time is over. Ids must have their
platform's format (PLATFORM_FORMATS), and every join is in the audit trail (member_add, via the
study)."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q
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
from ..queue.rules import lease_seconds
from .reopen import decisions_resting_on, decisions_settle, edits_started_from
from .setup import StudyRefused

# Query parameters each platform appends to the study link: (participant id, study, session).
PLATFORM_PARAMS = {
    StudyPlatform.PROLIFIC: ("PROLIFIC_PID", "STUDY_ID", "SESSION_ID"),
    StudyPlatform.MTURK: ("workerId", "hitId", "assignmentId"),
}
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"


@dataclass(frozen=True)
class IdFormat:
    pattern: re.Pattern
    shape: str  # what such an id looks like, for the refusal


# The formats of PLATFORM_PARAMS's ids, in the same order. Prolific's participant, study and
# session ids are 24 hexadecimal digits (read case-insensitively, kept in lower case); MTurk's
# worker ids are an "A" and capital letters or digits, its HIT and assignment ids capital letters
# and digits, at most 64 characters (the MTurk API's CustomerId and EntityId).
_HEX24 = IdFormat(re.compile(r"[0-9a-f]{24}"), "24 hexadecimal digits")
_MTURK_ENTITY = IdFormat(re.compile(r"[A-Z0-9]{1,64}"), "capital letters and digits, at most 64")
PLATFORM_FORMATS = {
    StudyPlatform.PROLIFIC: (_HEX24, _HEX24, _HEX24),
    StudyPlatform.MTURK: (
        IdFormat(re.compile(r"A[A-Z0-9]{1,63}"), "an A followed by capital letters and digits, at most 64"),
        _MTURK_ENTITY,
        _MTURK_ENTITY,
    ),
}


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
    """The participant's ids from the link's query string (None: no participant id given).
    PlatformIdInvalid names the first id not in its platform's format (the study and session ids
    may be missing, never malformed)."""
    names = PLATFORM_PARAMS[study.platform]
    values = [(params.get(name) or "").strip() for name in names]
    if study.platform == StudyPlatform.MTURK and values[2] == MTURK_PREVIEW:
        return PlatformIds("", preview=True)
    if not values[0]:
        return None
    if study.platform == StudyPlatform.PROLIFIC:
        values = [v.lower() for v in values]
    label = StudyPlatform(study.platform).label
    for name, value, form in zip(names, values, PLATFORM_FORMATS[study.platform]):
        if value and not form.pattern.fullmatch(value):
            raise PlatformIdInvalid(f"{name} is not a {label} id: it should be {form.shape}.")
    return PlatformIds(*values)


def _new_crowd_user(study: Study, external_id: str):
    """A password-less (unusable) user for a new crowd account, named after the platform and id;
    a name a person (or the same id in another study) has already gets the study's number, then a
    random suffix."""
    User = get_user_model()
    base = f"{study.platform}-{external_id}"
    for name in (base, f"{base}-s{study.pk}", f"{base}-s{study.pk}-{secrets.token_hex(4)}"):
        if User.objects.filter(username=name).exists():
            continue
        try:
            with transaction.atomic():
                return User.objects.create_user(name, password=None)
        except IntegrityError:  # taken at this very moment by a join of another study
            continue
    return User.objects.create_user(f"{base}-{secrets.token_hex(8)}", password=None)


def places_taken(*, study: Study, now: datetime) -> int:
    """How many of the study's places are held (see the module): participants not rejected who did
    work in the project (their account is this study's alone), hold a task now, or joined less than
    one lease length ago."""
    since = now - timedelta(seconds=lease_seconds(study.project))
    worked = Annotation.objects.filter(annotator=OuterRef("user"), item__project=study.project)
    holding = Task.objects.filter(annotator=OuterRef("user"), status=TaskStatus.ACTIVE, lease_expires__gt=now)
    return (
        study.participants.exclude(status=ParticipantStatus.REJECTED)
        .filter(Q(started_at__gt=since) | Exists(worked) | Exists(holding))
        .count()
    )


@transaction.atomic
def participant_join(*, study: Study, ids: PlatformIds, now: datetime | None = None) -> tuple[StudyParticipant, bool]:
    """(participant, joined now?): the same id resumes its participation in this study; a new one
    takes a place if the study is open and has one (the study row is locked, so the quota is
    exact). A new participant gets an account of this study alone, the annotator role in its
    project, and an audit event."""
    now = now or timezone.now()
    study = Study.objects.select_for_update().select_related("project").get(pk=study.pk)
    account = (
        CrowdAccount.objects.select_related("user")
        .filter(study=study, platform=study.platform, external_id=ids.external_id)
        .first()
    )
    participant = StudyParticipant.objects.filter(study=study, user=account.user).first() if account else None
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
    if places_taken(study=study, now=now) >= study.max_participants:
        raise StudyUnavailable("full")
    if account is None:
        user = _new_crowd_user(study, ids.external_id)
        CrowdAccount.objects.create(
            user=user, study=study, platform=study.platform, external_id=ids.external_id, created_at=now
        )
    else:
        user = account.user
    membership, _ = Membership.objects.get_or_create(
        project=study.project, user=user, defaults={"role": Role.ANNOTATOR}
    )
    participant = StudyParticipant.objects.create(
        study=study,
        user=user,
        external_id=ids.external_id,
        platform_study_id=ids.study_id,
        platform_session_id=ids.session_id,
        started_at=now,
    )
    audit_record(
        action=AuditAction.MEMBER_ADD,
        actor=user,
        project=study.project,
        obj=membership,
        object_repr=f"{study.name}: {ids.external_id}",
        details={
            "user": user.get_username(),
            "role": membership.role,
            "via": f"study {study.pk}",
            "study": study.pk,
            "participant": ids.external_id,
            "platform": study.platform,
            "platform_study_id": ids.study_id,
            "platform_session_id": ids.session_id,
        },
    )
    return participant, True


def participant_of(*, study: Study, user) -> StudyParticipant | None:
    return StudyParticipant.objects.filter(study=study, user=user).select_related("study__project").first()


@dataclass(frozen=True)
class FinishState:
    state: str  # "working" (a task is waiting), "finished" (the code is shown), "ended" (no code)
    done: int
    quota: int
    time_over: bool = False
    # Why it ended without the code: "rejected", "time" (the time limit passed before the study's
    # tasks were done) or "no-tasks" (nothing is left for them now; they may come back later).
    reason: str = ""


def participant_finish(*, participant: StudyParticipant, now: datetime | None = None) -> FinishState:
    """Where the participant stands when their page runs out of tasks. The completion code is
    theirs once they did the study's tasks_per_participant tasks, and never before: past the time
    limit, or with nothing left for them in the queue, they have ended without it. While a task is
    still there for them they are "working" (it is claimed for them)."""
    now = now or timezone.now()
    study, project, user = participant.study, participant.study.project, participant.user
    quota = study.tasks_per_participant
    done = tasks_done(project=project, user=user)
    if participant.status == ParticipantStatus.REJECTED:
        return FinishState("ended", done, quota, reason="rejected")
    over = time_over(participant, now)
    if done < quota and not over:
        if queue_claim_next(project=project, user=user, now=now) is not None:
            return FinishState("working", done, quota)
        # Nothing for them now (items held by others come back when their leases end): not
        # finished, so they may try again.
        return FinishState("ended", done, quota, reason="no-tasks")
    if participant.finished_at is None:
        StudyParticipant.objects.filter(pk=participant.pk, finished_at__isnull=True).update(finished_at=now)
        participant.finished_at = now
    if done >= quota:
        return FinishState("finished", done, quota, over)
    return FinishState("ended", done, quota, over, reason="time")


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
