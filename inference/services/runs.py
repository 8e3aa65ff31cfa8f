"""Tracked background runs (models.BackgroundRun): record, claim, finish, re-queue, fail.

A run's row is written in the caller's transaction and its message sent once that commits, with
the row's id as the ``tracked_run`` keyword; the worker's task wrapper (inference/tracked.py)
claims it with one atomic UPDATE, so a late duplicate of the message (the original redelivered
after Redis's visibility timeout, or a retry racing the watchdog) finds nothing to claim and does
nothing. What a lost or failed run means for its job lives in recovery.py.
"""
from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from config.enqueue import enqueue
from config.heartbeat import lapsed_before, max_attempts

from ..models import BackgroundRun, InferenceJob, RunState

log = logging.getLogger(__name__)

FINAL = (RunState.DONE, RunState.FAILED)


def run_queue(task: str, queue: str | None = None) -> str:
    """The queue a task's message goes to: the one asked for, else its route, else the default."""
    if queue:
        return queue
    route = getattr(settings, "CELERY_TASK_ROUTES", {}).get(task) or {}
    return route.get("queue") or getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "default")


def runs_enqueue_on_commit(
    task: str, arg_lists: list[tuple | list], *, queue: str | None = None, job: InferenceJob | None = None,
    chunks: bool = False, quiet: bool = False,
) -> list[BackgroundRun]:
    """Record one queued run per entry of ``arg_lists`` (numbered as chunks of ``job`` when
    ``chunks``) and send each once the transaction commits. ``quiet``: a failed send is logged and
    fails that run with the reason instead of raising (follow-up work must not fail its caller)."""
    first = 0
    if chunks and job is not None:
        last = BackgroundRun.objects.filter(job=job, chunk_index__isnull=False).order_by("-chunk_index").first()
        first = last.chunk_index + 1 if last else 0
    queue_name = run_queue(task, queue)
    runs = BackgroundRun.objects.bulk_create([
        BackgroundRun(task=task, args=list(args), queue=queue_name, job=job,
                      chunk_index=first + i if chunks else None)
        for i, args in enumerate(arg_lists)
    ])
    transaction.on_commit(partial(_send, [(r.pk, r.task, list(r.args), queue, r.job_id) for r in runs], quiet))
    return runs


def run_enqueue_on_commit(task: str, *args: Any, queue: str | None = None, job: InferenceJob | None = None,
                          quiet: bool = False) -> BackgroundRun:
    return runs_enqueue_on_commit(task, [args], queue=queue, job=job, quiet=quiet)[0]


def _send(messages: list[tuple[int, str, list, str | None, int | None]], quiet: bool) -> None:
    for run_id, task, args, queue, job_id in messages:
        try:
            BackgroundRun.objects.filter(pk=run_id).update(sent_at=timezone.now())
            enqueue(task, *args, queue=queue, tracked_run=run_id)
        except Exception as exc:
            if not quiet:
                raise
            log.exception("could not queue %s for job %s (run %s)", task, job_id, run_id)
            BackgroundRun.objects.filter(pk=run_id, state=RunState.QUEUED).update(
                state=RunState.FAILED, reason=f"could not be queued: {type(exc).__name__}: {exc}"[:2000],
                finished_at=timezone.now())


def run_claim(*, run_id: int, worker: str) -> BackgroundRun | None:
    """Take the run for this worker: queued, or running with a lapsed heartbeat and attempts left.
    None when it is someone else's, or over (a duplicate delivery)."""
    now = timezone.now()
    claimable = Q(state=RunState.QUEUED) | Q(
        state=RunState.RUNNING, heartbeat_at__lt=lapsed_before(), attempts__lt=max_attempts())
    claimed = BackgroundRun.objects.filter(claimable, pk=run_id).update(
        state=RunState.RUNNING, attempts=F("attempts") + 1, worker=worker[:200], heartbeat_at=now, started_at=now)
    if not claimed:
        return None
    return BackgroundRun.objects.get(pk=run_id)


def _mine(run: BackgroundRun):
    """The run's row while it is still this claim's (same attempt, still running)."""
    return BackgroundRun.objects.filter(pk=run.pk, attempts=run.attempts, state=RunState.RUNNING)


def run_heartbeat_queryset(run: BackgroundRun):
    return _mine(run)


def run_finish(*, run: BackgroundRun) -> bool:
    return bool(_mine(run).update(state=RunState.DONE, reason="", finished_at=timezone.now()))


def run_requeue(*, run: BackgroundRun, reason: str) -> bool:
    """Back to queued (a retry message is on its way), keeping the attempt count."""
    return bool(_mine(run).update(state=RunState.QUEUED, reason=reason[:2000]))


def run_mark_failed(*, run: BackgroundRun, reason: str) -> bool:
    """This claim failed for good; True when it was still this claim's to fail."""
    return bool(_mine(run).update(state=RunState.FAILED, reason=reason[:4000], finished_at=timezone.now()))
