"""The demo's embedded PostgreSQL (config/demo_database.py): it starts from the wheel, answers,
stops when its block ends, and starts again on the same data directory with the data kept; a run
killed with its server (a stale postmaster.pid, a dead process in the wheel's list of users) does
not block the next start, which still stops the server when it ends.

The data directories live in a temporary folder of their own, not under pytest's: run as root,
PostgreSQL runs as another user, which must reach the folder (pytest resets its own to 0700).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import psycopg
import pytest

from config.demo_database import embedded_postgres

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
DATABASE = "statelab_demo_test"


@pytest.fixture
def pgdata():
    with tempfile.TemporaryDirectory(prefix="statelab-pg-") as folder:
        yield Path(folder) / "postgres"


def connect(where: dict) -> psycopg.Connection:
    return psycopg.connect(host=where["HOST"], port=where["PORT"], user=where["USER"], dbname=DATABASE, autocommit=True)


def postmaster_pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])


def gone(pid: int, *, within: float = 10.0) -> bool:
    """Whether process `pid` has ended (or is a zombie nobody reaps), given `within` seconds: the
    server removes its pid file, which `pg_ctl stop` waits for, a moment before it exits."""
    deadline = time.monotonic() + within
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def test_the_server_starts_answers_stops_and_starts_again_on_its_data(pgdata):
    with embedded_postgres(pgdata, database=DATABASE) as where:
        with connect(where) as conn:
            conn.execute("CREATE TABLE kept (note text)")
            conn.execute("INSERT INTO kept VALUES ('written by the first run')")
            assert conn.execute("SHOW server_version_num").fetchone()[0].startswith("18")
        first = postmaster_pid(pgdata)
    assert gone(first)
    assert not (pgdata / "postmaster.pid").exists()
    initialized = (pgdata / "PG_VERSION").stat().st_mtime_ns

    with embedded_postgres(pgdata, database=DATABASE) as where:
        with connect(where) as conn:
            assert conn.execute("SELECT note FROM kept").fetchall() == [("written by the first run",)]
        second = postmaster_pid(pgdata)
    assert second != first and gone(second)
    assert (pgdata / "PG_VERSION").stat().st_mtime_ns == initialized  # no second initdb


KILLED_RUN = r"""
import sys, time
from pathlib import Path
from config.demo_database import embedded_postgres
with embedded_postgres(Path(sys.argv[1]), database=sys.argv[2]):
    print("up", flush=True)
    time.sleep(600)
"""


def test_a_run_killed_with_its_server_does_not_block_the_next(pgdata):
    run = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, str(pgdata), DATABASE],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert run.stdout.readline().strip() == "up"
        killed = postmaster_pid(pgdata)
        os.kill(killed, signal.SIGKILL)
    finally:
        run.kill()
        run.wait()
    assert gone(killed)
    # What the killed run left: the server's pid file and the run in the wheel's list of users.
    assert postmaster_pid(pgdata) == killed
    assert json.loads((pgdata / ".handle_pids.json").read_text()) == [run.pid]

    with embedded_postgres(pgdata, database=DATABASE) as where:
        with connect(where) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == (DATABASE,)
        restarted = postmaster_pid(pgdata)
    assert restarted != killed and gone(restarted)
    assert not (pgdata / "postmaster.pid").exists()
