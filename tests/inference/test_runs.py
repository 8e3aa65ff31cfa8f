"""Tracked background runs against the database: claims, duplicates, the watchdog's bounded
attempts, the heartbeat thread, and what the job page and the admin say about chunks and workers.

The watchdog is called here as beat calls it; a lost worker is a run whose heartbeat is old
(written into the row: the settings keep their production values). Real killed workers are in
test_worker_kill.py.
"""

import time
from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone

from annotation.models import Item, ItemStatus, Role
from background.claim import run_claim, run_finish, run_mine
from background.heartbeat import RowHeartbeat
from background.models import RunStatus
from inference import services
from inference.models import BackgroundRun, InferenceJob, JobStatus, Prediction
from inference.services import recovery, runs

from . import factories

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(monkeypatch):
    """The messages services send (task, args, queue, tracked_run), instead of the broker."""
    messages = []

    def record(task, *args, queue=None, tracked_run=None):
        messages.append((task, args, queue, tracked_run))

    monkeypatch.setattr(runs, "enqueue", record)
    monkeypatch.setattr(recovery, "enqueue", record)
    return messages


def started_job(make_project, tmp_path, n_items=4, chunk_size=4):
    project = make_project("st", "status")
    items = factories.status_items(project, n_items, tmp_path)
    endpoint = services.endpoint_create(name="Random", backend="random", options={"seed": 0})
    job = services.job_create(
        endpoint=endpoint,
        project=project,
        release=factories.release_of(project, items),
        params={"chunk_size": chunk_size},
        start=False,
    )
    services.job_start(job_id=job.pk)
    job.refresh_from_db()
    return job, items


def lose(run: BackgroundRun) -> None:
    """The claiming worker died: its heartbeat is older than the lapse."""
    old = timezone.now() - timedelta(seconds=settings.STATELAB_RUN_LAPSE_SECONDS + 1)
    BackgroundRun.objects.filter(pk=run.pk).update(heartbeat_at=old)


def test_chunks_are_rows_made_with_the_plan_and_sent_with_their_id(make_project, tmp_path, sent):
    job, _ = started_job(make_project, tmp_path, n_items=10, chunk_size=4)
    chunks = list(BackgroundRun.objects.filter(job=job, chunk_index__isnull=False).order_by("chunk_index"))
    assert [(c.chunk_index, len(c.args[1]), c.queue, c.status) for c in chunks] == [
        (0, 4, "api", "queued"),
        (1, 4, "api", "queued"),
        (2, 2, "api", "queued"),
    ]
    assert [m for m in sent if m[0] == "inference.tasks.run_api_chunk"] == [
        ("inference.tasks.run_api_chunk", (job.pk, c.args[1]), None, c.pk) for c in chunks
    ]


def test_a_claim_is_taken_once_and_a_duplicate_delivery_is_a_no_op(make_project, tmp_path, sent):
    job, _ = started_job(make_project, tmp_path)
    chunk = BackgroundRun.objects.get(job=job, chunk_index=0)
    first = run_claim(BackgroundRun, run_id=chunk.pk, worker="a@host")
    assert (first.status, first.attempts, first.worker) == (RunStatus.RUNNING, 1, "a@host")
    assert run_claim(BackgroundRun, run_id=chunk.pk, worker="b@host") is None  # running, heartbeat fresh
    lose(first)
    second = run_claim(BackgroundRun, run_id=chunk.pk, worker="b@host")  # the original redelivered after a lapse
    assert (second.attempts, second.worker) == (2, "b@host")
    assert run_finish(run=first) is False  # the lost claim cannot end the new one
    assert run_finish(run=second) is True
    assert run_claim(BackgroundRun, run_id=chunk.pk, worker="c@host") is None  # done: a late duplicate does nothing


def test_the_tracked_task_runs_a_chunk_once_and_ignores_a_late_duplicate(make_project, tmp_path, eager):
    from inference.tasks import run_api_chunk

    job, _ = started_job(make_project, tmp_path)  # eager: the chunk ran at commit
    job.refresh_from_db()
    chunk = BackgroundRun.objects.get(job=job, chunk_index=0)
    assert (job.status, chunk.status, chunk.attempts) == (JobStatus.FINISHED, RunStatus.FINISHED, 1)
    assert run_api_chunk.apply(args=chunk.args, kwargs={"tracked_run": chunk.pk}).get() is None
    assert BackgroundRun.objects.get(pk=chunk.pk).attempts == 1
    assert Prediction.objects.filter(job=job).count() == 24
    # The job's other runs (export, board warm-up) were tracked too.
    assert set(BackgroundRun.objects.filter(job=job).values_list("celery_task", "status")) == {
        ("inference.tasks.run_api_chunk", "finished"),
        ("inference.tasks.export_job", "finished"),
        ("evaluation.tasks.warm_boards", "finished"),
    }


