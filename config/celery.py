"""Celery application. Queues: default (imports, exports, scoring), api (API judges), gpu (vLLM)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("statelab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Each worker reports itself per queue in Redis while it runs (config.workers: pages, /healthz).
from celery import signals  # noqa: E402

from config import workers  # noqa: E402

workers.connect(signals)
