"""The one claim of a tracked run, and the writes that end or re-queue it.

A worker takes a run with one atomic UPDATE: queued, or running with a lapsed heartbeat and
attempts left (its worker died and the watchdog has not re-queued it yet). Every later write goes
through `run_mine`, the row in the state this claim left it (same attempt, still running), so a
lost claim can end nothing, and a late duplicate delivery of the message finds nothing to claim.
"""

from __future__ import annotations

from typing import TypeVar

from django.db.models import F, Q, QuerySet
from django.utils import timezone

from .heartbeat import lapsed_before, max_attempts
from .models import RunStatus, TrackedRun

Run = TypeVar("Run", bound=TrackedRun)


def run_claim(
    model: type[Run], *, run_id: int, worker: str, reset: dict | None = None, select_related: tuple[str, ...] = ()
) -> Run | None:
    """Take the run for this worker (``reset``: more fields a new attempt starts from). None when
    it is someone else's, or over (a duplicate delivery), or missing."""
    now = timezone.now()
    claimable = Q(status=RunStatus.QUEUED) | Q(
        status=RunStatus.RUNNING, heartbeat_at__lt=lapsed_before(), attempts__lt=max_attempts()
    )
    claimed = model.objects.filter(claimable, pk=run_id).update(
        status=RunStatus.RUNNING,
        attempts=F("attempts") + 1,
        worker=worker[:200],
        heartbeat_at=now,
        started_at=now,
        **(reset or {}),
    )
    if not claimed:
        return None
    return model.objects.select_related(*select_related).get(pk=run_id)


def run_mine(run: TrackedRun) -> QuerySet:
    """The run's row while it is still this claim's (same attempt, still running): what its
    heartbeat refreshes and what ends it."""
    return type(run).objects.filter(pk=run.pk, attempts=run.attempts, status=RunStatus.RUNNING)


def run_finish(*, run: TrackedRun) -> bool:
    return bool(run_mine(run).update(status=RunStatus.FINISHED, reason="", finished_at=timezone.now()))


def run_requeue(*, run: TrackedRun, reason: str) -> bool:
    """Back to queued (a retry message is on its way), keeping the attempt count."""
    return bool(run_mine(run).update(status=RunStatus.QUEUED, reason=reason[:2000]))


def run_fail(*, run: TrackedRun, reason: str) -> bool:
    """This claim failed for good; True when it was still this claim's to fail."""
    return bool(run_mine(run).update(status=RunStatus.FAILED, reason=reason[:4000], finished_at=timezone.now()))