def test_the_watchdog_requeues_a_lost_chunk_boundedly_then_fails_it_and_the_job_with_the_reason(
    make_project, tmp_path, sent
):
    job, items = started_job(make_project, tmp_path)
    chunk = BackgroundRun.objects.get(job=job, chunk_index=0)
    sent.clear()
    for attempt in (1, 2):
        run = run_claim(BackgroundRun, run_id=chunk.pk, worker="w@host")
        assert run.attempts == attempt
        assert recovery.runs_watch()["requeued"] == 0  # heartbeat fresh: left alone
        lose(run)
        assert recovery.runs_watch() == {"requeued": 1, "failed": 0, "resent": 0, "jobs_settled": 0}
        chunk.refresh_from_db()
        assert chunk.status == RunStatus.QUEUED
        assert f"re-queued (attempt {attempt + 1} of 3)" in chunk.reason and "worker w@host lost" in chunk.reason
        assert sent[-1] == ("inference.tasks.run_api_chunk", (job.pk, chunk.args[1]), "api", chunk.pk)
    run = run_claim(BackgroundRun, run_id=chunk.pk, worker="w@host")
    lose(run)
    assert recovery.runs_watch()["failed"] == 1
    chunk.refresh_from_db()
    assert chunk.status == RunStatus.FAILED and chunk.reason.startswith("worker lost 3 times: last worker w@host lost")
    assert [m[0] for m in sent] == ["inference.tasks.run_api_chunk"] * 2 + ["inference.tasks.export_job"]  # no third
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "worker lost 3 times" in job.error
    failed = Prediction.objects.filter(job=job, status="failed")
    assert failed.count() == 24 and {p.error for p in failed} == {chunk.reason}
    assert run_claim(BackgroundRun, run_id=chunk.pk, worker="late@host") is None  # the original message, an hour later


@pytest.mark.parametrize(
    "protocol, make_items, key",
    [
        ("status", factories.status_items, "suggest"),
        ("visualtrans", factories.visualtrans_items, "qa"),
    ],
)
def test_a_lost_suggestion_chunk_fails_the_one_query_of_each_unanswered_item(
    make_project, tmp_path, sent, protocol, make_items, key
):
    project = make_project("sg", protocol)
    items = make_items(project, 3, tmp_path)
    Item.objects.filter(pk__in=[i.pk for i in items]).update(status=ItemStatus.PENDING)
    endpoint = services.endpoint_create(name="Random", backend="random", options={"seed": 0})
    job = services.job_create(endpoint=endpoint, project=project, mode="suggest", params={"chunk_size": 3}, start=False)
    services.job_start(job_id=job.pk)
    chunk = BackgroundRun.objects.get(job=job, chunk_index=0)
    assert chunk.args[1] == [i.pk for i in items]
    # The worker answered the first item, then died; a redelivery would not ask that item again.
    assert services.job_run_chunk(job_id=job.pk, item_ids=[items[0].pk]) == 1
    assert services.job_run_chunk(job_id=job.pk, item_ids=[items[0].pk]) == 0
    run = run_claim(BackgroundRun, run_id=chunk.pk, worker="w@host")

    recovery.run_failed(run=run, reason="worker lost 3 times: last worker w@host lost")

    assert sorted(Prediction.objects.filter(job=job).values_list("item_id", "query", "status", "error")) == [
        (items[0].pk, key, "ok", ""),
        (items[1].pk, key, "failed", "worker lost 3 times: last worker w@host lost"),
        (items[2].pk, key, "failed", "worker lost 3 times: last worker w@host lost"),
    ]
    job.refresh_from_db()
    assert (job.status, job.total_queries, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, 3, 1, 2)


