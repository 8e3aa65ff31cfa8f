"""Start real Celery worker and beat processes against the pytest database and this run's Redis db,
with the production settings (no shortened visibility timeout, heartbeat or lapse)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def database_url() -> str:
    db = settings.DATABASES["default"]
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def process_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DATABASE_URL=database_url(),  # the pytest database: committed rows are visible to the worker
        REDIS_URL=settings.CELERY_BROKER_URL,
        MEDIA_ROOT=str(settings.MEDIA_ROOT),
        STATELAB_CACHE_ROOT=str(settings.CACHE_ROOT),
    )
    # Production timing: nothing of the environment may shorten it.
    for name in (
        "CELERY_VISIBILITY_TIMEOUT",
        "STATELAB_RUN_HEARTBEAT_SECONDS",
        "STATELAB_RUN_LAPSE_SECONDS",
        "STATELAB_WATCHDOG_SECONDS",
        "STATELAB_WORKER_HEARTBEAT_SECONDS",
        "STATELAB_WORKER_TTL_SECONDS",
    ):
        env.pop(name, None)
    return env


def start_worker(name: str, log: Path, *, queues: str = "default,api,gpu") -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "-Q",
            queues,
            "--pool",
            "prefork",
            "-c",
            "1",
            "-n",
            f"{name}@%h",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "INFO",
        ],
        cwd=ROOT,
        env=process_env(),
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def start_beat(folder: Path) -> subprocess.Popen:
    """Celery beat with the production schedule (its watchdog every STATELAB_WATCHDOG_SECONDS)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "beat",
            "--schedule",
            str(folder / "beat-schedule"),
            "--loglevel",
            "INFO",
        ],
        cwd=ROOT,
        env=process_env(),
        stdout=open(folder / "beat.log", "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_worker(worker: subprocess.Popen) -> None:
    if worker.poll() is not None:
        return
    worker.send_signal(signal.SIGTERM)  # warm shutdown of the main process
    try:
        worker.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(5)


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def broker():
    """This run's Redis db, emptied before and after: no stale messages from an earlier run."""
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("needs REDIS_URL (a real broker)")
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.flushdb()
    yield client
    client.flushdb()
