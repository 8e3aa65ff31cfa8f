"""The Celery task base of tracked runs: `@shared_task(base=TrackedTask)`.

A message sent for a tracked run carries ``tracked_run=<row id>`` of the table that
settings.STATELAB_TRACKED_RUN_MODEL names (inference's BackgroundRun: a job's start and chunks, its
export, the board warm-ups that follow it). The wrapper claims the row (claim.run_claim: a duplicate
delivery finds nothing to claim and returns None), keeps its heartbeat fresh from a daemon thread
while the Celery task's body runs, then marks it finished; a transient error that Celery will retry puts it
back to queued, any other error fails it with the reason and hands it to the owner's follow-up
(settings.STATELAB_TRACKED_RUN_FAILED, e.g. settling the chunk's job). A message without
``tracked_run`` (a direct call) runs untracked.
"""

from __future__ import annotations

import socket
from contextlib import nullcontext

from celery import Task
from celery.exceptions import Retry
from django.apps import apps
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils.module_loading import import_string

from .claim import run_claim, run_fail, run_finish, run_mine, run_requeue
from .heartbeat import RowHeartbeat

# The database unreachable while the wrapper records the run: the message is sent again (not acked
# and dropped), however long the outage lasts, each try at most a minute after the last.
_DB_DOWN = (OperationalError, InterfaceError)
_DB_RETRY_MAX_SECONDS = 60


def tracked_run_failed(*, run, reason: str) -> None:
    """Fail this claim of a tracked run with the reason, then tell its owner (once)."""
    if run_fail(run=run, reason=reason):
        owner = getattr(settings, "STATELAB_TRACKED_RUN_FAILED", None)
        if owner:
            import_string(owner)(run=run, reason=reason)


class TrackedTask(Task):
    abstract = True
    typing = False  # the extra ``tracked_run`` keyword is taken by __call__, not by the task's body

    def _retry_later(self, exc: BaseException):
        countdown = min(_DB_RETRY_MAX_SECONDS, 2 ** min(self.request.retries or 0, 6))
        return self.retry(exc=exc, countdown=countdown, max_retries=None)

    def __call__(self, *args, tracked_run: int | None = None, **kwargs):
        if tracked_run is None:
            return super().__call__(*args, **kwargs)
        model = apps.get_model(settings.STATELAB_TRACKED_RUN_MODEL)
        try:
            run = run_claim(model, run_id=tracked_run, worker=self.request.hostname or socket.gethostname())
        except _DB_DOWN as exc:
            raise self._retry_later(exc) from exc
        if run is None:
            return None  # done, failed, or being run by a live worker: this delivery is a duplicate
        # Eager mode (the demo without Redis) runs in the caller's process: nothing to watch.
        beating = nullcontext() if self.request.is_eager else RowHeartbeat(run_mine(run))
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
            tracked_run_failed(run=run, reason=f"{type(exc).__name__}: {exc}")
            raise
        run_finish(run=run)
        return result
