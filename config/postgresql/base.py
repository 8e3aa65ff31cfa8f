"""Django's PostgreSQL backend with a health check that asks the socket, not the server.

With CONN_HEALTH_CHECKS (config/settings.py) Django checks a persistent connection before its
first use in each request by sending ``SELECT 1`` and waiting for the answer: one round trip to
PostgreSQL in every request, the API's included, to find the rare connection that a restart of
PostgreSQL broke. What such a connection looks like is known without asking: a server that shuts
down (smart, fast or immediate), a backend that is terminated, or a server that crashes closes the
connection's socket, and its operating system closes it when the process dies, so the idle
connection's socket becomes readable (the server's last message, or end of file). An idle
connection that PostgreSQL still serves has nothing to read: between requests nothing is sent to
a client that is not listening for notifications, and StateLab never LISTENs.

So the check here is local: the connection is unusable when psycopg already knows it is closed or
broken, when libpq's status is not OK, or when its socket polls readable (or in error) with a zero
timeout. Anything unusual (a connection inside a transaction, where a check would not run anyway)
falls back to Django's ``SELECT 1``. A false alarm (some asynchronous message on a sound connection)
costs one reconnect, never a failed request.

What this does not see, any more than ``SELECT 1`` would in time: a server that vanished without
closing anything (a network partition). The request that meets it fails with a 503
(config/unavailable.py), and Django closes the connection after an error, so the next one
reconnects. tests/test_faults.py restarts PostgreSQL under idle gunicorn workers and requires no
503 afterwards; tests/test_pg_health.py checks this backend against a terminated backend.
"""

from __future__ import annotations

import select

import psycopg
from django.db.backends.postgresql import base
from psycopg import pq


class DatabaseWrapper(base.DatabaseWrapper):
    def close_if_health_check_failed(self):
        if self.connection is None or not self.health_check_enabled or self.health_check_done or self.pool:
            return
        if not self.idle_connection_sound():
            self.close()
        self.health_check_done = True

    def idle_connection_sound(self) -> bool:
        """The local check of the module docstring (Django's ``is_usable`` where it cannot say)."""
        conn = self.connection
        if conn.closed or conn.broken or conn.pgconn.status != pq.ConnStatus.OK:
            return False
        if conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
            return self.is_usable()
        try:
            poller = select.poll()
            poller.register(conn.pgconn.socket, select.POLLIN | select.POLLPRI)
            return not poller.poll(0)  # readable, hung up or in error: the server is gone
        except (OSError, ValueError, psycopg.Error):
            return False
