"""Read paths about background work: a job's chunks (tracked runs) and the workers of the queues
it waits on, for the job page and the admin. Workers come from their own heartbeats in Redis
(config.workers), so "no worker" means no worker anywhere, not just none in this web process.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Max, Q
from django.utils import timezone

from background.models import RunStatus
from config.workers import queue_status

from .models import BackgroundRun, InferenceJob, JobStatus

TROUBLES_SHOWN = 20


def job_chunks(*, job: InferenceJob) -> dict[str, Any]:
    """Counts of the job's chunks by state, the ones running now (worker, attempt, heartbeat age)
    and the ones that failed or needed more than one attempt (with the reason)."""
    chunks = BackgroundRun.objects.filter(job=job, chunk_index__isnull=False)
    counts = {status: 0 for status in RunStatus.values}
    counts.update(dict(chunks.values_list("status").annotate(n=Count("id")).order_by()))
    now = timezone.now()
    running = [
        {
            "chunk": r.chunk_index,
            "worker": r.worker,
            "attempt": r.attempts,
            "heartbeat_s": round((now - r.heartbeat_at).total_seconds()) if r.heartbeat_at else None,
        }
        for r in chunks.filter(status=RunStatus.RUNNING).order_by("chunk_index")[:TROUBLES_SHOWN]
    ]
    troubles = [
        {"chunk": r.chunk_index, "status": r.status, "attempts": r.attempts, "reason": r.reason}
        for r in chunks.filter(Q(status=RunStatus.FAILED) | Q(attempts__gt=1)).order_by("chunk_index")[:TROUBLES_SHOWN]
    ]
    return {
        "total": sum(counts.values()),
        "counts": counts,
        "running": running,
        "troubles": troubles,
        "max_attempts": chunks.aggregate(m=Max("attempts"))["m"] or 0,
    }


def job_chunks_line(*, job: InferenceJob) -> str:
    """One line for a list: "10 chunks: 7 finished, 1 running, 2 queued (max 2 attempts)"."""
    summary = job_chunks(job=job)
    if not summary["total"]:
        return "–"
    parts = [f"{n} {status}" for status, n in summary["counts"].items() if n]
    tail = f" (max {summary['max_attempts']} attempts)" if summary["max_attempts"] > 1 else ""
    total = summary["total"]
    return f"{total} chunk{'' if total == 1 else 's'}: {', '.join(parts)}{tail}"


def job_queues(*, job: InferenceJob) -> list[dict[str, Any]]:
    """For a queued or running job: each queue its unfinished runs wait on, with its live workers
    and a plain sentence ("No worker is consuming the gpu queue: start one with ...")."""
    if job.status not in (JobStatus.QUEUED, JobStatus.RUNNING):
        return []
    queues = sorted(
        set(
            BackgroundRun.objects.filter(job=job, status__in=(RunStatus.QUEUED, RunStatus.RUNNING)).values_list(
                "queue", flat=True
            )
        )
    )
    return [queue_status(queue) for queue in queues]
