"""The connection health check of config/postgresql (CONN_HEALTH_CHECKS): a connection whose
server end is gone is replaced before a request uses it; a sound one is kept, and checking it sends
nothing to PostgreSQL. (tests/test_faults.py restarts a whole PostgreSQL under gunicorn.)

Transactional test database: the check runs, as in a request, on a connection outside a transaction.
"""

from __future__ import annotations

import time

import psycopg
import pytest
from django.db import connection

pytestmark = pytest.mark.django_db(transaction=True)


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def admin(sql: str, params=()):
    """A statement on a connection of its own (not the one under test)."""
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"] or None,
        port=settings["PORT"] or None,
        user=settings["USER"],
        password=settings["PASSWORD"] or None,
        dbname=settings["NAME"],
        autocommit=True,
    ) as other:
        return other.execute(sql, params).fetchall()


def new_request():
    """What Django does between requests for a persistent connection: the next first use checks it."""
    connection.close_if_unusable_or_obsolete()
    assert connection.health_check_enabled and not connection.health_check_done


def test_the_backend_is_ours_with_health_checks_on():
    assert connection.settings_dict["ENGINE"] == "config.postgresql"
    assert connection.settings_dict["CONN_HEALTH_CHECKS"] is True


def test_a_terminated_connection_is_replaced_before_it_is_used():
    pid = backend_pid()
    new_request()
    assert admin("SELECT pg_terminate_backend(%s)", (pid,)) == [(True,)]
    deadline = time.monotonic() + 10
    while admin("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))[0][0]:
        assert time.monotonic() < deadline, "the terminated backend did not go"
        time.sleep(0.05)
    # the request's first statement: no error, on a new connection
    assert backend_pid() != pid


def test_a_sound_connection_is_kept_and_checking_it_sends_nothing():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'the last statement before the check'")
    pid = backend_pid()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'the last statement before the check'")
    new_request()
    connection.close_if_health_check_failed()
    assert connection.health_check_done
    # pg_stat_activity shows the last statement the backend received: not a SELECT 1
    ((last,),) = admin("SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,))
    assert last == "SELECT 'the last statement before the check'"
    assert backend_pid() == pid
