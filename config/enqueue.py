"""Enqueue Celery work by Celery task name once the current transaction commits.

Services call this instead of importing their app's ``tasks`` module, so no service ever imports
a Celery task (Celery tasks import services, never the reverse) and work never starts before the
rows it reads are committed. Looking the Celery task up in the app's registry (rather than ``send_task``) keeps eager
mode working for the demo without Redis, where there is no broker.
"""

from __future__ import annotations

import importlib
from typing import Any

from django.db import transaction

from config.celery import app


def enqueue(task_name: str, *args: Any, queue: str | None = None, **kwargs: Any) -> None:
    """Send ``task_name(*args, **kwargs)`` now, to ``queue`` or the task's routed queue (a tracked
    run passes its row's id as ``tracked_run``)."""
    if task_name not in app.tasks:  # autodiscovery is lazy outside a worker: import the task's module
        importlib.import_module(task_name.rsplit(".", 1)[0])
    options = {"queue": queue} if queue else {}
    app.tasks[task_name].apply_async(args=list(args), kwargs=kwargs or None, **options)


def enqueue_on_commit(task_name: str, *args: Any, queue: str | None = None) -> None:
    """Send ``task_name(*args)`` when the surrounding transaction commits (at once outside one)."""
    transaction.on_commit(lambda: enqueue(task_name, *args, queue=queue))
