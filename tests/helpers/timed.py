"""Time spent on a task as the tests control it: the server measures it from the claim (or the
annotator's previous submit) to the submit (annotation/queue/submit.py, active_ms), so a test moves
time by passing `now`, on a clock kept per annotator so that one's submits follow one another."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from annotation.queue import Submitted, annotation_submit, queue_claim_next


def claim_and_submit(project, user, result, *, ms: int) -> Submitted:
    """The user claims their next task and submits `result` `ms` milliseconds later."""
    start = getattr(user, "_test_clock", None) or timezone.now()
    task = queue_claim_next(project=project, user=user, now=start)
    assert task is not None, f"nothing to claim for {user}"
    user._test_clock = start + timedelta(milliseconds=ms)
    return annotation_submit(task_id=task.pk, user=user, result=result, now=user._test_clock)
