"""Celery tasks of the annotation app: ids in, call a service, nothing else."""
from celery import shared_task

from . import services


@shared_task(name="annotation.tasks.expire_task_leases")
def expire_task_leases() -> int:
    """Give abandoned holds back to the queue (claims also do this lazily, item by item)."""
    return services.task_expire_stale()
