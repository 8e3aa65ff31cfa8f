"""Private PostgreSQL / Redis / gunicorn / Celery processes for the fault tests (tests/test_faults.py).

Nothing here touches the shared servers on 5432 and 6379: every instance is started on a free
port in a temporary directory, stopped and restarted by the tests, and removed at the end.
"""
