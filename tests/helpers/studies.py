"""Crowd studies: the study forms the tests create, a participant arriving by the study link, and
a participant's tasks done through the queue.

Tests name participants by short labels ("P1", "GOOD"); `pid` turns a label into a Prolific id
(24 hexadecimal digits, the format the study link checks), the same label always the same id."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta

from django.test import Client
from django.utils import timezone

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
HEX24 = re.compile(r"[0-9a-f]{24}")


def pid(label: str) -> str:
    """The Prolific id of a test's participant label (a 24-hex-digit id is its own label)."""
    return label if HEX24.fullmatch(label) else hashlib.sha256(label.encode()).hexdigest()[:24]


# The Prolific STUDY_ID and SESSION_ID the tests' links carry.
STUDY_ID, SESSION_ID = pid("platform-study"), pid("platform-session")


def open_study_link(study, label: str, client: Client | None = None, **extra):
    """A participant follows the study link with the platform's parameters: (their client, the response)."""
    client = client or Client()
    params = {"PROLIFIC_PID": pid(label), "STUDY_ID": STUDY_ID, "SESSION_ID": SESSION_ID, **extra}
    response = client.get(f"/study/{study.token}/", params)
    return client, response


def participant_user(label: str, study=None):
    """The account of a participant label (in `study`, when the label joined several)."""
    accounts = CrowdAccount.objects.filter(platform="prolific", external_id=pid(label))
    return (accounts.filter(study=study) if study is not None else accounts).get().user


def joined_participant(study, label: str):
    """The user a new participant becomes by following the study link."""
    open_study_link(study, label)
    return participant_user(label, study)


def do_tasks(project, user, results, *, seconds: float = 20, start: datetime | None = None) -> list[Annotation]:
    """The user claims their next task and submits each result in turn, `seconds` after its claim
    (the server's clock is what the time spent is measured by: time moves by passing `now`)."""
    out = []
    clock = start or timezone.now()
    for result in results:
        task = queue_claim_next(project=project, user=user, now=clock)
        clock += timedelta(seconds=seconds)
        out.append(annotation_submit(task_id=task.pk, user=user, result=result, now=clock).annotation)
    return out
