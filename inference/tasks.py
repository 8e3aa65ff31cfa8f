"""Celery tasks of the inference app: ids in, load, call a service.

start_job (default queue, gpu for vLLM jobs) plans the job and enqueues its chunks;
run_api_chunk (api queue) and run_gpu_chunk (gpu queue, concurrency 1, engine kept per process)
run one chunk each. acks_late + reject_on_worker_lost: a chunk whose worker dies is delivered
again, and the upsert under (job, item, query) makes the second run fill gaps only.
"""
from __future__ import annotations

from celery import shared_task
from django.db import InterfaceError, OperationalError

from . import services
from .models import InferenceJob

_TRANSIENT = (OperationalError, InterfaceError)
_RETRY = dict(autoretry_for=_TRANSIENT, retry_backoff=2, retry_backoff_max=60, max_retries=5)


@shared_task(acks_late=True, reject_on_worker_lost=True, **_RETRY)
def start_job(job_id: int) -> str:
    return services.job_start(job_id=job_id).status


@shared_task(acks_late=True, reject_on_worker_lost=True, **_RETRY)
def run_api_chunk(job_id: int, item_ids: list[int]) -> int:
    return services.job_run_chunk(job_id=job_id, item_ids=item_ids)


@shared_task(acks_late=True, reject_on_worker_lost=True, **_RETRY)
def run_gpu_chunk(job_id: int, item_ids: list[int]) -> int:
    return services.job_run_chunk(job_id=job_id, item_ids=item_ids)


@shared_task(acks_late=True, **_RETRY)
def export_job(job_id: int) -> str:
    job = InferenceJob.objects.select_related("endpoint", "project", "release").get(pk=job_id)
    return str(services.job_write_exports(job=job))
