"""A job's background runs (models.BackgroundRun): recorded and sent.

A run's row is written in the caller's transaction and its message sent once that commits, with
the row's id as the ``tracked_run`` keyword; the worker's Celery task wrapper (background/tracked.py)
claims it with the one claim (background/claim.py), so a late duplicate of the message (the
original redelivered after Redis's visibility timeout, or a retry racing the watchdog) finds
nothing to claim and does nothing. What a lost or failed run means for its job lives in recovery.py.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from background.models import RunStatus
from config.enqueue import enqueue

from ..models import BackgroundRun, InferenceJob

log = logging.getLogger(__name__)


def run_queue(celery_task: str, queue: str | None = None) -> str:
    """The queue a Celery task's message goes to: the one asked for, else its route, else the default."""
    if queue:
        return queue
    route = getattr(settings, "CELERY_TASK_ROUTES", {}).get(celery_task) or {}
    return route.get("queue") or getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "default")


def runs_enqueue_on_commit(
    celery_task: str,
    arg_lists: list[tuple | list],
    *,
    queue: str | None = None,
    job: InferenceJob | None = None,
    chunks: bool = False,
    quiet: bool = False,
) -> list[BackgroundRun]:
    """Record one queued run per entry of ``arg_lists`` (numbered as chunks of ``job`` when
    ``chunks``) and send each once the transaction commits. ``quiet``: a failed send is logged and
    fails that run with the reason instead of raising (follow-up work must not fail its caller)."""
    first = 0
    if chunks and job is not None:
        last = BackgroundRun.objects.filter(job=job, chunk_index__isnull=False).order_by("-chunk_index").first()
        first = last.chunk_index + 1 if last else 0
    queue_name = run_queue(celery_task, queue)
    runs = BackgroundRun.objects.bulk_create(
        [
            BackgroundRun(
                celery_task=celery_task,
                args=list(args),
                queue=queue_name,
                job=job,
                chunk_index=first + i if chunks else None,
            )
            for i, args in enumerate(arg_lists)
        ]
    )
    transaction.on_commit(partial(_send, [(r.pk, r.celery_task, list(r.args), queue, r.job_id) for r in runs], quiet))
    return runs


def run_enqueue_on_commit(
    celery_task: str, *args: Any, queue: str | None = None, job: InferenceJob | None = None, quiet: bool = False
) -> BackgroundRun:
    return runs_enqueue_on_commit(celery_task, [args], queue=queue, job=job, quiet=quiet)[0]


def _send(messages: list[tuple[int, str, list, str | None, int | None]], quiet: bool) -> None:
    for run_id, celery_task, args, queue, job_id in messages:
        try:
            BackgroundRun.objects.filter(pk=run_id).update(sent_at=timezone.now())
            enqueue(celery_task, *args, queue=queue, tracked_run=run_id)
        except Exception as exc:
            if not quiet:
                raise
            log.exception("could not queue %s for job %s (run %s)", celery_task, job_id, run_id)
            BackgroundRun.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(
                status=RunStatus.FAILED,
                reason=f"could not be queued: {type(exc).__name__}: {exc}"[:2000],
                finished_at=timezone.now(),
            )
