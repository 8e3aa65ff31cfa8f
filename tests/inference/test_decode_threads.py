"""Frame decoding threads are bounded by the worker's CPUs shared among the tasks it runs at once
(inference/video_frames.py: worker_threads; on_worker_setup sets the task count when a Celery
worker is set up, before its pool processes are forked, so they inherit it)."""

import os

import pytest

from inference import video_frames


@pytest.fixture
def cpus(monkeypatch):
    monkeypatch.delenv(video_frames.WORKER_TASKS_ENV, raising=False)

    def set_cpus(n: int):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(n)))

    return set_cpus


@pytest.mark.parametrize(
    ("n_cpus", "tasks", "threads"),
    [
        (4, None, 4),
        (16, None, 4),
        (1, None, 1),  # one task: its CPUs, at most 4
        (4, "4", 1),
        (8, "2", 4),
        (8, "4", 2),
        (4, "8", 1),
        (4, "x", 4),
        (4, "0", 4),
    ],
)
def test_threads_share_the_cpus_among_the_tasks_the_worker_runs_at_once(cpus, monkeypatch, n_cpus, tasks, threads):
    cpus(n_cpus)
    if tasks is not None:
        monkeypatch.setenv(video_frames.WORKER_TASKS_ENV, tasks)
    assert video_frames.worker_threads() == threads


# A real worker (celery's Worker, as `celery -A config worker` makes it) set up to the point where
# it would start its pool, in its own process (a worker made in the test process would install
# Celery's Django fixups for the rest of the session); CPUs fixed at 4 through the affinity.
PROBE = """
import os, sys
os.sched_getaffinity = lambda pid: {0, 1, 2, 3}
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from config.celery import app
from inference.video_frames import WORKER_TASKS_ENV, worker_threads
pool, concurrency = sys.argv[1], sys.argv[2]
worker = app.Worker(concurrency=concurrency if concurrency == "auto" else int(concurrency), pool_cls=pool,
                    queues=["default"], quiet=True, redirect_stdouts=False, without_gossip=True,
                    without_mingle=True, without_heartbeat=True)
assert WORKER_TASKS_ENV not in os.environ
worker.on_start()  # (the pool is started after this, by the worker's blueprint)
print(os.environ.get(WORKER_TASKS_ENV), worker_threads())
"""


@pytest.mark.parametrize(
    ("pool", "concurrency", "tasks", "threads"),
    [
        ("prefork", "4", "4", 1),  # the compose CPU worker: 4 processes on 4 CPUs, one thread each
        ("prefork", "2", "2", 2),
        ("threads", "2", "2", 2),  # two tasks in one process share its CPUs the same way
        ("solo", "1", "1", 4),  # the GPU worker: one task at a time
        ("solo", "8", "1", 4),  # solo runs one task whatever its concurrency says
    ],
)
def test_a_celery_worker_tells_its_tasks_how_many_share_its_cpus(pool, concurrency, tasks, threads):
    import subprocess
    import sys
    from pathlib import Path

    from .worker import process_env

    env = {k: v for k, v in process_env().items() if k != video_frames.WORKER_TASKS_ENV}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, pool, concurrency],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == [tasks, str(threads)]


def test_auto_concurrency_is_counted_once_resolved():
    import subprocess
    import sys
    from pathlib import Path

    from .worker import process_env

    env = {k: v for k, v in process_env().items() if k != video_frames.WORKER_TASKS_ENV}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, "prefork", "auto"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    tasks, threads = out.stdout.split()
    assert int(tasks) >= 1 and int(threads) == max(1, min(4, 4 // int(tasks)))
