"""Crowd studies: the study forms the tests create, a participant arriving by the study link, and
a participant's tasks done through the queue."""

from __future__ import annotations

from django.test import Client

from annotation.models import Annotation, CrowdAccount
from annotation.queue import annotation_submit, queue_claim_next

# study_create's fields as the form posts them. Gold-gated: 3 places, a participant passes with
# half the gold items right, and finishing sends them back to the platform.
GOLD_GATED_STUDY = dict(
    name="Pilot",
    platform="prolific",
    max_participants="3",
    tasks_per_participant="2",
    completion_code="C0DE42",
    return_url="https://app.prolific.com/submissions/complete?cc={code}",
    gold_pass_threshold="0.5",
    hourly_rate="12.00",
    currency="GBP",
)
# Ungated: 5 places and no gold bar, so every participant passes.
UNGATED_STUDY = dict(
    name="Pilot",
    platform="prolific",
    max_participants="5",
    tasks_per_participant="2",
    completion_code="C0DE42",
    gold_pass_threshold="0",
    hourly_rate="12.00",
    currency="GBP",
)


def open_study_link(study, pid: str, client: Client | None = None, **extra):
    """A participant follows the study link with the platform's parameters: (their client, the response)."""
    client = client or Client()
    response = client.get(f"/study/{study.token}/", {"PROLIFIC_PID": pid, "STUDY_ID": "s1", "SESSION_ID": "x", **extra})
    return client, response


def participant_user(pid: str):
    return CrowdAccount.objects.get(platform="prolific", external_id=pid).user


def joined_participant(study, pid: str):
    """The user a new participant becomes by following the study link."""
    Client().get(f"/study/{study.token}/", {"PROLIFIC_PID": pid, "STUDY_ID": "s1", "SESSION_ID": "x"})
    return participant_user(pid)


def do_tasks(project, user, results, *, time_spent_ms: int = 20_000) -> list[Annotation]:
    """The user claims their next task and submits each result in turn."""
    out = []
    for result in results:
        task = queue_claim_next(project=project, user=user)
        out.append(annotation_submit(task_id=task.pk, user=user, result=result, time_spent_ms=time_spent_ms).annotation)
    return out
