"""Fixtures for inference tests: Celery in eager mode, the local OpenAI-compatible stand-in."""

from __future__ import annotations

import pytest

from .openai_standin import StandIn


@pytest.fixture
def standin():
    server = StandIn().start()
    yield server
    server.stop()
