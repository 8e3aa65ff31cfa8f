"""Races between two transactions on the real PostgreSQL, made to happen rather than hoped for.

One transaction is stopped inside a real function (wrapped for the test); the other runs until it
has committed or waits on a database lock (pg_stat_activity says which); only then does the first
go on. Used by the threshold-race and claim tests.
"""

from __future__ import annotations

import threading
import time

from django.db import connection

WAIT_S = 60  # how long a step may take before the test calls it hung (a bound, never a pause)


class Worker(threading.Thread):
    """Runs `work` on its own connection; records its backend pid, its result or error, and when
    it is done."""

    def __init__(self, work):
        super().__init__(daemon=True)
        self.work, self.pid, self.error, self.result = work, None, None, None
        self.started_db, self.done = threading.Event(), threading.Event()

    def run(self):
        try:
            connection.ensure_connection()
            self.pid = connection.connection.info.backend_pid
            self.started_db.set()
            self.result = self.work()
        except BaseException as exc:  # surfaced by the test
            self.error = exc
        finally:
            connection.close()
            self.done.set()


def waits_on_a_lock(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cursor.fetchone()
    return row is not None and row[0] == "Lock"


class Pause:
    """Wraps a real function: its first call stops until released, then runs it."""

    def __init__(self, real):
        self.real, self.reached, self.released, self.first = real, threading.Event(), threading.Event(), True

    def __call__(self, *args, **kwargs):
        if self.first:
            self.first = False
            self.reached.set()
            assert self.released.wait(WAIT_S), "never released"
        return self.real(*args, **kwargs)


def race(monkeypatch, *, stop_in, at: str, first, second) -> tuple[str, Worker, Worker]:
    """Run `first` until it calls `stop_in.<at>` (stopped there, its transaction open); then run
    `second` until it has committed ("committed") or waits on a database lock ("blocked", what
    pg_stat_activity says); then let `first` go on. Returns (how, first's worker, second's) with
    both finished."""
    pause = Pause(getattr(stop_in, at))
    monkeypatch.setattr(stop_in, at, pause)
    one, other = Worker(first), Worker(second)
    one.start()
    assert pause.reached.wait(WAIT_S), f"the first transaction never reached {at}"
    other.start()
    assert other.started_db.wait(WAIT_S)
    how = None
    deadline = time.monotonic() + WAIT_S
    while how is None and time.monotonic() < deadline:
        if other.done.wait(0.01):
            how = "committed"
        elif waits_on_a_lock(other.pid):
            how = "blocked"
    pause.released.set()
    assert one.done.wait(WAIT_S) and other.done.wait(WAIT_S), "a transaction hung"
    assert how is not None, "the second transaction neither finished nor waited on a lock"
    return how, one, other
