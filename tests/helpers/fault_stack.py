"""The private stack the fault tests (tests/test_faults.py, tests/test_faults_inference_job.py)
stop and start: PostgreSQL, Redis with its append-only file, StateLab migrated and seeded, and
gunicorn serving it, all private instances (tests/faults/), never the shared servers. The `stack`
fixture (a plugin of tests/conftest.py) starts one for the session: both files' tests run on the same
stack, one after the other, and it is removed when the session ends. Each outage lasts DOWN_SECONDS."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.faults.instances import Gunicorn, PrivatePostgres, PrivateRedis, manage, python_module, stack_env

DOWN_SECONDS = 3.0


@dataclass
class Stack:
    pg: PrivatePostgres
    redis: PrivateRedis
    env: dict
    workdir: Path
    web: Gunicorn
    seeded: dict

    def sql(self, statement: str, params=()) -> list[tuple]:
        with psycopg.connect(self.pg.url(), autocommit=True, connect_timeout=5) as conn:
            return conn.execute(statement, params).fetchall()


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("faults")
    pg, redis_server, web = PrivatePostgres(), PrivateRedis(appendonly=True), None
    started = time.monotonic()
    try:
        pg.init()
        redis_server.start()
        env = stack_env(pg, redis_server, workdir)
        manage(env, "migrate", "--noinput")
        seeded = json.loads(
            python_module(env, "tests.faults.seed", "annotation", "--items", "4000", "--annotators", "8")
        )
        web = Gunicorn(env, workdir / "gunicorn.log", access_log=workdir / "access.log")
        print(f"\nprivate stack up in {time.monotonic() - started:.1f} s (initdb, migrate, seed, gunicorn)")
        yield Stack(pg, redis_server, env, workdir, web, seeded)
    finally:
        if web is not None:
            web.stop()
        redis_server.destroy()
        pg.destroy()
