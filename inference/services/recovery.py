"""What happens to work whose worker died or which failed for good.

`runs_watch` is the watchdog's pass over a job's runs (background/watchdog.py, named in
settings.STATELAB_RUN_WATCHERS): a running run whose heartbeat lapsed (STATELAB_RUN_LAPSE_SECONDS)
is re-queued and sent again, up to STATELAB_RUN_MAX_ATTEMPTS claims; then it fails with the reason
("worker lost 3 times: ...") and `run_settle_job` tells its job (as it does for a run that failed
in its worker: settings.STATELAB_TRACKED_RUN_FAILED): a lost chunk's unanswered queries are
recorded as failed with that reason (so the job ends, FAILED when nothing succeeded, and "retry
failed" can ask them again); a lost start fails the job. A queued run is sent again only when its
message is missing from the broker: neither held by a worker (below) nor accounted for by its
queue, which holds fewer messages than it has queued runs, and the run was last sent over
STATELAB_RUN_RESEND_SECONDS ago (a broker that lost messages, or a worker holding some unacked when
its broker connection died); a duplicate finds nothing to claim. A message a worker holds unacked
is not in the queue: kombu's Redis transport keeps it in the `unacked` hash (by delivery tag) and
its delivery time in the `unacked_index` sorted set until it is acked, so a retry waiting out its
countdown in a worker's memory is found there and its run is not sent twice; one held over
STATELAB_RUN_RESEND_SECONDS past its delivery and its ETA without its run being claimed has lost
its holder and is sent again. A queue merely without a worker is shown on the pages and in
/healthz, not guessed at here. Last, a running job whose chunks have all ended is finished, or
failed with the count of queries nothing answered: no job stays running for ever.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from background.claim import run_fail
from background.models import RunStatus
from background.watchdog import lapsed_runs_watch
from config.enqueue import enqueue

from ..models import BackgroundRun, InferenceJob, JobStatus, Prediction, PredictionStatus
from .frames import PREPARE_TASK, chunk_after_frames
from .jobs import job_fail, job_query_keys, job_refresh_finished
from .predictions import PredictionRow, predictions_upsert

log = logging.getLogger(__name__)

CHUNK_TASKS = ("inference.tasks.run_api_chunk", "inference.tasks.run_gpu_chunk")
START_TASK = "inference.tasks.start_job"


def run_failed(*, run: BackgroundRun, reason: str) -> None:
    """Fail this claim of the run with the reason, then settle its job."""
    if run_fail(run=run, reason=reason):
        run_settle_job(run=run, reason=reason)


def run_settle_job(*, run: BackgroundRun, reason: str) -> None:
    """A run failed for good: its job must still reach a final state, with the reason."""
    if run.job_id is None:
        return
    if run.celery_task in CHUNK_TASKS:
        _chunk_lost(run, reason)
    elif run.celery_task == PREPARE_TASK:
        # Frames not prepared: the chunk runs anyway and decodes them itself (slower, logged).
        _, item_ids = run.args
        chunk_after_frames(job_id=run.job_id, item_ids=item_ids)
    elif run.celery_task == START_TASK:
        job_fail(job=InferenceJob(pk=run.job_id), error=f"the job could not start: {reason}"[:4000])


def _chunk_lost(run: BackgroundRun, reason: str) -> None:
    job = InferenceJob.objects.filter(pk=run.job_id).first()
    if job is None or job.status != JobStatus.RUNNING:
        return
    _, item_ids = run.args
    keys = job_query_keys(job)
    ok = set(
        Prediction.objects.filter(job=job, item_id__in=item_ids, status=PredictionStatus.OK).values_list(
            "item_id", "query"
        )
    )
    rows = [
        PredictionRow(item_id, key, PredictionStatus.FAILED, error=reason[:2000])
        for item_id in item_ids
        for key in keys
        if (item_id, key) not in ok
    ]
    predictions_upsert(job_id=job.pk, rows=rows)  # also finishes the job when that was the last chunk


def runs_watch() -> dict[str, int]:
    """One watchdog pass; returns how many runs it re-queued and failed, and jobs it settled."""
    counts = lapsed_runs_watch(BackgroundRun, requeue=_run_requeued, failed=run_settle_job)
    return {**counts, "resent": runs_resend_missing(), "jobs_settled": jobs_settle_orphans()}


def _run_requeued(run: BackgroundRun) -> list[str]:
    """The lost run's message, sent again once the watchdog's transaction commits."""
    run.sent_at = timezone.now()
    message = (run.celery_task, list(run.args), run.queue, run.pk)
    transaction.on_commit(lambda: enqueue(message[0], *message[1], queue=message[2], tracked_run=message[3]))
    return ["sent_at"]


# kombu's Redis transport (kombu/transport/redis.py, Channel): its key names and their defaults,
# which CELERY_BROKER_TRANSPORT_OPTIONS may change. A queue's priority lists are "<queue><sep><n>".
_TRANSPORT_DEFAULTS = {
    "sep": "\x06\x16",
    "unacked_key": "unacked",
    "unacked_index_key": "unacked_index",
    "global_keyprefix": "",
}


def _transport_option(name: str) -> str:
    options = getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", None) or {}
    return options.get(name, _TRANSPORT_DEFAULTS[name])


def _broker():
    """A client of the Redis broker (None when the broker is not Redis)."""
    url = getattr(settings, "CELERY_BROKER_URL", "") or ""
    if not url.startswith(("redis://", "rediss://")):
        return None
    import redis

    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def _broker_waiting(queue: str, client=None) -> int | None:
    """Messages waiting in a Redis broker queue (None when the broker is not Redis or not reachable)."""
    client = client or _broker()
    if client is None:
        return None
    import redis

    prefix, sep = _transport_option("global_keyprefix"), _transport_option("sep")
    try:
        keys = [queue] + [f"{queue}{sep}{p}" for p in (3, 6, 9)]
        return sum(int(client.llen(prefix + k)) for k in keys)
    except redis.RedisError:
        return None


def _tracked_run_and_eta(stored: bytes) -> tuple[int | None, float | None]:
    """The ``tracked_run`` of a message as kombu keeps it unacked (JSON ``[message, exchange,
    routing key]``; Celery's protocol 2: the body base64 JSON ``[args, kwargs, embed]``, the ETA an
    ISO time in the headers) and its ETA as a Unix time. (None, None) for anything else, which then
    counts as not held: at worst a duplicate is sent, and finds nothing to claim."""
    try:
        message = json.loads(stored)[0]
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        run = json.loads(body)[1].get("tracked_run")
        eta = message.get("headers", {}).get("eta")
        moment = datetime.fromisoformat(eta) if eta else None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError):
        return None, None
    if not isinstance(run, int) or isinstance(run, bool):
        return None, None
    if moment is not None and moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # Celery sends UTC
    return run, moment.timestamp() if moment else None


def _runs_held_by_workers(client, *, since: float) -> set[int]:
    """Tracked runs whose message a worker holds unacked, delivered or due (its ETA) at or after
    ``since`` (a Unix time). Raises redis' errors."""
    prefix = _transport_option("global_keyprefix")
    delivered = client.zrange(prefix + _transport_option("unacked_index_key"), 0, -1, withscores=True)
    if not delivered:
        return set()
    tags = [tag for tag, _ in delivered]
    held = set()
    for (_, delivered_at), stored in zip(delivered, client.hmget(prefix + _transport_option("unacked_key"), tags)):
        if stored is None:  # acked meanwhile
            continue
        run, eta = _tracked_run_and_eta(stored)
        if run is not None and max(delivered_at, eta or 0.0) >= since:
            held.add(run)
    return held


