"""The one watchdog: runs whose worker died are re-queued, boundedly, then failed with the reason.

Celery beat calls `runs_watch_all` every STATELAB_WATCHDOG_SECONDS (the Celery task inference.tasks.watch_runs,
CELERY_BEAT_SCHEDULE); it runs each pass that settings.STATELAB_RUN_WATCHERS names, one per table of
runs, so this package never names an app. Each pass is `lapsed_runs_watch` over its table: a running run
whose heartbeat is older than STATELAB_RUN_LAPSE_SECONDS is locked (skipped when another watchdog
holds it), then re-queued with the reason ("worker w@host lost (no heartbeat since ...); re-queued
(attempt 2 of 3)") and its message sent again by the owner's ``requeue``, or, after
STATELAB_RUN_MAX_ATTEMPTS claims, failed ("worker lost 3 times: last worker ... lost ...") and
handed to the owner's ``failed`` to settle what it was for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings
from django.db import transaction
from django.utils.module_loading import import_string

from .claim import run_fail
from .heartbeat import lapsed_before, max_attempts
from .models import RunStatus, TrackedRun

log = logging.getLogger(__name__)

# Runs looked at per pass and table: a backlog is worked through over the next ticks.
PASS_LIMIT = 500


def lapsed_runs_watch(
    model: type[TrackedRun],
    *,
    requeue: Callable[[TrackedRun], list[str]],
    failed: Callable[..., None],
    limit: int = PASS_LIMIT,
) -> dict[str, int]:
    """One pass over ``model``'s lapsed runs; how many it re-queued and failed.

    ``requeue(run)``, called with the locked row already set back to queued with its reason, sets
    whatever else a new attempt starts from, arranges the message (``transaction.on_commit``) and
    returns the names of the fields it set. ``failed(run=, reason=)`` settles the run's owner once
    the run is failed with the reason."""
    requeued = failed_count = 0
    lapsed = model.objects.filter(status=RunStatus.RUNNING, heartbeat_at__lt=lapsed_before())
    for run_id in lapsed.values_list("pk", flat=True)[:limit]:
        with transaction.atomic():
            run = lapsed.select_for_update(skip_locked=True).filter(pk=run_id).first()
            if run is None:
                continue  # beat again, or taken meanwhile
            lost = f"worker {run.worker or '?'} lost (no heartbeat since {run.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC)"
            if run.attempts >= max_attempts():
                reason = f"worker lost {run.attempts} times: last {lost}"
                log.warning("%s %s failed: %s", model.__name__, run.pk, reason)
                if run_fail(run=run, reason=reason):
                    failed(run=run, reason=reason)
                failed_count += 1
                continue
            run.status = RunStatus.QUEUED
            run.reason = f"{lost}; re-queued (attempt {run.attempts + 1} of {max_attempts()})"
            log.warning("%s %s: %s", model.__name__, run.pk, run.reason)
            also = requeue(run)
            run.save(update_fields=["status", "reason", *also])
            requeued += 1
    return {"requeued": requeued, "failed": failed_count}


def runs_watch_all() -> dict[str, int]:
    """Every table's pass (settings.STATELAB_RUN_WATCHERS: label -> dotted path of a function that
    returns its counts), each count under its table's label ("imports_requeued")."""
    counts: dict[str, int] = {}
    for label, path in getattr(settings, "STATELAB_RUN_WATCHERS", {}).items():
        counts.update({f"{label}_{key}": n for key, n in import_string(path)().items()})
    return counts
