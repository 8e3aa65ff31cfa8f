"""Celery tasks of the annotation app: ids in, call a service, nothing else."""

from celery import shared_task

from .importing.runs import import_run_execute
from .queue import tasks_expire_stale
from .queue.ranks import queue_ranks_refresh


@shared_task(name="annotation.tasks.expire_task_leases")
def expire_task_leases() -> int:
    """Give the items of abandoned tasks back to the queue (claims also do this lazily, item by item)."""
    return tasks_expire_stale()


@shared_task(name="annotation.tasks.run_import", bind=True, acks_late=True, reject_on_worker_lost=True)
def run_import(self, run_id: int) -> str:
    """Import an uploaded file queued by the import page or API (sent on commit: see importing.runs).
    The run's row is claimed and its heartbeat kept fresh there; a duplicate delivery does nothing."""
    return import_run_execute(run_id, worker=self.request.hostname or "", heartbeat=not self.request.is_eager)


@shared_task(name="annotation.tasks.refresh_queue_ranks")
def refresh_queue_ranks(project_id: int) -> int:
    """Re-rank a project's open items from its votes (queue/ranks.py); safe to run twice."""
    return queue_ranks_refresh(project_id=project_id)