def runs_resend_missing() -> int:
    """Send again the queued runs whose messages the broker no longer holds (see the module doc)."""
    resend_seconds = float(getattr(settings, "STATELAB_RUN_RESEND_SECONDS", 60))
    cutoff = timezone.now() - timedelta(seconds=resend_seconds)
    resent = 0
    queued = BackgroundRun.objects.filter(status=RunStatus.QUEUED)
    queues = queued.order_by().values_list("queue", flat=True).distinct()
    if not queues:
        return 0
    client = _broker()
    if client is None:
        return 0
    import redis

    try:
        held = _runs_held_by_workers(client, since=time.time() - resend_seconds)
    except redis.RedisError:
        return 0
    for queue in sorted(queues):
        waiting = _broker_waiting(queue, client)
        if waiting is None:
            continue
        missing = BackgroundRun.objects.filter(status=RunStatus.QUEUED, queue=queue).exclude(pk__in=held)
        deficit = missing.count() - waiting
        if deficit <= 0:
            continue
        stale = missing.filter(Q(sent_at__lt=cutoff) | Q(sent_at__isnull=True, created_at__lt=cutoff)).order_by("pk")
        for run in stale[: min(deficit, 500)]:
            if not BackgroundRun.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(sent_at=timezone.now()):
                continue
            try:
                enqueue(run.celery_task, *run.args, queue=run.queue, tracked_run=run.pk)
            except Exception:  # the broker is down again: the next pass tries
                log.exception("could not send run %s again", run.pk)
                return resent
            log.warning("run %s (%s) was missing from the %s queue: sent again", run.pk, run.celery_task, queue)
            resent += 1
    return resent


def jobs_settle_orphans() -> int:
    """Running jobs with chunk runs, every one of them over: finish them, or fail them with the
    number of queries nothing answered (a bug or an outside edit, but never running for ever)."""
    unfinished = BackgroundRun.objects.filter(job=OuterRef("pk"), status__in=(RunStatus.QUEUED, RunStatus.RUNNING))
    chunked = BackgroundRun.objects.filter(job=OuterRef("pk"), chunk_index__isnull=False)
    settled = 0
    for job in InferenceJob.objects.filter(status=JobStatus.RUNNING).filter(Exists(chunked), ~Exists(unfinished)):
        job_refresh_finished(job_id=job.pk)
        job.refresh_from_db()
        if job.status == JobStatus.RUNNING:
            missing = job.total_queries - job.done_queries - job.failed_queries
            job_fail(job=job, error=f"every chunk ended but {missing} of {job.total_queries} queries have no answer")
        settled += 1
        log.warning("job %s settled by the watchdog at %s", job.pk, timezone.now())
    return settled