def test_a_job_whose_chunks_all_ended_without_answers_is_failed_not_left_running(make_project, tmp_path, sent):
    job, _ = started_job(make_project, tmp_path)
    BackgroundRun.objects.filter(job=job).update(status=RunStatus.FINISHED)  # ended, yet nothing stored
    assert recovery.runs_watch()["jobs_settled"] == 1
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.error == "every chunk ended but 24 of 24 queries have no answer"


def test_the_heartbeat_thread_refreshes_the_claimed_row_at_the_production_interval(make_project, tmp_path, sent):
    job, _ = started_job(make_project, tmp_path)
    run = run_claim(BackgroundRun, run_id=BackgroundRun.objects.get(job=job, chunk_index=0).pk, worker="w@host")
    lose(run)
    before = BackgroundRun.objects.get(pk=run.pk).heartbeat_at
    with RowHeartbeat(run_mine(run)):
        time.sleep(settings.STATELAB_RUN_HEARTBEAT_SECONDS + 1.5)
    after = BackgroundRun.objects.get(pk=run.pk).heartbeat_at
    assert after > before and timezone.now() - after < timedelta(seconds=5)
    assert recovery.runs_watch()["requeued"] == 0


def test_job_page_and_admin_show_chunks_and_say_when_no_worker_consumes_the_queue(
    broker, make_project, make_user, tmp_path, sent
):
    job, _ = started_job(make_project, tmp_path, n_items=10, chunk_size=4)
    researcher = make_user("res")
    job.project.memberships.create(user=researcher, role=Role.RESEARCHER)
    client = Client()
    client.force_login(researcher)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert '3 chunks<span class="chunk-count" data-status="queued"> · 3 queued</span>' in page
    assert "No worker is consuming the api queue: start one with" in page

    admin = make_user("root", superuser=True)
    client.force_login(admin)
    listing = client.get("/admin/inference/inferencejob/").content.decode()
    assert "3 chunks: 3 queued" in listing
    endpoints = client.get("/admin/inference/modelendpoint/").content.decode()
    assert "No worker is consuming the api queue" in endpoints
    runs_page = client.get("/admin/inference/backgroundrun/").content.decode()
    assert "run_api_chunk" in runs_page
    assert InferenceJob.objects.get(pk=job.pk).status == JobStatus.RUNNING


def test_the_watchdog_sends_again_only_queued_runs_missing_from_the_broker(make_project, tmp_path, sent, broker):
    # Three chunks queued; the broker (this run's real Redis db) holds the messages of two: the
    # third was lost with the broker. Sent long enough ago, that one is sent again, once.
    job, _ = started_job(make_project, tmp_path, n_items=12, chunk_size=4)
    chunks = list(BackgroundRun.objects.filter(job=job, chunk_index__isnull=False).order_by("chunk_index"))
    assert len(chunks) == 3 and {c.sent_at is not None for c in chunks} == {True}
    broker.rpush("api", b"message of chunk 0", b"message of chunk 1")
    assert recovery._broker_waiting("api") == 2, (settings.CELERY_BROKER_URL, broker.keys())
    sent.clear()
    assert recovery.runs_resend_missing() == 0  # sent just now: a message may be on its way
    long_ago = timezone.now() - timedelta(seconds=settings.STATELAB_RUN_RESEND_SECONDS + 1)
    BackgroundRun.objects.filter(pk__in=[c.pk for c in chunks]).update(sent_at=long_ago)
    assert recovery.runs_resend_missing() == 1
    assert sent == [("inference.tasks.run_api_chunk", (job.pk, chunks[0].args[1]), "api", chunks[0].pk)]
    broker.rpush("api", b"message sent again")  # what the real send put in the broker
    assert recovery.runs_resend_missing() == 0  # every queued run has its message: nothing sent
    BackgroundRun.objects.filter(pk=chunks[0].pk).update(status=RunStatus.FINISHED)
    assert recovery.runs_resend_missing() == 0  # more messages than queued runs (a duplicate): nothing


# ---- messages a worker holds unacked: kombu's Redis transport keeps them in the `unacked` hash
# (by delivery tag) and their delivery time in the `unacked_index` sorted set, not in the queue.


def chunk_message(run: BackgroundRun, **options) -> None:
    """The chunk's message as services and TrackedTask's retry send it (a retry: with a countdown)."""
    from inference.tasks import run_api_chunk

    run_api_chunk.apply_async(args=list(run.args), kwargs={"tracked_run": run.pk}, **options)


