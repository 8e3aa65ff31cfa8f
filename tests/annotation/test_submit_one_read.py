"""The API's submit reads its task once, in one transaction: the caller's role is read
with the task it locks (annotation/queue/sql.py SUBMIT_LOCK_SQL), the annotation is stored, the
task marked and the item counted in one more statement (STORE_SQL, which also measures the time
spent); no lookup of the task before it in a transaction of its own.

Every statement is seen where psycopg sends it (the queue's prepared statements bypass Django's
query log), with the connection's transaction state before it: a statement sent while no
transaction is open starts one. Transactional test database: the test's own transaction would
hide the request's.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from datetime import timedelta

import psycopg
import pytest
from django.utils import timezone

from annotation.models import Annotation, Membership, Task
from tests.annotation.work_factories import make_item, make_people, valid_result
from tests.helpers.clients import token_client

pytestmark = pytest.mark.django_db(transaction=True)
TABLES = re.compile(r'"?annotation_(task|item|annotation|project|membership)"?\b')


@contextmanager
def statements():
    """[(transaction number, statement)] for every statement sent meanwhile."""
    seen: list[tuple[int, str]] = []
    execute = psycopg.Cursor.execute
    count = [0]

    def recording(cursor, query, *args, **kwargs):
        if cursor.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            count[0] += 1  # no transaction open: this statement starts one
        text = query if isinstance(query, str) else query.as_string(cursor.connection)
        seen.append((count[0], text))
        return execute(cursor, query, *args, **kwargs)

    psycopg.Cursor.execute = recording
    try:
        yield seen
    finally:
        psycopg.Cursor.execute = execute


def transactions_touching_the_queue(seen) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for number, text in seen:
        if TABLES.search(text):
            out.setdefault(number, []).append(text)
    return out


@pytest.fixture
def claimed(make_project):
    a, b = make_people(2)
    project = make_project("boxes", "changeit", members={a: "annotator", b: "annotator"}, annotations_per_item=2)
    make_item(project)
    client = token_client(a)
    r = client.post("/api/projects/boxes/tasks/next/", {}, format="json")
    assert r.status_code == 200
    return project, a, b, client, r.json()["task"]


def test_a_submit_reads_its_task_once_in_one_transaction(claimed):
    _project, a, _b, client, task_id = claimed
    with statements() as seen:
        r = client.post(
            f"/api/tasks/{task_id}/submit/", {"result": valid_result("box")}, format="json", HTTP_IDEMPOTENCY_KEY="k1"
        )
    assert r.status_code == 201, r.content
    (queue,) = transactions_touching_the_queue(seen).values()  # one transaction reads and writes
    reads = [s for s in queue if re.search(r"(FROM|JOIN) \"?annotation_task\"? +t\b", s)]
    assert len(reads) == 1, queue  # the task is read once: the statement that locks it
    assert len(queue) == 2, queue  # ... and one statement stores the annotation
    stored = Annotation.objects.get()
    assert (stored.pk, stored.annotator, stored.task_id) == (r.json()["id"], a, task_id)
    assert r.json()["time_spent_ms"] == stored.time_spent_ms >= 0

    # The retry of the same submit (same key, same answer) is answered in one transaction too.
    with statements() as seen:
        again = client.post(
            f"/api/tasks/{task_id}/submit/", {"result": valid_result("box")}, format="json", HTTP_IDEMPOTENCY_KEY="k1"
        )
    assert again.status_code == 200 and again.json()["id"] == stored.pk
    assert len(transactions_touching_the_queue(seen)) == 1
    assert Annotation.objects.count() == 1


def test_refusals_are_4xx_and_write_nothing(claimed):
    project, a, b, client, task_id = claimed
    body = {"result": valid_result("box")}
    # Someone else's task, whatever the body: 404, as an unknown task.
    for sent in (body, {"result": {}, "time_spent_ms": -1}):
        r = token_client(b).post(f"/api/tasks/{task_id}/submit/", sent, format="json")
        assert (r.status_code, r.json()) == (404, {"detail": "No such task."})
    # A member who lost the role: 404 naming the project, as get_task_project_for answered.
    Membership.objects.filter(user=a).delete()
    r = client.post(f"/api/tasks/{task_id}/submit/", body, format="json")
    assert (r.status_code, r.json()) == (404, {"detail": "No such project."})
    Membership.objects.create(project=project, user=a, role="annotator")
    # Bad input on one's own task: 400 naming the field.
    r = client.post(
        f"/api/tasks/{task_id}/submit/", {"result": valid_result("box")}, format="json", HTTP_IDEMPOTENCY_KEY="x" * 201
    )
    assert r.status_code == 400 and "Idempotency-Key" in r.json()["errors"]
    # The lease ran out and another annotator took the item: 409 saying so.
    Task.objects.filter(pk=task_id).update(lease_expires=timezone.now() - timedelta(seconds=1))
    r = token_client(b).post("/api/projects/boxes/tasks/next/", {}, format="json")
    assert r.status_code == 200
    r = client.post(f"/api/tasks/{task_id}/submit/", body, format="json")
    assert r.status_code == 409 and "another annotator took the item" in r.json()["detail"]
    assert not Annotation.objects.exists()
