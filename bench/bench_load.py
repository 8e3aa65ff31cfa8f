"""Load: annotator sessions under gunicorn against a 1,000,000-item project, bounded in time.

    .venv/bin/python bench/bench_load.py                       # 64 sessions, 60 s; baseline 8 sessions, 20 s
    .venv/bin/python bench/bench_load.py --seconds 30 --keep   # keep the database for a --reuse run
    .venv/bin/python bench/bench_load.py --reuse --seconds 30
    .venv/bin/python bench/bench_load.py --previous e380a58    # the same loads against that commit's code too

DATABASE_URL names the PostgreSQL server (default postgres://postgres@127.0.0.1:5432/postgres);
the benchmark creates a database of its own there (--database, default statelab_bench_load),
migrates it, fills a ChangeIt project with --items items (bench_queue.build: one INSERT ... SELECT
generate_series, no Python loop) and drops the database at the end unless --keep.

StateLab runs under gunicorn with the production settings (DEBUG=0; sync workers, --timeout 120
as docker-compose.yml; 2 x cores + 1 workers unless --workers). Each session is one annotator
with an API token and its own HTTP client, looping until --seconds have passed:

    claim      POST /api/projects/<slug>/tasks/next/
    (think)    uniform --think-min..--think-max seconds
    autosave   PUT  /api/tasks/<id>/draft/
    (think)
    submit     POST /api/tasks/<id>/submit/  with an Idempotency-Key (repeated with the same key,
               at most 3 times, after a 5xx or a transport error)

A cycle under way when the time is up is finished, so every session ends with nothing held.
Before anything is measured every gunicorn worker has served requests (load_server.warm_workers:
a worker's first request may import the whole URLconf, over a second of CPU, which a run that
happened to meet it would count as load).
The sessions are threads spread over --client-processes forked load-generator processes (default
4; 64 threads in one interpreter queue for its lock and add their wait to the latencies); the
CPU that gunicorn's processes and the load generator used per request is printed too.
Prints requests/s, p50 / p95 / p99 / max per endpoint (nearest rank) and errors, first for the
baseline (--baseline-sessions, same loop, same server, in the same run), then for --sessions,
and the ratio between the two; then checks the database: every acknowledged (201 / 200) submit
stored exactly once, nothing else stored for these annotators, no (item, annotator) twice.

--previous REV compares two versions of the code in the same run: REV's tree (`git archive`, into
a temporary folder; nothing in the checkout changes) runs under a second gunicorn, same settings,
same virtual environment, same database (REV must share the current schema: the benchmark
migrates with the current code), and each load runs against REV's server, then against the
current one (--rounds times, alternated), fresh annotators each time, one server loaded at a
time. Printed per endpoint: p95 current / previous, and the server CPU per request of each.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.load_server import (  # noqa: E402
    admin_sql,
    code_of,
    database_exists,
    server_url,
    start_gunicorn,
    stop_gunicorn,
    tree_cpu_seconds,
    warm_workers,
    with_database,
)

BOX = {"bbox": [10, 20, 30, 40], "state": "whole apple"}
ENDPOINTS = ("claim", "autosave", "submit")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--baseline-sessions", type=int, default=8)
    parser.add_argument("--baseline-seconds", type=float, default=20.0)
    parser.add_argument("--think-min", type=float, default=0.2)
    parser.add_argument("--think-max", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=2 * (os.cpu_count() or 1) + 1)
    parser.add_argument(
        "--client-processes", type=int, default=4, help="spread the sessions over this many load-generator processes"
    )
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--database", default="statelab_bench_load")
    parser.add_argument("--reuse", action="store_true", help="keep an existing database and its items")
    parser.add_argument("--keep", action="store_true", help="do not drop the database at the end")
    parser.add_argument(
        "--previous", metavar="REV", help="also run every load against this commit's code (git archive), alternated"
    )
    parser.add_argument("--rounds", type=int, default=1, help="with --previous: previous/current alternations per load")
    return parser.parse_args()


class Sessions:
    """N annotator sessions over HTTP, each in its own thread with its own client."""

    def __init__(self, base_url: str, slug: str, people: list[tuple[int, str]], args: argparse.Namespace):
        self.base_url, self.slug, self.people, self.args = base_url, slug, people, args
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.errors: Counter = Counter()  # (endpoint, status or exception name)
        self.acked: dict[int, tuple[int, int]] = {}  # annotation id -> (item, annotator)
        self.requests = 0
        self.lock = threading.Lock()

    def timed(self, client, endpoint: str, method: str, url: str, **kwargs):
        import httpx

        t0 = time.perf_counter()
        try:
            r = client.request(method, url, **kwargs)
        except httpx.TransportError as exc:
            with self.lock:
                self.requests += 1
                self.errors[(endpoint, type(exc).__name__)] += 1
            return None
        ms = (time.perf_counter() - t0) * 1000
        with self.lock:
            self.requests += 1
            self.latency[endpoint].append(ms)
            if r.status_code >= 400:
                self.errors[(endpoint, r.status_code)] += 1
        return r

    def session(self, user_id: int, token: str, start_at: float, stop_at: float) -> None:
        import httpx

        rng = random.Random(user_id)
        think = lambda: time.sleep(rng.uniform(self.args.think_min, self.args.think_max))  # noqa: E731
        client = httpx.Client(base_url=self.base_url, headers={"Authorization": f"Token {token}"}, timeout=60)
        time.sleep(max(0.0, start_at - time.time()) + rng.uniform(0, self.args.think_max))  # staggered start
        try:
            while time.time() < stop_at:
                r = self.timed(client, "claim", "POST", f"/api/projects/{self.slug}/tasks/next/", json={})
                if r is None or r.status_code != 200:
                    if r is not None and r.status_code == 204:
                        return  # nothing left
                    think()
                    continue
                task = r.json()
                think()
                self.timed(
                    client,
                    "autosave",
                    "PUT",
                    f"/api/tasks/{task['task']}/draft/",
                    json={"draft": {"bbox": [10, 20, 30, 40]}, "version": task["version"]},
                )
                think()
                for _attempt in range(3):
                    r = self.timed(
                        client,
                        "submit",
                        "POST",
                        f"/api/tasks/{task['task']}/submit/",
                        json={"result": BOX, "time_spent_ms": 1500},
                        headers={"Idempotency-Key": f"load:{task['task']}"},
                    )
                    if r is not None and r.status_code < 500:
                        break
                if r is not None and r.status_code in (200, 201):
                    body = r.json()
                    with self.lock:
                        self.acked[body["id"]] = (body["item"], user_id)
        finally:
            client.close()

    def run(self, seconds: float, processes: int = 1) -> float:
        """The sessions as threads, spread over `processes` forked client processes (one
        interpreter lock each: 64 threads in one process queue for it and inflate latency)."""
        start_at = time.time() + 1.0
        stop_at = start_at + seconds
        if processes <= 1:
            cpu = time.process_time()
            self._threads(self.people, start_at, stop_at)
            self.client_cpu = time.process_time() - cpu
            return time.time() - start_at
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        queue = ctx.Queue()

        def child(part):
            cpu = time.process_time()
            self._threads(part, start_at, stop_at)
            queue.put((dict(self.latency), self.errors, self.acked, self.requests, time.process_time() - cpu))

        parts = [self.people[k::processes] for k in range(processes)]
        procs = [ctx.Process(target=child, args=(part,)) for part in parts if part]
        for p in procs:
            p.start()
        self.client_cpu = 0.0
        for _ in procs:
            latency, errors, acked, requests, cpu = queue.get()
            for name, values in latency.items():
                self.latency[name].extend(values)
            self.errors.update(errors)
            self.acked.update(acked)
            self.requests += requests
            self.client_cpu += cpu
        for p in procs:
            p.join()
        return time.time() - start_at

    def _threads(self, people, start_at: float, stop_at: float) -> None:
        threads = [threading.Thread(target=self.session, args=(uid, tok, start_at, stop_at)) for uid, tok in people]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def report(self, label: str, wall: float) -> dict:
        from bench.bench_queue import percentile  # nearest rank, as the queue bench reports

        n_errors = sum(self.errors.values())
        print(
            f"\n{label}: {wall:.1f} s, {self.requests} requests, {self.requests / wall:.1f} requests/s, "
            f"{len(self.acked)} annotations acknowledged ({len(self.acked) / wall:.1f}/s), {n_errors} errors"
        )
        for name in ENDPOINTS:
            v = self.latency[name]
            if v:
                print(
                    f"  {name:<9} n {len(v):6d}   p50 {statistics.median(v):7.1f} ms   "
                    f"p95 {percentile(v, 95):7.1f} ms   "
                    f"p99 {percentile(v, 99):7.1f} ms   max {max(v):7.1f} ms"
                )
        if self.errors:
            print("  errors: " + ", ".join(f"{e} {s}: {n}" for (e, s), n in sorted(self.errors.items(), key=str)))
        return {
            "rps": self.requests / wall,
            "p95": {n: percentile(self.latency[n], 95) for n in ENDPOINTS if self.latency[n]},
            "p50": {n: statistics.median(self.latency[n]) for n in ENDPOINTS if self.latency[n]},
        }


def check_stored(sessions: Sessions) -> bool:
    from django.db import connection

    ids = [uid for uid, _ in sessions.people]
    with connection.cursor() as c:
        c.execute("SELECT id, item_id, annotator_id FROM annotation_annotation WHERE annotator_id = ANY(%s)", [ids])
        stored = {a: (i, u) for a, i, u in c.fetchall()}
        c.execute(
            """SELECT count(*) FROM (SELECT 1 FROM annotation_annotation WHERE annotator_id = ANY(%s)
                     GROUP BY item_id, annotator_id HAVING count(*) > 1) d""",
            [ids],
        )
        duplicated = c.fetchone()[0]
    acked = sessions.acked
    missing = [a for a in acked if stored.get(a) != acked[a]]
    extra = [a for a in stored if a not in acked]
    ok = not missing and not extra and not duplicated
    print(
        f"  {'nothing lost' if ok else 'LOST OR DUPLICATED'}: {len(acked)} acknowledged, {len(stored)} stored, "
        f"{duplicated} duplicated"
        + (f", {len(missing)} acknowledged but missing, {len(extra)} stored unacknowledged" if not ok else "")
    )
    return ok


def main() -> None:
    args = parse_args()
    os.environ.setdefault("SECRET_KEY", "bench-load-only-" + "x" * 40)
    os.environ["DEBUG"] = "0"
    os.environ.pop("STATELAB_HTTPS", None)
    if not args.reuse or not database_exists(args.database):
        admin_sql(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
        admin_sql(f'CREATE DATABASE "{args.database}"')
    os.environ["DATABASE_URL"] = with_database(server_url(), args.database)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()  # before the models below are imported

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from rest_framework.authtoken.models import Token

    from annotation.models import Membership
    from bench.bench_queue import build  # noqa: E402  (sets Django up against DATABASE_URL)

    ok = True
    servers: dict[str, subprocess.Popen] = {}
    scratch = tempfile.TemporaryDirectory(prefix="bench-load-previous-") if args.previous else None
    try:
        t = time.perf_counter()
        call_command("migrate", verbosity=0)
        print(f"database {args.database}: migrated in {time.perf_counter() - t:.1f} s")
        project, _ = build(args.items, 0, True)
        with connection.cursor() as cursor:
            # Statistics as a database in use has them: otherwise autovacuum takes them in the middle
            # of a run, and each server plans its prepared statements on whichever it found first.
            cursor.execute("ANALYZE annotation_item, annotation_task, annotation_annotation")
        connection.close()
        codes = ["current"]
        if scratch is not None:
            servers["previous"] = start_gunicorn(
                args.port + 1, args.workers, code_of(args.previous, Path(scratch.name))
            )
            codes = ["previous", "current"]
        servers["current"] = start_gunicorn(args.port, args.workers)
        bases = {"current": f"http://127.0.0.1:{args.port}", "previous": f"http://127.0.0.1:{args.port + 1}"}
        print(
            f"gunicorn: {args.workers} sync workers; think time {args.think_min}-{args.think_max} s before "
            f"autosave and before submit; {args.items:,} items"
        )

        def people(n: int) -> list[tuple[int, str]]:
            """n fresh annotators of the project, with API tokens."""
            stamp = uuid.uuid4().hex[:8]
            users = get_user_model().objects.bulk_create(
                [get_user_model()(username=f"load{stamp}_{i}", password="!") for i in range(n)]
            )
            Membership.objects.bulk_create([Membership(project=project, user=u, role="annotator") for u in users])
            out = [(u.pk, Token.objects.create(user=u).key) for u in users]
            connection.close()
            return out

        for code in codes:  # the workers' first requests, off the record: every worker, then the loop
            warm_workers(args.port + (code == "previous"), args.workers, people(1)[0][1])
            Sessions(bases[code], project.slug, people(2), args).run(2.0)
        results: dict[tuple[str, str], dict] = {}
        for label, n, seconds in (
            ("baseline", args.baseline_sessions, args.baseline_seconds),
            ("load", args.sessions, args.seconds),
        ):
            if n <= 0 or seconds <= 0:
                continue
            runs: dict[str, list] = defaultdict(list)  # code -> [(sessions, wall, server cpu)]
            for _round in range(args.rounds if scratch is not None else 1):
                for code in codes:
                    sessions = Sessions(bases[code], project.slug, people(n), args)
                    server = servers[code]
                    load_before, cpu_before = os.getloadavg()[0], tree_cpu_seconds(server.pid)
                    wall = sessions.run(seconds, min(args.client_processes, n))
                    cpu = tree_cpu_seconds(server.pid) - cpu_before
                    load = os.getloadavg()[0]
                    name = label if scratch is None else f"{label}, {code} code"
                    sessions.report(
                        (
                            f"{name}: {n} sessions, {seconds:.0f} s (load average {load_before:.1f} at the start, "
                            f"{load:.1f} at the end)"
                        ),
                        wall,
                    )
                    print(
                        f"  gunicorn CPU {cpu:.1f} s = {cpu / max(1, sessions.requests) * 1000:.1f} ms per request "
                        f"({cpu / wall:.2f} cores); load generator "
                        f"{sessions.client_cpu / max(1, sessions.requests) * 1000:.1f} ms "
                        f"per request ({sessions.client_cpu / wall:.2f} cores, "
                        f"{min(args.client_processes, n)} processes)"
                    )
                    ok = check_stored(sessions) and ok
                    runs[code].append((sessions, wall, cpu))
            for code, done in runs.items():
                results[(label, code)] = summary(done)
            if scratch is not None:
                before, after = results[(label, "previous")], results[(label, "current")]
                print(
                    f"\ncurrent / previous code, {n} sessions ({len(runs['current'])} run(s) each, pooled): "
                    + ", ".join(
                        f"{e} p95 {after['p95'][e] / before['p95'][e]:.2f}x ({before['p95'][e]:.1f} -> "
                        f"{after['p95'][e]:.1f} ms)"
                        for e in ENDPOINTS
                        if e in after["p95"] and e in before["p95"]
                    )
                    + f"; server CPU per request {after['cpu_ms'] / before['cpu_ms']:.2f}x "
                    f"({before['cpu_ms']:.2f} -> {after['cpu_ms']:.2f} ms)"
                )
        if ("baseline", "current") in results and ("load", "current") in results:
            base, loaded = results[("baseline", "current")], results[("load", "current")]
            ideal = args.sessions / args.baseline_sessions
            print(
                f"\nratio {args.sessions} / {args.baseline_sessions} sessions (current code): requests/s "
                f"{loaded['rps'] / base['rps']:.2f}x "
                f"(ideal {ideal:.1f}x: think-time bound, latency flat); "
                + ", ".join(
                    f"{n} p95 {loaded['p95'][n] / base['p95'][n]:.2f}x ({base['p95'][n]:.1f} -> "
                    f"{loaded['p95'][n]:.1f} ms)"
                    for n in ENDPOINTS
                    if n in loaded["p95"] and n in base["p95"]
                )
            )
    finally:
        for server in servers.values():
            stop_gunicorn(server)
        if scratch is not None:
            scratch.cleanup()
        connection.close()
        if not args.keep:
            t = time.perf_counter()
            admin_sql(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
            print(f"dropped database {args.database} in {time.perf_counter() - t:.1f} s")
    sys.exit(0 if ok else 1)


def summary(runs: list) -> dict:
    """Requests/s, p95 per endpoint and server CPU per request over one or more runs (pooled)."""
    from bench.bench_queue import percentile

    latency: dict[str, list[float]] = defaultdict(list)
    for sessions, _wall, _cpu in runs:
        for name, values in sessions.latency.items():
            latency[name].extend(values)
    requests = sum(sessions.requests for sessions, _wall, _cpu in runs)
    return {
        "rps": requests / sum(wall for _sessions, wall, _cpu in runs),
        "p95": {n: percentile(latency[n], 95) for n in ENDPOINTS if latency[n]},
        "cpu_ms": sum(cpu for _sessions, _wall, cpu in runs) / max(1, requests) * 1000,
    }


if __name__ == "__main__":
    main()
