"""The Celery task base of tracked runs (models.BackgroundRun): `@shared_task(base=TrackedTask)`.

A message sent through services.runs carries ``tracked_run=<row id>``. The wrapper claims the row
(a duplicate delivery finds nothing to claim and returns None), keeps its heartbeat fresh from a
daemon thread while the task body runs, then marks it done; a transient error that Celery will
retry puts it back to queued, any other error fails it with the reason and settles its job. A
message without ``tracked_run`` (sent before this existed, or a direct call) runs untracked.
"""
from __future__ import annotations

import socket
from contextlib import nullcontext

from celery import Task
from celery.exceptions import Retry
from django.db import InterfaceError, OperationalError

from config.heartbeat import RowHeartbeat

from .services.recovery import run_failed
from .services.runs import run_claim, run_finish, run_heartbeat_queryset, run_requeue


# The database unreachable while the wrapper records the run: the message is sent again (not acked
# and dropped), however long the outage lasts, each try at most a minute after the last.
_DB_DOWN = (OperationalError, InterfaceError)
_DB_RETRY_MAX_SECONDS = 60


class TrackedTask(Task):
    abstract = True
    typing = False  # the extra ``tracked_run`` keyword is taken by __call__, not by the task's body

    def _retry_later(self, exc: BaseException):
        countdown = min(_DB_RETRY_MAX_SECONDS, 2 ** min(self.request.retries or 0, 6))
        return self.retry(exc=exc, countdown=countdown, max_retries=None)

    def __call__(self, *args, tracked_run: int | None = None, **kwargs):
        if tracked_run is None:
            return super().__call__(*args, **kwargs)
        try:
            run = run_claim(run_id=tracked_run, worker=self.request.hostname or socket.gethostname())
        except _DB_DOWN as exc:
            raise self._retry_later(exc) from exc
        if run is None:
            return None  # done, failed, or being run by a live worker: this delivery is a duplicate
        # Eager mode (the demo without Redis) runs in the caller's process: nothing to watch.
        beating = nullcontext() if self.request.is_eager else RowHeartbeat(run_heartbeat_queryset(run))
        try:
            with beating:
                result = super().__call__(*args, **kwargs)
        except Retry:
            try:
                run_requeue(run=run, reason="retrying after a transient error")
            except _DB_DOWN:
                pass  # the retry message is on its way; its claim finds the row running and lapsed
            raise
        except Exception as exc:  # (a SystemExit of a dying worker is left to the watchdog)
            run_failed(run=run, reason=f"{type(exc).__name__}: {exc}")
            raise
        run_finish(run=run)
        return result
