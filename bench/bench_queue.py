"""Task-queue latency at scale: claim-next and submit with N items and concurrent annotators.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/statelab_bench \
        .venv/bin/python bench/bench_queue.py --items 1000000 --threads 32 --seconds 30

Creates (or reuses, --reuse) a ChangeIt project `bench-queue` with --items items inserted by one
INSERT ... SELECT generate_series (no Python loop), 32 annotators, 3 annotations per item. Prints
the EXPLAIN ANALYZE of the claim query (it must walk item_queue_idx, never scan the table), then
runs one thread per annotator, each with its own connection, claiming the next task (the same
service call and payload building the API does) and submitting a box, and prints p50 / p95 / p99
latency of both. In-process by default: no HTTP, so the figures are the cost of the queue itself.

    --think-ms 1000   annotators pause (exponential, mean 1 s) between a submit and the next claim;
                      0 (default) runs them back to back, which measures saturation, not latency
    --http 4          the same loop through the JSON API (token auth) on a gunicorn server with
                      4 sync workers started for the run (the Label Studio comparison)
    --http-threads 2  gunicorn's gthread workers with 2 threads each instead of sync workers
                      (HTTP keep-alive: a client reuses its connection)
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from annotation.models import Annotation, Item, Membership, Project, Task  # noqa: E402
from annotation.queue import annotation_submit, queue_claim_next, rules, sql  # noqa: E402
from annotation.selectors import task_view  # noqa: E402

SLUG = "bench-queue"
PAYLOAD = '{"image": "bench.jpg", "object": "apple", "state": "whole apple", "distractors": ["peeled apple"]}'


def build(n_items: int, n_users: int, reuse: bool) -> tuple[Project, list]:
    User = get_user_model()
    project = Project.objects.filter(slug=SLUG).first()
    if project and reuse and Item.objects.filter(project=project).count() == n_items:
        print(f"reusing {SLUG} with {n_items:,} items")
    else:
        if project:
            t = time.perf_counter()
            with connection.cursor() as c:
                c.execute(
                    (
                        "DELETE FROM annotation_annotation a USING annotation_item i WHERE a.item_id = i.id AND "
                        "i.project_id = %s"
                    ),
                    [project.pk],
                )
                c.execute(
                    (
                        "DELETE FROM annotation_task t USING annotation_item i WHERE t.item_id = i.id AND "
                        "i.project_id = %s"
                    ),
                    [project.pk],
                )
                c.execute("DELETE FROM annotation_item WHERE project_id = %s", [project.pk])
            project.delete()
            print(f"dropped the previous bench project in {time.perf_counter() - t:.1f} s")
        project = Project.objects.create(
            slug=SLUG,
            name="Queue benchmark",
            protocol="changeit",
            annotations_per_item=3,
            settings={"lease_seconds": 600},
        )
        t = time.perf_counter()
        with connection.cursor() as c:
            c.execute(
                """INSERT INTO annotation_item (project_id, external_id, payload, media, status, split, tags, is_gold,
                                                annotation_count, created_at, updated_at)
                   SELECT %s, 'b' || g, %s::jsonb, '{}'::jsonb, 'pending', 'test', '[]'::jsonb, false, 0, now(), now()
                   FROM generate_series(1, %s) AS g""",
                [project.pk, PAYLOAD, n_items],
            )
            c.execute("ANALYZE annotation_item")
        print(f"inserted {n_items:,} items in {time.perf_counter() - t:.1f} s")
    # Each run annotates with fresh people so earlier runs do not change the queue's shape much.
    stamp = int(time.time())
    users = [User(username=f"bench{stamp}_{i}") for i in range(n_users)]
    for u in users:
        u.set_unusable_password()
    users = User.objects.bulk_create(users)
    Membership.objects.bulk_create([Membership(project=project, user=u, role="annotator") for u in users])
    with connection.cursor() as c:
        c.execute("ANALYZE annotation_task; ANALYZE annotation_annotation")
    return project, users


def explain_claim(project: Project, user, count: int = 0, window: int | None = None) -> str:
    params = sql.claim_sql_params(project=project, user_id=user.pk, gold=False, now=timezone.now())
    statement = sql.claim_sql(count, window)
    with transaction.atomic():
        with connection.cursor() as c:
            c.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) " + statement, params)
            plan = "\n".join(r[0] for r in c.fetchall())
        transaction.set_rollback(True)
    return plan


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


BOX = {"bbox": [10, 20, 30, 40], "state": "whole apple"}


class InProcess:
    """The service calls the API views make, without HTTP."""

    def __init__(self, project: Project):
        self.project = project

    def client(self, user):
        return user

    def claim(self, user) -> int | None:
        task = queue_claim_next(project=self.project, user=user)
        return None if task is None else task_view(task=task)["task"]

    def submit(self, user, task_id: int, i: int) -> None:
        annotation_submit(
            task_id=task_id, user=user, time_spent_ms=1000 + i, result=BOX, idempotency_key=f"{user.pk}:{task_id}"
        )


class OverHttp:
    """The public JSON API with token auth, against a gunicorn server started for the run."""

    def __init__(self, project: Project, base: str, tokens: dict[int, str]):
        self.project, self.base, self.tokens = project, base, tokens

    def client(self, user):
        import httpx

        return httpx.Client(base_url=self.base, headers={"Authorization": f"Token {self.tokens[user.pk]}"}, timeout=30)

    def claim(self, client) -> int | None:
        r = client.post(f"/api/projects/{self.project.slug}/tasks/next/", json={})
        if r.status_code == 204:
            return None
        r.raise_for_status()
        return r.json()["task"]

    def submit(self, client, task_id: int, i: int) -> None:
        r = client.post(
            f"/api/tasks/{task_id}/submit/",
            json={"result": BOX, "time_spent_ms": 1000 + i},
            headers={"Idempotency-Key": f"http:{task_id}"},
        )
        if r.status_code not in (200, 201):
            raise RuntimeError(f"submit {task_id}: {r.status_code} {r.text[:200]}")


def start_gunicorn(port: int, workers: int, threads: int = 0) -> subprocess.Popen:
    import httpx

    env = dict(os.environ, DEBUG="0")
    worker_class = ["--worker-class", "gthread", "--threads", str(threads)] if threads else []
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi:application",
            "-w",
            str(workers),
            "-b",
            f"127.0.0.1:{port}",
            *worker_class,
            "--log-level",
            "warning",
        ],
        cwd=str(Path(__file__).resolve().parent.parent),
        env=env,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/me/", timeout=2).status_code in (401, 403):
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    proc.terminate()
    raise RuntimeError("gunicorn did not start")


def run(
    ops, users: list, seconds: float, think_ms: float = 0.0, start_at: float | None = None
) -> dict[str, list[float]]:
    """Annotator threads from start_at (wall clock; now when None) for `seconds`."""
    claims: list[float] = []
    submits: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    start_at = start_at or time.time() + 0.5
    stop_at = start_at + seconds

    def annotator(user, n: int):
        mine_c, mine_s = [], []
        try:
            client = ops.client(user)
            connection.ensure_connection()
            time.sleep(max(0.0, start_at - time.time()))
            i = 0
            rng = random.Random(user.pk)
            while time.time() < stop_at:
                if think_ms:
                    # A person looks at the task before the next claim: exponential think time.
                    time.sleep(rng.expovariate(1.0 / think_ms) / 1000)
                t0 = time.perf_counter()
                task_id = ops.claim(client)
                if task_id is None:
                    break
                t1 = time.perf_counter()
                ops.submit(client, task_id, i)
                t2 = time.perf_counter()
                mine_c.append((t1 - t0) * 1000)
                mine_s.append((t2 - t1) * 1000)
                i += 1
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()
            with lock:
                claims.extend(mine_c)
                submits.extend(mine_s)

    threads = [threading.Thread(target=annotator, args=(u, n)) for n, u in enumerate(users)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return {"claim": claims, "submit": submits, "wall": [time.time() - start_at]}


def run_processes(ops, users: list, processes: int, seconds: float, think_ms: float) -> dict[str, list[float]]:
    """The same threads spread over forked processes (one interpreter lock each)."""
    import multiprocessing as mp

    connection.close()  # never share a connection across fork
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    start_at = time.time() + 3.0

    def child(part):
        try:
            queue.put(("ok", run(ops, part, seconds, think_ms, start_at)))
        except BaseException as exc:  # reported by the parent
            queue.put(("error", repr(exc)))

    parts = [users[k::processes] for k in range(processes)]
    procs = [ctx.Process(target=child, args=(part,)) for part in parts]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    bad = [r for kind, r in results if kind == "error"]
    if bad:
        raise RuntimeError(bad[0])
    out = {"claim": [], "submit": [], "wall": [max(r["wall"][0] for _, r in results)]}
    for _, r in results:
        out["claim"] += r["claim"]
        out["submit"] += r["submit"]
    return out


def report(label: str, out: dict) -> None:
    n = len(out["claim"])
    print(f"\n{label}, {out['wall'][0]:.1f} s: {n} claim+submit cycles ({n / out['wall'][0]:.0f}/s)")
    for name in ("claim", "submit"):
        v = out[name]
        print(
            f"  {name:<7} p50 {statistics.median(v):6.2f} ms   p95 {percentile(v, 95):6.2f} ms   "
            f"p99 {percentile(v, 99):6.2f} ms   max {max(v):7.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--reuse", action="store_true", help="keep the items of an earlier run when the count matches")
    parser.add_argument(
        "--think-ms",
        type=float,
        default=0.0,
        help="mean think time of an annotator between submit and the next claim (0: back to back)",
    )
    parser.add_argument(
        "--http",
        type=int,
        default=0,
        metavar="WORKERS",
        help="go through the JSON API on a gunicorn server with this many workers",
    )
    parser.add_argument(
        "--http-threads",
        type=int,
        default=0,
        metavar="N",
        help="with --http: gthread workers with N threads each (keep-alive) instead of sync workers",
    )
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="spread the in-process annotator threads over this many forked processes",
    )
    parser.add_argument(
        "--switch-ms",
        type=float,
        default=5.0,
        help="the interpreter's thread switch interval (Python's default is 5 ms)",
    )
    args = parser.parse_args()
    sys.setswitchinterval(args.switch_ms / 1000)
    if not os.environ.get("DATABASE_URL"):
        sys.exit("The queue benchmark runs against a PostgreSQL of its own: set DATABASE_URL.")
    call_command("migrate", verbosity=0)
    project, users = build(args.items, args.threads, args.reuse)
    print(f"\nEXPLAIN ANALYZE of a windowed claim (first {rules.CLAIM_WINDOW} items with 2 annotations):")
    print(explain_claim(project, users[0], 2, rules.CLAIM_WINDOW))
    print("\nEXPLAIN ANALYZE of the claim at level 0 (items without annotations):")
    print(explain_claim(project, users[0]))
    if args.http:
        from rest_framework.authtoken.models import Token

        tokens = {u.pk: Token.objects.get_or_create(user=u)[0].key for u in users}
        server = start_gunicorn(args.port, args.http, args.http_threads)
        try:
            ops = OverHttp(project, f"http://127.0.0.1:{args.port}", tokens)
            run(ops, users[:1], 1.0)
            out = run(ops, users, args.seconds, args.think_ms)
        finally:
            server.terminate()
            server.wait(timeout=30)
        kind = f"gthread workers x {args.http_threads} threads" if args.http_threads else "sync workers"
        report(
            f"HTTP (gunicorn, {args.http} {kind}), {args.threads} clients, {args.items:,} items, "
            f"think time {args.think_ms:.0f} ms",
            out,
        )
    else:
        ops = InProcess(project)
        run(ops, users[:1], 1.0)  # warm the plan cache
        if args.processes > 1:
            out = run_processes(ops, users, args.processes, args.seconds, args.think_ms)
        else:
            out = run(ops, users, args.seconds, args.think_ms)
        report(
            f"in-process, {args.threads} annotator threads in {max(1, args.processes)} process(es), "
            f"{args.items:,} items, think time {args.think_ms:.0f} ms",
            out,
        )
    counts = Annotation.objects.filter(item__project=project).count()
    active = Task.objects.filter(item__project=project, status="active").count()
    print(f"  annotations in the project: {counts:,}; active tasks left: {active}")


if __name__ == "__main__":
    main()
