"""Faults under an inference job: a real Celery worker and beat (production settings, the runs
watchdog included) run an API-judge job against the local OpenAI stand-in on the private stack
(tests/helpers/fault_stack.py); PostgreSQL is stopped mid-chunk and started again, then Redis (the
broker, with its append-only file) is killed and started again. The job must finish with one
prediction per (item, query), the worker reconnecting without restarts, and at most the one chunk
in flight at the stop may meet a connection the restart broke (and is retried). The same restarts
under annotation traffic: tests/test_faults.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import psycopg
import pytest

from tests.faults.instances import CeleryBeat, CeleryWorker, python_module, wait_until
from tests.helpers.fault_stack import DOWN_SECONDS, Stack

pytestmark = [pytest.mark.slow]


def job_state(stack: Stack, job_id: int):
    try:
        return stack.sql(
            "SELECT status, total_queries, done_queries, failed_queries FROM inference_inferencejob WHERE id = %s",
            (job_id,),
        )[0]
    except psycopg.OperationalError:
        return None


def done_queries(stack: Stack, job_id: int) -> int:
    return (job_state(stack, job_id) or ("", 0, 0, 0))[2]


# What a connection broken by a server restart says when it is used (psycopg 3, libpq, Django).
BROKEN_CONNECTION = (
    "terminating connection due to administrator command",
    "server closed the connection unexpectedly",
    "the connection is lost",
    "connection already closed",
    "the connection is closed",
)
# How psycopg 3 words a failed attempt to open a connection. An attempt made while the server shuts
# down can be refused with the same "terminating connection due to administrator command" (its new
# backend is told to stop during start-up): that is a connection the task never had, not one the
# restart broke, and a loaded machine makes it likely (seen in a clean-clone CI run).
CONNECT_FAILED = "connection failed: "


def tasks_retried_on_a_broken_connection(worker_log: Path) -> dict[str, str]:
    """The tasks that the worker's log shows retried because a connection they had open broke: id to reason."""
    retried = {}
    for line in worker_log.read_text(errors="replace").splitlines():
        head, sep, reason = line.partition("] retry: ")
        if sep and CONNECT_FAILED not in reason and any(text in reason for text in BROKEN_CONNECTION):
            retried.setdefault(head.rsplit("[", 1)[-1], reason)
    return retried


def test_redis_and_postgres_restarted_during_an_inference_job(stack, tmp_path):
    """A real worker and beat (production settings: the runs watchdog included) run an API-judge
    job against the local OpenAI stand-in; PostgreSQL is stopped mid-chunk and started again,
    then Redis (the broker, with its AOF as docker-compose.yml runs it) is killed and started
    again. The job must end `finished` with one prediction per (item, query)."""
    from tests.inference.openai_standin import StandIn

    standin = StandIn(latency=0.3, faults=False).start()
    worker = beat = None
    try:
        seeded = json.loads(
            python_module(
                stack.env,
                "tests.faults.seed",
                "job",
                "--items",
                "40",
                "--base-url",
                standin.base_url,
                "--workdir",
                str(tmp_path / "images"),
            )
        )
        job = seeded["job"]
        worker = CeleryWorker(stack.env, tmp_path / "worker.log")
        beat = CeleryBeat(stack.env, tmp_path)
        wait_until(lambda: done_queries(stack, job) >= 8, 90, "the job to make progress")
        stack.pg.stop("fast")
        time.sleep(DOWN_SECONDS)
        stack.pg.start()
        at = done_queries(stack, job)
        # The queued chunks go on at once; only the one in flight may wait for the watchdog (run
        # lapse 45 s, a pass every 15 s), which the final wait leaves time for.
        wait_until(lambda: done_queries(stack, job) >= at + 8, 30, "progress after the PostgreSQL restart")
        stack.redis.stop()
        time.sleep(DOWN_SECONDS)
        stack.redis.start()
        wait_until(
            lambda: (job_state(stack, job) or ("",))[0] in ("finished", "failed", "cancelled"),
            90,
            f"the job to end (worker log {tmp_path / 'worker.log'})",
        )
        rows = stack.sql("SELECT item_id, query, status FROM inference_prediction WHERE job_id = %s", (job,))
        assert sorted((i, q) for i, q, _ in rows) == sorted((i, "qa") for i in seeded["items"])
        assert {s for _, _, s in rows} == {"ok"}
        assert job_state(stack, job) == ("finished", 40, 40, 0)
        # The worker reconnects after the PostgreSQL restart without a task failing on a connection
        # the restart broke (Celery's Django fixup closes connections before and after each task):
        # only the one chunk in flight at the stop (concurrency 1) may meet it, and is retried.
        broken = tasks_retried_on_a_broken_connection(tmp_path / "worker.log")
        assert len(broken) <= 1, broken
    finally:
        for process in (beat, worker):
            if process is not None:
                process.stop()
        standin.stop()
