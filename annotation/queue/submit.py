"""Submitting: store the annotation of a claimed task exactly once, count it, verify the item when its
annotators agree (and the project asks for that). The time it took is measured here (active_ms),
never taken from the client."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.db import IntegrityError, connection, transaction
from django.utils import timezone
from psycopg.types.numeric import Int8

from .. import db
from ..models import Annotation, Item, ItemStatus, Project, Task, TaskStatus
from ..project_setup import project_setting
from ..results import ResultInvalid, Validated, quintuplet_warnings, validate_result
from ..selectors import result_context_for, shows_suggestions
from ..verification import MARKING_LOCK_CLASS, item_answers, item_auto_verify, item_mark_disagreement
from . import sql
from .errors import AlreadySubmitted, TaskConflict
from .ranks import queue_ranks_refresh_soon
from .rules import item_accepts_annotations, lease_seconds
from .task_ops import lock_own_task
from .viewing import viewing_refusal


@dataclass
class Submitted:
    annotation: Annotation
    created: bool
    warnings: dict[str, str] = field(default_factory=dict)


def _warnings_for(workflow: str, result: dict) -> dict[str, str]:
    if workflow == "quintuplet":
        return quintuplet_warnings(result)
    return {}


def _repeat(annotation: Annotation, workflow: str) -> Submitted:
    return Submitted(annotation, False, _warnings_for(workflow, annotation.result))


def _same_result(workflow: str, item: Item, result, stored: dict) -> bool:
    """Whether a repeated submit carries the answer already stored (compared after validation,
    which normalizes, e.g. clips boxes; as stored JSON, so tuples and lists compare equal)."""
    try:
        validated = validate_result(workflow, result, result_context_for(item=item))
    except ResultInvalid:
        return False
    return json.loads(json.dumps(validated.result)) == stored


# active_ms, the time stored with an annotation: the time the annotator spent on this task as the
# server saw it, from the later of its claim and their previous submit (a page claims the next task
# while it shows the current one, so counting from the claim alone would count those seconds
# twice; time on a skipped task goes to the next submit, once) to now, at most one lease length of
# the project (a task left open is not work), in whole milliseconds. Crowd pay is computed from it
# (annotation/studies/table.py). sql.STORE_SQL computes it while it stores the annotation.


def _to_mark(project, item) -> list[tuple[int, dict]]:
    """What a submit that completed `item` marks it with: the project's settings as committed once
    the marking lock is held shared (sql.STORE_SQL took it), into project.settings, and the item's
    annotations (returned), read in one prepared statement of their own after it (so with a
    snapshot taken after any wait for the lock), as verification.project_settings_to_mark and
    item_mark_disagreement would read them."""
    ((settings, answers),) = db.rows(sql.MARK_READ_SQL, {"project": Int8(project.pk), "item": Int8(item.pk)})
    project.settings = Project._meta.get_field("settings").from_db_value(settings, None, connection)  # as the ORM
    return item_answers(answers)


def annotation_submit(
    *,
    task_id: int,
    user,
    result: dict | None = None,
    time_spent_ms: int = 0,
    idempotency_key: str | None = None,
    now: datetime | None = None,
    role: str | None = None,
    read_result: Callable[[], dict] | None = None,
) -> Submitted:
    """Store the annotation of a claimed task, exactly once, in one transaction that reads the
    task once (sql.SUBMIT_LOCK_SQL or LOCK_OWN_TASK_SQL) and stores it in one statement (STORE_SQL).

    `time_spent_ms` is the client's own count and is not used: the time stored is active_ms, the
    server's. A repeat (same key, same task, or a second tab) with the same answer returns the first
    annotation with created=False; with a different answer it raises AlreadySubmitted (nothing
    changes). Idempotency keys are per annotator. Raises ResultInvalid (nothing written),
    TaskNotFound or TaskConflict.

    For the API: `role`, the role the caller needs in the task's project, checked with the task
    (TaskNotFound without one, PermissionDenied with a lower one); `read_result`, in place of
    `result`, called once that check passed (the request body is read then, so someone else's
    task is a 404 whatever the body says; it may raise ResultInvalid).
    """
    read = read_result if read_result is not None else (lambda: result)
    answer: list = []  # read_result's answer, kept for the second try

    def once() -> dict:
        if not answer:
            answer.append(read())
        return answer[0]

    kwargs = dict(
        task_id=task_id,
        user=user,
        result=once,
        idempotency_key=(idempotency_key or "").strip() or None,
        now=now or timezone.now(),
        role=role,
    )
    try:
        return _submit(**kwargs)
    except IntegrityError:
        pass
    # The first try lost a race its snapshot could not see (a concurrent submit of the same task,
    # e.g. a double click, committed while we waited for the item lock): nothing was written, and
    # a second try sees that submit and returns it as the repeat.
    try:
        return _submit(**kwargs)
    except IntegrityError:
        # Only an Idempotency-Key sent with another item's submit can get here: the item lock and
        # the checks rule out every other unique violation.
        raise TaskConflict("This Idempotency-Key was already used for another submission.")


@transaction.atomic
def _submit(
    *, task_id: int, user, result: Callable[[], dict], idempotency_key: str | None, now: datetime, role: str | None
) -> Submitted:
    key = idempotency_key
    task, item = lock_own_task(task_id, user, idempotency_key=key, role=role)
    result = result()
    project = item.project
    workflow = project.workflow
    if not task.prior_ids and not (
        task.status == TaskStatus.ACTIVE and task.lease_expires > now and item_accepts_annotations(item)
    ):
        # Off the plain path (e.g. the task was submitted while we waited for the lock): read the
        # earlier annotations again with a snapshot taken now, so a repeat is answered as one.
        ((task.prior_ids,),) = db.rows(sql.PRIOR_IDS_SQL, {"item": Int8(item.pk), "user": Int8(user.pk), "key": key})
    if task.prior_ids:
        priors = list(Annotation.objects.filter(pk__in=task.prior_ids).order_by("pk"))
        for prior in priors:
            if key and prior.idempotency_key == key and prior.item_id != item.pk:
                raise TaskConflict("This Idempotency-Key was already used for another submission.")
        (stored,) = [prior for prior in priors if prior.item_id == item.pk]
        # A retry with the same key, a double click or a second tab sending the same answer gets the
        # first annotation back. A different answer is not dropped silently: 409 with the stored one.
        if _same_result(workflow, item, result, stored.result):
            return _repeat(stored, workflow)
        raise AlreadySubmitted(stored)

    validated: Validated = validate_result(workflow, result, result_context_for(item=item, annotator=user))

    if task.status == TaskStatus.SKIPPED:
        raise TaskConflict("You skipped this task; load the next one.")
    if (task.status == TaskStatus.EXPIRED or task.lease_expires <= now) and not item.is_gold:
        # (A gold item takes everyone's answer: a task whose item was taken over loses nothing, gold.py.)
        if Task.objects.filter(item=item, status=TaskStatus.ACTIVE).exclude(pk=task.pk).exists():
            raise TaskConflict(
                "Your lease on this task expired and another annotator took the item, so this answer "
                "was not saved. Load the next task."
            )
    if not item_accepts_annotations(item):
        raise TaskConflict("This item already has all the annotations it needs; your answer was not saved.")

    # The answer is blind unless the form offered a model suggestion for this item (conservative:
    # any suggestion stored by the time of the submit counts as seen).
    suggestable = shows_suggestions(project=project)
    ((annotation_id, count, status, suggested, ms, _marking),) = db.rows(
        sql.STORE_SQL,
        {
            "item": Int8(item.pk),
            "user": Int8(user.pk),
            "task": Int8(task.pk),
            "result": json.dumps(validated.result),
            "started": task.created_at,
            "lease": Int8(lease_seconds(project)),
            "key": key,
            "now": now,
            "needed": project.annotations_per_item,
            "suggestable": suggestable,
            "marking": Int8(MARKING_LOCK_CLASS),
            "project": Int8(project.pk),
        },
    )
    # A form that asks for viewing time checks it against the server's time (viewing.py); a refusal
    # rolls this transaction back.
    viewing_refusal(item=item, user=user, result=result, seconds=ms / 1000)
    annotation = Annotation(
        pk=annotation_id,
        item=item,
        annotator=user,
        task=task,
        result=validated.result,
        time_spent_ms=ms,
        idempotency_key=key,
        source="task",
        with_suggestion=suggested,
        created_at=now,
    )
    annotation._state.adding = False
    task.status = TaskStatus.SUBMITTED
    if not item.is_gold:
        item.annotation_count, item.status = count, status
        if item.status == ItemStatus.ANNOTATED:
            # Under the thresholds in force when this commits, not those read with the item: a
            # threshold change at this moment commits first or re-marks this item after. Lock
            # order: item, task, then the project's marking lock (shared; verification.py), which
            # STORE_SQL took.
            answers = _to_mark(project, item)
            # Disagreeing annotators: marked for adjudication, first in the review queue.
            item_mark_disagreement(item=item, answers=answers)
            if project_setting(project.settings, "auto_verify", False, project=project.slug):
                item_auto_verify(item=item)
    queue_ranks_refresh_soon(project=project)  # a protocol that matches pairs re-ranks (ranks.py)
    return Submitted(annotation, True, validated.warnings)
