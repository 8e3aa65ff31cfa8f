"""Celery application. Queues: default (imports, exports, scoring), api (API judges), gpu (vLLM)."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("statelab")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
