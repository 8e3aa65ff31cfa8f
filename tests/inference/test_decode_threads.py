"""Frame decoding threads are bounded by the worker's CPUs shared among the tasks it runs at once
(inference/video_frames.py: worker_threads; config/workers.py sets the task count when a Celery
worker is made, before its pool processes are forked, so they inherit it)."""
import os

import pytest

from inference import video_frames


@pytest.fixture
def cpus(monkeypatch):
    monkeypatch.delenv(video_frames.WORKER_TASKS_ENV, raising=False)

    def set_cpus(n: int):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(n)))

    yield set_cpus
    os.environ.pop(video_frames.WORKER_TASKS_ENV, None)  # (a worker made here set it directly)


@pytest.mark.parametrize(("n_cpus", "tasks", "threads"), [
    (4, None, 4), (16, None, 4), (1, None, 1),  # one task: its CPUs, at most 4
    (4, "4", 1), (8, "2", 4), (8, "4", 2), (4, "8", 1), (4, "x", 4), (4, "0", 4),
])
def test_threads_share_the_cpus_among_the_tasks_the_worker_runs_at_once(cpus, monkeypatch, n_cpus, tasks, threads):
    cpus(n_cpus)
    if tasks is not None:
        monkeypatch.setenv(video_frames.WORKER_TASKS_ENV, tasks)
    assert video_frames.worker_threads() == threads


def test_a_celery_worker_tells_its_tasks_its_concurrency(cpus, monkeypatch):
    from config.celery import app

    cpus(4)
    # Making the worker (what `celery worker -c 4` does before it starts its pool) sends worker_init.
    app.WorkController(concurrency=4, pool_cls="prefork", queues=["default"], without_gossip=True,
                       without_mingle=True, without_heartbeat=True)
    assert os.environ[video_frames.WORKER_TASKS_ENV] == "4"
    assert video_frames.worker_threads() == 1  # the compose CPU worker: 4 processes on 4 CPUs
    del os.environ[video_frames.WORKER_TASKS_ENV]
    app.WorkController(concurrency=1, pool_cls="solo", queues=["gpu"], without_gossip=True,
                       without_mingle=True, without_heartbeat=True)
    assert video_frames.worker_threads() == 4  # the GPU worker: one task at a time
