"""Fixtures for inference tests: Celery in eager mode, the local OpenAI-compatible stand-in."""
from __future__ import annotations

import pytest

from .openai_standin import StandIn


@pytest.fixture
def eager(settings):
    from config.celery import app

    before = (app.conf.task_always_eager, app.conf.task_eager_propagates)
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.CELERY_TASK_EAGER_PROPAGATES = True
    app.conf.task_always_eager = True
    app.conf.task_eager_propagates = True
    yield app
    app.conf.task_always_eager, app.conf.task_eager_propagates = before


@pytest.fixture
def standin():
    server = StandIn().start()
    yield server
    server.stop()
