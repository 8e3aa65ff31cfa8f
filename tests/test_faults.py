"""Faults: PostgreSQL and Redis stopped and started again under annotation traffic, on private
instances the tests start (tests/faults/, the stack: tests/helpers/fault_stack.py), never the shared
servers. (An inference job under the same restarts: tests/test_faults_inference_job.py.)

StateLab runs as production runs it: gunicorn with sync workers, DEBUG=0, its own SECRET_KEY, no
shortened timeouts; Redis with its append-only file as docker-compose.yml runs it. PostgreSQL is
stopped with `pg_ctl stop -m fast` and `-m immediate` (a crash: WAL recovery at start), Redis with
SIGKILL; each stays down DOWN_SECONDS. Annotator threads claim, autosave and submit through the JSON API with tokens;
a client that gets a 503 waits and repeats the same request (a submit with the same
Idempotency-Key). What must hold:
- while a server is down, requests answer 503 with Retry-After (JSON under /api/, a short page
  elsewhere), never 500; the annotation flow does not need Redis at all;
- once it is back, requests succeed again without restarting gunicorn, and a
  request sent after PostgreSQL is back gets no 503: a gunicorn worker whose persistent
  connection the restart broke finds that out before using it (CONN_HEALTH_CHECKS);
- every annotation the client saw acknowledged (201 / 200) is stored exactly once, nothing more
  is stored, and (item, annotator) is never duplicated.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx
import pytest
from django.conf import settings

from tests.faults.instances import wait_until
from tests.helpers.fault_stack import DOWN_SECONDS, Stack

pytestmark = [pytest.mark.slow]

BOX = {"bbox": [10, 20, 30, 40], "state": "whole apple"}


def signed_in(stack: Stack) -> httpx.Client:
    """The researcher, signed in through the login form (a session cookie, as a browser)."""
    client = httpx.Client(base_url=stack.web.base_url, timeout=30)
    client.get("/accounts/login/").raise_for_status()
    r = client.post(
        "/accounts/login/",
        data={
            "username": stack.seeded["researcher"]["username"],
            "password": stack.seeded["researcher"]["password"],
            "csrfmiddlewaretoken": client.cookies["csrftoken"],
        },
    )
    assert r.status_code == 302, r.text[:500]
    return client


@dataclass
class Traffic:
    """Annotator threads: claim, autosave a draft, submit; 503s are repeated until answered."""

    base_url: str
    slug: str
    people: list
    phase: str = "up"
    calls: list = field(default_factory=list)  # (phase at send, endpoint, status, content type, Retry-After)
    in_flight: Counter = field(default_factory=Counter)  # phase at send -> requests not answered yet
    acked: dict = field(default_factory=dict)  # annotation id -> (item id, annotator id)
    cycles: Counter = field(default_factory=Counter)  # (phase, annotator id) -> submits acknowledged
    errors: list = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    threads: list = field(default_factory=list)
    earlier: set = field(default_factory=set)  # annotations these annotators made before (an earlier test)

    def start(self) -> Traffic:
        self.threads = [threading.Thread(target=self.annotator, args=(p,), daemon=True) for p in self.people]
        for t in self.threads:
            t.start()
        return self

    def finish(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(120)
        assert not any(t.is_alive() for t in self.threads), "an annotator thread did not finish"

    def enter(self, phase: str) -> None:
        with self.lock:
            self.phase = phase

    def answered_before(self, phase: str) -> bool:
        """Every request sent in an earlier phase has its answer."""
        with self.lock:
            return not any(n for p, n in self.in_flight.items() if p != phase)

    def call(self, client: httpx.Client, endpoint: str, method: str, url: str, **kwargs) -> httpx.Response:
        deadline = time.monotonic() + 90
        while True:
            with self.lock:
                phase = self.phase
                self.in_flight[phase] += 1
            try:
                r = client.request(method, url, **kwargs)
            except httpx.TransportError as exc:  # gunicorn itself must never go away
                with self.lock:
                    self.calls.append((phase, endpoint, type(exc).__name__, "", None))
            else:
                with self.lock:
                    self.calls.append(
                        (
                            phase,
                            endpoint,
                            r.status_code,
                            r.headers.get("content-type", ""),
                            r.headers.get("retry-after"),
                        )
                    )
                if r.status_code != 503:
                    return r
            finally:
                with self.lock:
                    self.in_flight[phase] -= 1
            if time.monotonic() > deadline:
                raise AssertionError(f"{endpoint}: no answer but 503 / transport errors for 90 s")
            time.sleep(0.2)

    def cycles_in(self, phase: str) -> int:
        return min(self.cycles[(phase, p["id"])] for p in self.people)

    def annotator(self, person: dict) -> None:
        rng = random.Random(person["id"])
        client = httpx.Client(base_url=self.base_url, headers={"Authorization": f"Token {person['token']}"}, timeout=60)
        try:
            while not self.stop.is_set():
                r = self.call(client, "next", "POST", f"/api/projects/{self.slug}/tasks/next/", json={})
                if r.status_code == 204:
                    return
                assert r.status_code == 200, f"next: {r.status_code} {r.text[:300]}"
                task = r.json()
                time.sleep(rng.uniform(0.01, 0.05))
                r = self.call(
                    client,
                    "draft",
                    "PUT",
                    f"/api/tasks/{task['task']}/draft/",
                    json={"draft": {"bbox": [1, 2, 3, 4]}, "version": task["version"]},
                )
                assert r.status_code == 200, f"draft: {r.status_code} {r.text[:300]}"
                time.sleep(rng.uniform(0.01, 0.05))
                r = self.call(
                    client,
                    "submit",
                    "POST",
                    f"/api/tasks/{task['task']}/submit/",
                    json={"result": BOX, "time_spent_ms": 1234},
                    headers={"Idempotency-Key": f"faults:{task['task']}"},
                )
                assert r.status_code in (200, 201), f"submit: {r.status_code} {r.text[:300]}"
                body = r.json()
                with self.lock:
                    previous = self.acked.setdefault(body["id"], (body["item"], person["id"]))
                    assert previous == (body["item"], person["id"])
                    self.cycles[(self.phase, person["id"])] += 1
        except BaseException as exc:  # reported by the test
            self.errors.append(f"{person['username']}: {exc!r}")
        finally:
            client.close()

    def statuses(self, phase: str | None = None, endpoints=("next", "draft", "submit")) -> Counter:
        return Counter(s for p, e, s, _, _ in self.calls if (phase is None or p == phase) and e in endpoints)


def stored_annotations(stack: Stack, people: list) -> dict:
    return {
        a: (i, u)
        for a, i, u in stack.sql(
            "SELECT id, item_id, annotator_id FROM annotation_annotation WHERE annotator_id = ANY(%s)",
            ([p["id"] for p in people],),
        )
    }


def assert_stored_exactly_once(stack: Stack, traffic: Traffic) -> None:
    stored = {a: v for a, v in stored_annotations(stack, traffic.people).items() if a not in traffic.earlier}
    assert traffic.acked, "no annotation was acknowledged"
    assert stored == traffic.acked  # every acknowledged one, with its item and annotator, and nothing else
    assert stack.sql("SELECT item_id, annotator_id FROM annotation_annotation GROUP BY 1, 2 HAVING count(*) > 1") == []
    assert (
        stack.sql(
            """SELECT i.id FROM annotation_item i LEFT JOIN annotation_annotation a ON a.item_id = i.id
           WHERE i.project_id = %s GROUP BY i.id HAVING i.annotation_count <> count(a.id)""",
            (stack.seeded["project"],),
        )
        == []
    )


def flowing(stack: Stack) -> Traffic:
    """The seeded annotators at work, each with two submits through."""
    people = stack.seeded["annotators"]
    traffic = Traffic(
        stack.web.base_url, stack.seeded["slug"], people, earlier=set(stored_annotations(stack, people))
    ).start()
    try:
        wait_until(lambda: traffic.errors or traffic.cycles_in("up") >= 2, 60, "traffic to flow")
        assert not traffic.errors, traffic.errors
    except BaseException:
        traffic.finish()
        raise
    return traffic


def outage(traffic: Traffic, name: str, stop, start, during=None) -> dict:
    """Stop a server under traffic, keep it down DOWN_SECONDS (run `during` then), start it again
    and wait for every annotator to get two more submits through. Requests sent while it was up
    are answered before it is stopped (those sent while stopping meet the stop), so a 503 to a
    request sent while it was up is one that the server being up did not save; requests sent while
    it was down are answered before it starts."""
    traffic.enter(f"{name}:stopping")
    wait_until(lambda: traffic.answered_before(f"{name}:stopping"), 30, "the requests sent while it was up")
    stop()
    traffic.enter(f"{name}:down")
    t_down = time.monotonic()
    seen = during() if during else None
    time.sleep(max(0.0, DOWN_SECONDS - (time.monotonic() - t_down)))
    traffic.enter(f"{name}:starting")
    # Likewise, requests sent while it was down are answered before it starts, so each of them met
    # the server down (a slow one would otherwise be answered by the restarted server).
    wait_until(lambda: traffic.answered_before(f"{name}:starting"), 30, "the requests sent while it was down")
    start()
    traffic.enter(f"{name}:up")
    t_up = time.monotonic()
    wait_until(
        lambda: traffic.errors or traffic.cycles_in(f"{name}:up") >= 2,
        60,
        f"every annotator to submit twice after {name}",
    )
    assert not traffic.errors, traffic.errors
    return {"seen": seen, "recovered_in_s": time.monotonic() - t_up}


def test_postgres_stopped_under_annotation_traffic(stack):
    """pg_ctl stop -m fast, then -m immediate (a crash: recovery from WAL), under 8 annotators."""
    session = signed_in(stack)
    page_before = session.get(f"/projects/{stack.seeded['slug']}/annotate/")
    assert page_before.status_code == 200
    traffic = flowing(stack)
    try:

        def while_down():
            page = session.get(f"/projects/{stack.seeded['slug']}/annotate/")
            me = httpx.get(
                f"{stack.web.base_url}/api/me/",
                timeout=30,
                headers={"Authorization": f"Token {stack.seeded['annotators'][0]['token']}"},
            )
            return page, me

        fast = outage(traffic, "fast", lambda: stack.pg.stop("fast"), stack.pg.start, while_down)
        immediate = outage(traffic, "immediate", lambda: stack.pg.stop("immediate"), stack.pg.start)
    finally:
        traffic.finish()
    assert not traffic.errors, traffic.errors
    print(
        f"\nPostgreSQL outages: statuses per phase "
        f"{ {p: dict(traffic.statuses(p)) for p in dict.fromkeys(c[0] for c in traffic.calls)} }; "
        f"recovered in {fast['recovered_in_s']:.1f} / {immediate['recovered_in_s']:.1f} s; "
        f"{len(traffic.acked)} annotations acknowledged"
    )

    # Never a 500, never a dropped connection; only 2xx and (around the outages) 503.
    assert set(traffic.statuses()) <= {200, 201, 204, 503}, traffic.statuses()
    for name in ("fast", "immediate"):
        down = traffic.statuses(f"{name}:down")
        assert down and set(down) == {503}, down  # every request sent while it was down
    for phase in ("up", "fast:up", "immediate:up"):  # and none sent while it was up, before or after
        up = traffic.statuses(phase)
        assert up and 503 not in up, (phase, up)
    unavailable = [c for c in traffic.calls if c[2] == 503]
    assert all(ct.startswith("application/json") and ra == "5" for _, _, _, ct, ra in unavailable)
    # Pages: a short HTML page, 503 with Retry-After; the API: JSON.
    page, me = fast["seen"]
    assert (page.status_code, page.headers["retry-after"]) == (503, "5")
    assert page.headers["content-type"].startswith("text/html") and "briefly unavailable" in page.text
    assert (me.status_code, me.json()["detail"]) == (503, "Service temporarily unavailable (database); please retry.")
    # Back without a restart of gunicorn: same processes, pages and API answer again.
    assert stack.web.proc.poll() is None
    assert session.get(f"/projects/{stack.seeded['slug']}/annotate/").status_code == 200
    assert_stored_exactly_once(stack, traffic)


def answer_probes(stack: Stack, tag: str, each_worker: int, timeout: float = 60) -> dict[int, Counter]:
    """GET /api/me/ (token auth: a query) in concurrent rounds until every gunicorn worker has
    answered at least `each_worker` of them; returns worker pid -> Counter of statuses, the status
    as the client saw it and the worker from the access log."""
    headers = {"Authorization": f"Token {stack.seeded['annotators'][0]['token']}"}
    sent: dict[str, int | str] = {}

    def probe(query: str) -> None:
        try:
            sent[query] = httpx.get(f"{stack.web.base_url}/api/me/?{query}", headers=headers, timeout=30).status_code
        except httpx.TransportError as exc:  # gunicorn itself must never go away
            sent[query] = type(exc).__name__

    deadline, rounds = time.monotonic() + timeout, 0
    while True:
        queries = [f"probe={tag}-{rounds}-{i}" for i in range(2 * stack.web.workers)]
        rounds += 1
        threads = [threading.Thread(target=probe, args=(q,)) for q in queries]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert all(isinstance(sent.get(q), int) for q in queries), sent

        def every_probe_logged():  # gunicorn writes the access log line just after the answer
            served = stack.web.served()
            return served if set(sent) <= set(served) else None

        served = wait_until(every_probe_logged, 10, "the access log to name the worker of every probe")
        per_worker: dict[int, Counter] = {}
        for query, status in sent.items():
            per_worker.setdefault(served[query][0], Counter())[status] += 1
        if len(per_worker) >= stack.web.workers and min(sum(c.values()) for c in per_worker.values()) >= each_worker:
            return per_worker
        assert time.monotonic() < deadline, f"not every gunicorn worker answered {each_worker} probes: {per_worker}"


def test_postgres_restart_costs_idle_gunicorn_workers_no_request(stack):
    """Every gunicorn worker holds its persistent connection (CONN_MAX_AGE) when PostgreSQL is
    restarted and serves nothing while it is down: the first request each one gets afterwards must
    not be the one that finds the broken connection (a 503); the health check finds it first."""
    before = answer_probes(stack, "before", each_worker=1)
    assert {pid: set(c) for pid, c in before.items()} == {pid: {200} for pid in before}
    clients = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = 'statelab' AND backend_type = 'client backend' "
        "AND pid <> pg_backend_pid()"
    )
    # Preconditions, or the test proves nothing: each sync worker (one thread) holds one connection,
    # and it is still young enough to be reused, not closed for its age, when the probes come back.
    assert stack.sql(clients)[0][0] >= stack.web.workers
    warmed = time.monotonic()
    stack.pg.stop("fast")
    time.sleep(DOWN_SECONDS)
    stack.pg.start()
    assert time.monotonic() - warmed < settings.DATABASES["default"]["CONN_MAX_AGE"] - 10
    after = answer_probes(stack, "after", each_worker=2)
    unavailable = {pid: c[503] for pid, c in after.items()}
    print(
        f"\nPostgreSQL restarted under idle gunicorn workers: 503s after the restart per worker {unavailable} "
        f"(statuses per worker {dict(after)})"
    )
    assert {pid: set(c) for pid, c in after.items()} == {pid: {200} for pid in after}, after
    assert stack.web.proc.poll() is None


def test_redis_stopped_under_annotation_traffic(stack):
    """Redis killed (SIGKILL) and started again: annotation does not need it; the leaderboard (cached in
    Redis) answers 503 while it is down, never 500, and comes back without a restart."""
    session = signed_in(stack)
    board_api = f"/api/projects/{stack.seeded['slug']}/leaderboard/"
    board_page = f"/projects/{stack.seeded['slug']}/leaderboard/"
    before = (session.get(board_api).status_code, session.get(board_page).status_code)
    assert 500 not in before
    traffic = flowing(stack)
    try:

        def while_down():
            time.sleep(1.0)  # some annotation traffic first
            return session.get(board_api), session.get(board_page)

        down = outage(traffic, "redis", stack.redis.stop, stack.redis.start, while_down)
    finally:
        traffic.finish()
    assert not traffic.errors, traffic.errors
    print(
        f"\nRedis outage: statuses per phase "
        f"{ {p: dict(traffic.statuses(p)) for p in dict.fromkeys(c[0] for c in traffic.calls)} }; "
        f"leaderboard before / down: {before} / {tuple(r.status_code for r in down['seen'])}"
    )
    # The annotation flow never noticed.
    assert set(traffic.statuses()) <= {200, 201, 204}, traffic.statuses()
    assert traffic.cycles_in("redis:down") >= 1
    api, page = down["seen"]
    assert api.status_code in (503, before[0]) and page.status_code in (503, before[1])
    if api.status_code == 503:
        assert api.json()["detail"] == "Service temporarily unavailable (redis); please retry."
        assert api.headers["retry-after"] == "5"
    if page.status_code == 503:
        assert page.headers["content-type"].startswith("text/html")
    assert (session.get(board_api).status_code, session.get(board_page).status_code) == before
    assert_stored_exactly_once(stack, traffic)
