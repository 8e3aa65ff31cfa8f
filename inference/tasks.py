"""Celery tasks of the inference app: ids in, load, call a service.

start_job (default queue, gpu for vLLM jobs) plans the job and enqueues its chunks (for video
jobs on the gpu queue, prepare_frames runs on the default queue first and sends each chunk);
run_api_chunk (api queue) and run_gpu_chunk (gpu queue, concurrency 1, engine kept per process)
run one chunk each. Each is a tracked run (background.tracked.TrackedTask, models.BackgroundRun):
its row is claimed atomically and its heartbeat kept fresh, and watch_runs (Celery beat) re-queues
a run whose worker died, boundedly, then fails it with the reason. The upsert under (job, item, query)
makes a second run fill gaps only, and a late duplicate message finds nothing to claim.
"""

from __future__ import annotations

from celery import current_task, shared_task
from django.db import InterfaceError, OperationalError

from background.tracked import TrackedTask
from background.watchdog import runs_watch_all
from config.workers import report_model

from . import services
from .models import InferenceJob

_TRANSIENT = (OperationalError, InterfaceError)
_RETRY = dict(autoretry_for=_TRANSIENT, retry_backoff=2, retry_backoff_max=60, max_retries=5)


@shared_task(base=TrackedTask, acks_late=True, reject_on_worker_lost=True, **_RETRY)
def start_job(job_id: int) -> str:
    return services.job_start(job_id=job_id).status


@shared_task(base=TrackedTask, acks_late=True, reject_on_worker_lost=True, **_RETRY)
def prepare_frames(job_id: int, item_ids: list[int]) -> int:
    """A chunk's video frames into the frame cache (default queue, CPU), then its chunk is sent."""
    return services.job_prepare_frames(job_id=job_id, item_ids=item_ids)


@shared_task(base=TrackedTask, acks_late=True, reject_on_worker_lost=True, **_RETRY)
def run_api_chunk(job_id: int, item_ids: list[int]) -> int:
    return services.job_run_chunk(job_id=job_id, item_ids=item_ids)


@shared_task(base=TrackedTask, acks_late=True, reject_on_worker_lost=True, **_RETRY)
def run_gpu_chunk(job_id: int, item_ids: list[int]) -> int:
    written = services.job_run_chunk(job_id=job_id, item_ids=item_ids)
    # The engine stays loaded in this worker: its heartbeat says which model (config.workers).
    report_model(
        current_task.request.hostname,
        InferenceJob.objects.filter(pk=job_id).values_list("endpoint__model_id", flat=True).first(),
    )
    return written


@shared_task(base=TrackedTask, acks_late=True, **_RETRY)
def export_job(job_id: int) -> str:
    job = InferenceJob.objects.select_related("endpoint", "project", "release").get(pk=job_id)
    return str(services.job_write_exports(job=job))


@shared_task(name="inference.tasks.watch_runs")
def watch_runs() -> dict:
    """Celery beat's watchdog (CELERY_BEAT_SCHEDULE): re-queue or fail runs whose worker died, in
    every table of runs that settings.STATELAB_RUN_WATCHERS names (imports included). The Celery task
    keeps the name the beat schedule has always sent."""
    return runs_watch_all()
