"""A run's heartbeat, refreshed from a small daemon thread while it works, and the bounds the
claim and the watchdog read.

The thread writes ``heartbeat_at = now()`` on the claimed row every STATELAB_RUN_HEARTBEAT_SECONDS
through its own database connection (Django connections are per thread), so a long backend call or
import keeps its row alive while a dead worker's row goes quiet and the watchdog finds it
(a heartbeat older than STATELAB_RUN_LAPSE_SECONDS). The thread is a RowWriter, which an import
also uses to publish its progress (annotation/importing/runs.py).
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


class RowWriter:
    """Context manager: while inside, a daemon thread writes ``values()`` to the row every
    interval (nothing when it returns None), through the thread's own database connection, so
    the writes are seen while the worker's own transaction is still open.

    The queryset should select exactly the claimed row in its claimed state (claim.run_mine: its
    id, status running and the attempt number), so a row taken over or ended elsewhere is left alone.
    """

    def __init__(self, queryset, *, values, interval: float, name: str):
        self.queryset = queryset
        self.values = values
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def __enter__(self) -> RowWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=self.interval + 5)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                values = self.values()
                if values is None:
                    continue
                try:
                    self.queryset.update(**values)
                except Exception:  # a database blip: the next tick tries again
                    log.warning("%s of %s failed", self._thread.name, self.queryset.model.__name__, exc_info=True)
                    connections[self.queryset.db].close()
        finally:
            connections[self.queryset.db].close()  # this thread's own connection


class RowHeartbeat(RowWriter):
    """``queryset.update(heartbeat_at=now())`` every STATELAB_RUN_HEARTBEAT_SECONDS (RowWriter)."""

    def __init__(self, queryset, *, field: str = "heartbeat_at", interval: float | None = None):
        super().__init__(
            queryset,
            values=lambda: {field: timezone.now()},
            name="statelab-run-heartbeat",
            interval=heartbeat_seconds() if interval is None else interval,
        )
