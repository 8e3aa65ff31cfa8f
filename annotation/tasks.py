"""Celery tasks of the annotation app: ids in, call a service, nothing else."""
from celery import shared_task

from . import services


@shared_task(name="annotation.tasks.expire_task_leases")
def expire_task_leases() -> int:
    """Give abandoned holds back to the queue (claims also do this lazily, item by item)."""
    return services.task_expire_stale()


@shared_task(name="annotation.tasks.run_import", bind=True, max_retries=10, default_retry_delay=1)
def run_import(self, run_id: int) -> str:
    """Import an uploaded file queued by the import page or API (see importing.runs)."""
    from .importing.runs import import_run_execute

    outcome = import_run_execute(run_id)
    if outcome == "missing":  # sent from inside a transaction that has not committed yet
        raise self.retry()
    return outcome