def held_longer(broker, seconds: float) -> None:
    """What the broker holds `seconds` later: each unacked message delivered that much earlier."""
    for tag, delivered in broker.zrange("unacked_index", 0, -1, withscores=True):
        broker.zadd("unacked_index", {tag: delivered - seconds})


def test_the_watchdog_leaves_messages_a_worker_holds_and_sends_those_whose_holder_is_gone(
    make_project, tmp_path, sent, broker
):
    # Two chunks queued, sent long ago; their messages taken from the queue and not acked, as a
    # worker's consumer takes them (kombu's basic_get writes the unacked hash and index).
    job, _ = started_job(make_project, tmp_path, n_items=8, chunk_size=4)
    chunks = list(BackgroundRun.objects.filter(job=job, chunk_index__isnull=False).order_by("chunk_index"))
    for chunk in chunks:
        chunk_message(chunk)
    long_ago = timezone.now() - timedelta(seconds=settings.STATELAB_RUN_RESEND_SECONDS + 1)
    BackgroundRun.objects.filter(pk__in=[c.pk for c in chunks]).update(sent_at=long_ago)
    from config.celery import app

    with app.connection_for_read() as connection:
        channel = connection.default_channel
        taken = [channel.basic_get("api") for _ in chunks]
        assert all(taken) and (broker.llen("api"), broker.hlen("unacked")) == (0, 2)
        sent.clear()
        assert recovery.runs_resend_missing() == 0  # held, delivered just now: not missing
        assert sent == []
        # The holder is gone without acking (a worker that lost its broker connection): Redis gives
        # the messages back only after the visibility timeout, an hour. Past the resend delay:
        held_longer(broker, settings.STATELAB_RUN_RESEND_SECONDS + 1)
        assert recovery.runs_resend_missing() == 2
        assert sorted(m[3] for m in sent) == [c.pk for c in chunks]
        assert recovery.runs_resend_missing() == 0  # sent just now: not again (sent_at)
        assert len(sent) == 2
        for message in taken:
            message.ack()


@pytest.mark.worker
@pytest.mark.slow
def test_a_retry_waiting_out_its_countdown_in_a_live_worker_is_not_sent_again(make_project, tmp_path, sent, broker):
    from .worker import start_worker, stop_worker, wait_for

    # given two queued chunks sent long ago: the first retried with a countdown longer than the
    # resend delay (TrackedTask re-queues the row, keeping its sent_at; the retry message waits
    # in a worker's memory, unacked, until it is due), the second's message lost
    job, _ = started_job(make_project, tmp_path, n_items=8, chunk_size=4)
    first, second = BackgroundRun.objects.filter(job=job, chunk_index__isnull=False).order_by("chunk_index")
    long_ago = timezone.now() - timedelta(seconds=settings.STATELAB_RUN_RESEND_SECONDS + 1)
    BackgroundRun.objects.filter(pk__in=[first.pk, second.pk]).update(sent_at=long_ago)
    chunk_message(first, countdown=10 * settings.STATELAB_RUN_RESEND_SECONDS)
    worker = start_worker("holder", tmp_path / "worker.log", queues="api")
    try:
        wait_for(
            lambda: (broker.llen("api"), broker.hlen("unacked")) == (0, 1),
            90,
            "the worker to take the retry message and hold it",
        )
        sent.clear()
        # when the watchdog looks: only the lost one is sent (a mere count of held messages would
        # have picked the first by its lower id and left the second lost)
        assert recovery.runs_resend_missing() == 1
        assert sent == [("inference.tasks.run_api_chunk", (job.pk, second.args[1]), "api", second.pk)]
        # and again when the worker has held the retry longer than the resend delay: its ETA is ahead
        BackgroundRun.objects.filter(pk=second.pk).update(status=RunStatus.FINISHED)
        held_longer(broker, settings.STATELAB_RUN_RESEND_SECONDS + 1)
        assert recovery.runs_resend_missing() == 0
        assert len(sent) == 1
        assert BackgroundRun.objects.get(pk=first.pk).status == RunStatus.QUEUED  # not run: still waiting
    finally:
        stop_worker(worker)
    # A worker that stops gives back what it holds: waiting in the queue again, so still not missing.
    assert (broker.llen("api"), broker.hlen("unacked")) == (1, 0)
    assert recovery.runs_resend_missing() == 0
