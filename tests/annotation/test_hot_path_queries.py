"""What the annotators' hot path sends to PostgreSQL (issue 23): every statement of a request is
seen where psycopg sends it (the queue's prepared statements and the token lookup bypass Django's
query log), and the ORM's share of them through Django's own CaptureQueriesContext.

A submit and an autosave each read their task once, in the transaction that writes it, with the
caller's role read by that same statement (annotation/queue/sql.py lock_own_task_sql): the
token lookup, one read, one write, and nothing built by the ORM. Renew and skip, the same. The
refusals stay what they were: someone else's task 404 whatever the body says, a lost role 404,
bad input 400 with nothing written.

Transactional test database: the test's own transaction would hide the request's.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Annotation, Membership, Task
from tests.annotation.work_factories import make_item, make_people, valid_result
from tests.helpers.clients import token_client

pytestmark = pytest.mark.django_db(transaction=True)
TASK_READ = re.compile(r"(FROM|JOIN) \"?annotation_task\"? +[a-z]\b")
QUEUE_TABLES = re.compile(r'"?annotation_(task|item|annotation|project|membership)"?\b')


@contextmanager
def sent():
    """[(transaction number, statement)] for every statement psycopg sends meanwhile (a statement
    sent while no transaction is open starts one), plus Django's log of the ORM's queries."""
    seen: list[tuple[int, str]] = []
    execute = psycopg.Cursor.execute
    count = [0]

    def recording(cursor, query, *args, **kwargs):
        if cursor.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            count[0] += 1
        text = query if isinstance(query, str) else query.as_string(cursor.connection)
        seen.append((count[0], text))
        return execute(cursor, query, *args, **kwargs)

    psycopg.Cursor.execute = recording
    try:
        with CaptureQueriesContext(connection) as orm:
            yield seen, orm
    finally:
        psycopg.Cursor.execute = execute


def data(seen) -> list[tuple[int, str]]:
    """The statements that read or write data (not the connection's health check)."""
    return [(n, s) for n, s in seen if s.strip().upper() not in ("SELECT 1", "BEGIN", "COMMIT", "ROLLBACK")]


def orm_queries(orm) -> list[str]:
    return [q["sql"] for q in orm.captured_queries if q["sql"] not in ("BEGIN", "COMMIT", "ROLLBACK")]


@pytest.fixture
def claimed(make_project):
    a, b = make_people(2)
    project = make_project("boxes", "changeit", members={a: "annotator", b: "annotator"}, annotations_per_item=2)
    make_item(project)
    client = token_client(a)
    r = client.post("/api/projects/boxes/tasks/next/", {}, format="json")
    assert r.status_code == 200
    return project, a, b, client, r.json()


def queue_transactions(seen) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for number, text in data(seen):
        if QUEUE_TABLES.search(text):
            out.setdefault(number, []).append(text)
    return out


def test_autosave_reads_its_task_once_and_writes_it_once(claimed):
    _project, _a, _b, client, task = claimed
    body = {"draft": {"bbox": [1, 2, 3, 4]}, "version": task["version"]}
    with sent() as (seen, orm):
        r = client.put(f"/api/tasks/{task['task']}/draft/", body, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["version"] == task["version"] + 1
    (queue,) = queue_transactions(seen).values()  # one transaction: the read and the write
    assert len([s for s in queue if TASK_READ.search(s)]) == 1, queue  # the task read once (locked)
    assert len(queue) == 2, queue  # ... and written once
    assert "annotation_membership" in queue[0]  # the role is read with the task, no lookup before it
    # Everything the request sent: the token lookup, the read, the write; nothing from the ORM.
    assert len(data(seen)) == 3, data(seen)
    assert orm_queries(orm) == []
    stored = Task.objects.get(pk=task["task"])
    assert (stored.draft, stored.draft_version, stored.status) == (
        {"bbox": [1, 2, 3, 4]},
        task["version"] + 1,
        "active",
    )
    assert stored.lease_expires.isoformat() == r.json()["lease_expires"]

    # A replay of that save is answered as the first time, again with one read; a stale one is 409.
    with sent() as (seen, orm):
        again = client.put(f"/api/tasks/{task['task']}/draft/", body, format="json")
    assert again.status_code == 200 and again.json()["version"] == task["version"] + 1
    assert len(queue_transactions(seen)) == 1 and orm_queries(orm) == []
    stale = client.put(f"/api/tasks/{task['task']}/draft/", {"draft": {"x": 1}, "version": 0}, format="json")
    assert stale.status_code == 409 and stale.json()["version"] == task["version"] + 1
    assert Task.objects.get(pk=task["task"]).draft == {"bbox": [1, 2, 3, 4]}


def test_submit_sends_the_token_lookup_one_read_and_one_write(claimed):
    _project, a, _b, client, task = claimed
    with sent() as (seen, orm):
        r = client.post(
            f"/api/tasks/{task['task']}/submit/",
            {"result": valid_result("box")},
            format="json",
            HTTP_IDEMPOTENCY_KEY="k",
        )
    assert r.status_code == 201, r.content
    (queue,) = queue_transactions(seen).values()
    assert len([s for s in queue if TASK_READ.search(s)]) == 1 and len(queue) == 2, queue
    # Besides: the image's size, which a box answer is checked against (selectors.result_context_for),
    # the one query the ORM builds; nothing else reads the task, the item or the caller's role.
    orm_sent = orm_queries(orm)
    assert len(orm_sent) == 1 and "annotation_mediaasset" in orm_sent[0], orm_sent
    assert len(data(seen)) == 3 + len(orm_sent), [x[1][:300] for x in data(seen)]
    assert Annotation.objects.get().annotator == a


def test_renew_and_skip_read_their_task_once(claimed):
    _project, _a, _b, client, task = claimed
    for url, status in (
        (f"/api/tasks/{task['task']}/renew/", "active"),
        (f"/api/tasks/{task['task']}/skip/", "skipped"),
    ):
        with sent() as (seen, orm):
            r = client.post(url, {}, format="json")
        assert r.status_code == 200, r.content
        (queue,) = queue_transactions(seen).values()
        assert len([s for s in queue if TASK_READ.search(s)]) == 1 and len(queue) == 2, queue
        assert orm_queries(orm) == []
        assert Task.objects.get(pk=task["task"]).status == status


def test_autosave_refusals_are_4xx_and_write_nothing(claimed):
    project, a, b, client, task = claimed
    url = f"/api/tasks/{task['task']}/draft/"
    good = {"draft": {"bbox": [1, 2, 3, 4]}, "version": task["version"]}
    # Someone else's task, whatever the body: 404, as an unknown task.
    for body in (good, {"draft": "no", "version": -1}):
        r = token_client(b).put(url, body, format="json")
        assert (r.status_code, r.json()) == (404, {"detail": "No such task."})
    for verb in ("renew", "skip"):
        r = token_client(b).post(f"/api/tasks/{task['task']}/{verb}/", {}, format="json")
        assert (r.status_code, r.json()) == (404, {"detail": "No such task."})
    # A member who lost the role: 404 naming the project, as before.
    Membership.objects.filter(user=a).delete()
    r = client.put(url, good, format="json")
    assert (r.status_code, r.json()) == (404, {"detail": "No such project."})
    Membership.objects.create(project=project, user=a, role="annotator")
    # Bad input on one's own task: 400 naming the field, nothing written.
    r = client.put(url, {"draft": ["not", "an", "object"], "version": task["version"]}, format="json")
    assert r.status_code == 400 and "draft" in r.json()["errors"]
    r = client.put(url, {"draft": {}, "version": -1}, format="json")
    assert r.status_code == 400 and "version" in r.json()["errors"]
    stored = Task.objects.get(pk=task["task"])
    assert (stored.draft, stored.draft_version, stored.status) == ({}, task["version"], "active")
    assert stored.lease_expires.isoformat() == task["lease_expires"]  # not renewed either
