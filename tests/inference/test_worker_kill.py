"""A real Celery worker is SIGKILLed in the middle of a job; a second worker finishes it exactly."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings

from inference import services
from inference.models import InferenceJob, JobStatus, Prediction

from . import factories
from .openai_standin import StandIn

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def _database_url() -> str:
    db = settings.DATABASES["default"]
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _start_worker(name: str, log: Path) -> subprocess.Popen:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=_database_url(),  # the pytest database: committed rows are visible to the worker
        REDIS_URL=settings.CELERY_BROKER_URL,
        MEDIA_ROOT=str(settings.MEDIA_ROOT),
        STATELAB_CACHE_ROOT=str(settings.CACHE_ROOT),
        CELERY_VISIBILITY_TIMEOUT="2",  # unacked messages of a dead worker come back after 2 s
    )
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "default,api,gpu", "--pool", "prefork",
         "-c", "1", "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "--loglevel", "INFO"],
        cwd=ROOT, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True,
    )


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def broker():
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("needs REDIS_URL (a real broker)")
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.flushdb()  # this test's own redis db: no stale messages from an earlier run
    yield client
    client.flushdb()


def test_killed_worker_mid_job_then_new_worker_completes_exactly_once(broker, make_project, tmp_path):
    standin = StandIn(latency=0.25, faults=False).start()
    workers: list[subprocess.Popen] = []
    try:
        project = make_project("vt", "visualtrans")
        items = factories.visualtrans_items(project, 40, tmp_path)
        endpoint = services.endpoint_create(name="slow", backend="openai", model_id="m", base_url=standin.base_url,
                                            concurrency=2, options={"timeout": 5, "max_retries": 1})
        job = services.job_create(endpoint=endpoint, project=project, release=factories.release_of(project, items),
                                  params={"chunk_size": 4})

        workers.append(_start_worker("first", tmp_path / "w1.log"))
        _wait(lambda: InferenceJob.objects.get(pk=job.pk).done_queries >= 8, 90, "the first worker to make progress")
        os.killpg(workers[0].pid, signal.SIGKILL)  # the worker and its pool child, no goodbye
        workers[0].wait(10)
        at_kill = InferenceJob.objects.get(pk=job.pk)
        requests_at_kill = len(standin.log)
        assert at_kill.status == JobStatus.RUNNING and 8 <= at_kill.done_queries < 40

        time.sleep(2.5)  # past the visibility timeout
        workers.append(_start_worker("second", tmp_path / "w2.log"))
        _wait(lambda: InferenceJob.objects.get(pk=job.pk).status == JobStatus.FINISHED, 120, "the job to finish")

        job.refresh_from_db()
        rows = list(Prediction.objects.filter(job=job).values_list("item_id", "query", "status"))
        assert len(rows) == 40
        assert sorted((i, q) for i, q, _ in rows) == sorted((it.pk, "qa") for it in items)
        assert {s for _, _, s in rows} == {"ok"}
        assert (job.total_queries, job.done_queries, job.failed_queries) == (40, 40, 0)
        # Only the not-yet-stored queries were asked after the kill.
        assert len(standin.log) - requests_at_kill <= 40 - at_kill.done_queries + 4
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)  # warm shutdown of the main process
                try:
                    w.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(w.pid, signal.SIGKILL)
        standin.stop()
