"""annotation/db.py, the prepared-statement runner of the token lookup and the task queue: like
Django's own cursors it health-checks the persistent connection at the first statement of a
request, so a connection the server dropped (a PostgreSQL restart) costs no request.
A whole restart under gunicorn: tests/test_faults.py."""

import psycopg
import pytest
from django.db import close_old_connections, connection
from rest_framework.authtoken.models import Token

from annotation.db import first_row

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN_OWNER = "SELECT user_id FROM authtoken_token WHERE key = %(key)s"


def drop_from_server_side() -> None:
    """What a restart does to an idle connection: the server ends it, the client is not told."""
    backend = connection.connection.info.backend_pid
    settings = connection.settings_dict
    with psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
        user=settings["USER"],
        password=settings["PASSWORD"] or None,
        dbname=settings["NAME"],
        autocommit=True,
    ) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (backend,))  # gone before we go on


def test_first_statement_of_a_request_replaces_a_connection_the_server_dropped(make_user):
    assert connection.settings_dict["CONN_MAX_AGE"] > 0 and connection.settings_dict["CONN_HEALTH_CHECKS"]
    user = make_user("ann")
    key = Token.objects.create(user=user).key
    close_old_connections()  # request_started
    assert first_row(TOKEN_OWNER, {"key": key}) == (user.pk,)
    close_old_connections()  # request_finished: the connection stays open (CONN_MAX_AGE)
    before = connection.connection
    drop_from_server_side()
    # when the next request starts and its first statement is the token lookup
    close_old_connections()
    # then it answers, on a new connection
    assert first_row(TOKEN_OWNER, {"key": key}) == (user.pk,)
    assert connection.connection is not before
