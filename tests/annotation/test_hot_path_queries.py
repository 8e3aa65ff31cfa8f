"""What the annotators' hot path sends to PostgreSQL: every statement of a request is seen where
psycopg sends it (the queue's prepared statements and the token lookup bypass Django's
query log), and the ORM's share of them through Django's own CaptureQueriesContext.

A claim is the token lookup, then one transaction: its first statement takes the claim's lock and
reads the project, the caller's role and a crowd participant's standing, its second claims the
item and reads where the caller stands (annotation/queue/claim.py). An autosave in its plain case
is the token lookup and one statement, which checks the caller's role and the version, saves and
renews the lease (annotation/queue/sql.py draft_save_sql). A submit reads its task once, with
the caller's role, and stores in one more statement; one that completes its item reads the
thresholds and the item's annotations in one statement after the marking lock, which the store
took (nothing built by the ORM). Renew and skip read their task once. The refusals stay what
they were: someone else's task 404 whatever the body says, a lost role 404, bad input 400 with
nothing written. The counts below fail if any of these statements comes back.

Transactional test database: the test's own transaction would hide the request's.
"""

from __future__ import annotations

import re
from contextlib import contextmanager

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.disagreement import find_disagreement, thresholds_from
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


def test_autosave_is_one_statement(claimed):
    _project, _a, _b, client, task = claimed
    body = {"draft": {"bbox": [1, 2, 3, 4]}, "version": task["version"]}
    with sent() as (seen, orm):
        r = client.put(f"/api/tasks/{task['task']}/draft/", body, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["version"] == task["version"] + 1
    (queue,) = queue_transactions(seen).values()  # one statement: the read (locked) and the write
    assert len(queue) == 1 and len(TASK_READ.findall(queue[0])) == 1, queue
    assert queue[0].lstrip().startswith("WITH it AS") and "UPDATE annotation_task" in queue[0]
    assert "annotation_membership" in queue[0]  # the role is read with the task, no lookup before it
    # Everything the request sent: the token lookup and that statement; nothing from the ORM.
    assert len(data(seen)) == 2, data(seen)
    assert orm_queries(orm) == []
    stored = Task.objects.get(pk=task["task"])
    assert (stored.draft, stored.draft_version, stored.status) == (
        {"bbox": [1, 2, 3, 4]},
        task["version"] + 1,
        "active",
    )
    assert stored.lease_expires.isoformat() == r.json()["lease_expires"]
    assert (stored.lease_expires - stored.updated_at).total_seconds() == 600  # the project's lease

    # A replay of that save is answered as the first time: the statement writes nothing (the
    # version moved on), and the whole path answers, reading the task once; a stale one is 409.
    with sent() as (seen, orm):
        again = client.put(f"/api/tasks/{task['task']}/draft/", body, format="json")
    assert again.status_code == 200 and again.json()["version"] == task["version"] + 1
    plain, whole = queue_transactions(seen).values()
    assert len(plain) == 1 and len([s for s in whole if TASK_READ.search(s)]) == 1, (plain, whole)
    assert orm_queries(orm) == []
    stale = client.put(f"/api/tasks/{task['task']}/draft/", {"draft": {"x": 1}, "version": 0}, format="json")
    assert stale.status_code == 409 and stale.json()["version"] == task["version"] + 1
    assert Task.objects.get(pk=task["task"]).draft == {"bbox": [1, 2, 3, 4]}


def test_autosave_with_a_lease_setting_the_statement_does_not_read_takes_the_whole_path(claimed):
    """lease_seconds stored as 900.0 (JSON): the setting's check cleans it to 900, which the
    statement leaves to the Python path; the save lands with that lease all the same."""
    project, _a, _b, client, task = claimed
    project.settings = {**(project.settings or {}), "lease_seconds": 900.0}
    project.save(update_fields=["settings"])
    with sent() as (seen, _orm):
        r = client.put(f"/api/tasks/{task['task']}/draft/", {"draft": {"x": 1}, "version": 0}, format="json")
    assert r.status_code == 200, r.content
    assert len(queue_transactions(seen)) == 2  # the statement wrote nothing, the whole path saved
    stored = Task.objects.get(pk=task["task"])
    assert (stored.draft, stored.draft_version) == ({"x": 1}, 1)
    assert (stored.lease_expires - stored.updated_at).total_seconds() == 900


def test_claim_is_the_token_lookup_and_two_statements_in_one_transaction(make_project):
    (a,) = make_people(1)
    project = make_project("boxes", "changeit", members={a: "annotator"}, annotations_per_item=2)
    for _ in range(3):
        make_item(project)
    client = token_client(a)
    with sent() as (seen, orm):
        r = client.post("/api/projects/boxes/tasks/next/", {}, format="json")
    assert r.status_code == 200, r.content
    (queue,) = queue_transactions(seen).values()
    # The lock with the project, the role and the participant's standing; then the claim, which
    # also reads the progress: no statement of their own for the project, the quota or the progress.
    assert len(queue) == 2, queue
    assert queue[0].lstrip().startswith("SELECT p.id") and "pg_advisory_xact_lock" in queue[0]
    assert "annotation_membership" in queue[0] and "annotation_studyparticipant" in queue[0]
    assert queue[1].lstrip().startswith("WITH mine AS") and "LIMIT $" in queue[1]  # the progress's cap
    # Besides: the token lookup, and the item's images (the ORM's one query, for the payload).
    orm_sent = orm_queries(orm)
    assert len(orm_sent) == 1 and "annotation_mediaasset" in orm_sent[0], orm_sent
    assert len(data(seen)) == 3 + len(orm_sent), [x[1][:200] for x in data(seen)]
    assert r.json()["progress"] == {"done": 0, "left": 3, "capped": False}
    # The claimed task is handed back as such on a reload (the first statement, then the claim's).
    again = client.post("/api/projects/boxes/tasks/next/", {}, format="json")
    assert again.status_code == 200 and again.json()["task"] == r.json()["task"]
    # Someone else's project, an unknown one: 404 as before, nothing claimed.
    assert client.post("/api/projects/nowhere/tasks/next/", {}, format="json").status_code == 404
    assert Task.objects.filter(annotator=a).count() == 1


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


@pytest.mark.parametrize("variant, marked", [(0, False), (60, True)])
def test_a_completing_submit_reads_thresholds_and_annotations_in_one_statement(claimed, variant, marked):
    project, a, b, client, task = claimed
    r = client.post(f"/api/tasks/{task['task']}/submit/", {"result": valid_result("box")}, format="json")
    assert r.status_code == 201, r.content
    other = token_client(b)
    second = other.post("/api/projects/boxes/tasks/next/", {}, format="json").json()
    with sent() as (seen, orm):
        r = other.post(f"/api/tasks/{second['task']}/submit/", {"result": valid_result("box", variant)}, format="json")
    assert r.status_code == 201, r.content
    (queue,) = queue_transactions(seen).values()
    # The read, the store (which takes the marking lock), the thresholds with the annotations, and
    # an UPDATE of the item's mark only where it changes (a disagreement: boxes 60 px apart, IoU 1/3).
    assert len(queue) == 3 + marked, queue
    assert "pg_advisory_xact_lock_shared" in queue[1]
    assert queue[2].lstrip().startswith("SELECT p.settings") and "annotation_annotation" in queue[2]
    assert all("annotation_annotation" not in q for q in orm_queries(orm))  # no ORM read of them
    item = Annotation.objects.get(pk=r.json()["id"]).item
    answers = list(Annotation.objects.filter(item=item).order_by("pk").values_list("pk", "result"))
    assert item.status == "annotated" and len(answers) == 2
    assert item.disagreement == find_disagreement("box", answers, thresholds_from(project.settings))
    assert (item.disagreement is not None) == marked


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
