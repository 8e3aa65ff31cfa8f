"""A row's heartbeat, refreshed from a small daemon thread while a tracked run works.

Used by the run wrappers of every app (inference's BackgroundRun, annotation's ImportRun): the
thread writes ``heartbeat_at = now()`` on the row every STATELAB_RUN_HEARTBEAT_SECONDS through its
own database connection (Django connections are per thread), so a long backend call or import
keeps its row alive while a dead worker's row goes quiet and the watchdog finds it.
"""
from __future__ import annotations

import logging
import threading
from datetime import timedelta

from django.conf import settings
from django.db import connections
from django.utils import timezone

log = logging.getLogger(__name__)


def heartbeat_seconds() -> float:
    return float(getattr(settings, "STATELAB_RUN_HEARTBEAT_SECONDS", 10))


def lapse_seconds() -> float:
    """A heartbeat older than this means the worker is gone (several missed beats)."""
    return float(getattr(settings, "STATELAB_RUN_LAPSE_SECONDS", 45))


def max_attempts() -> int:
    return int(getattr(settings, "STATELAB_RUN_MAX_ATTEMPTS", 3))


def lapsed_before():
    """The moment before which a heartbeat counts as lapsed."""
    return timezone.now() - timedelta(seconds=lapse_seconds())


class RowHeartbeat:
    """Context manager: while inside, ``queryset.update(heartbeat_at=now())`` every interval.

    The queryset should select exactly the claimed row in its claimed state (e.g. its id, state
    running and the attempt number), so a row taken over or ended elsewhere is left alone.
    """

    def __init__(self, queryset, *, field: str = "heartbeat_at", interval: float | None = None):
        self.queryset = queryset
        self.field = field
        self.interval = heartbeat_seconds() if interval is None else interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="statelab-run-heartbeat", daemon=True)

    def __enter__(self) -> "RowHeartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 5)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    self.queryset.update(**{self.field: timezone.now()})
                except Exception:  # a database blip: the next beat tries again
                    log.warning("heartbeat of %s failed", self.queryset.model.__name__, exc_info=True)
                    connections[self.queryset.db].close()
        finally:
            connections[self.queryset.db].close()  # this thread's own connection
