"""Celery tasks of the annotation app: ids in, call a service, nothing else."""
from celery import shared_task

from .importing.runs import import_run_execute
from .queue import holds_expire_stale


@shared_task(name="annotation.tasks.expire_task_leases")
def expire_task_leases() -> int:
    """Give abandoned holds back to the queue (claims also do this lazily, item by item)."""
    return holds_expire_stale()


@shared_task(name="annotation.tasks.run_import")
def run_import(run_id: int) -> str:
    """Import an uploaded file queued by the import page or API (sent on commit: see importing.runs)."""
    return import_run_execute(run_id)
