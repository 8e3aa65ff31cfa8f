"""Import and export throughput of StateLab's streaming importer, against a per-row ORM baseline.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/statelab_bench \
        .venv/bin/python bench/bench_import.py --sizes 100000 1000000

What it measures, in one run on one database:
- streaming import (`manage.py import_items`, validate pass + COPY write pass) of N ChangeIt lines
  sharing 4 images, each N in a fresh subprocess: items/s over the import itself (Django start-up
  excluded) and the process's peak RSS (ru_maxrss);
- the naive baseline: parse each line and `Item.objects.create(...)` it, one row per save, on
  a smaller sample (--baseline lines), reported per item;
- export of a 100k-item release: freeze time, then the streamed JSON and JSONL exports consumed
  chunk by chunk (seconds, MB/s).
Use a scratch database: the script creates projects named bench-* and deletes them at the end.
Figures are printed as a Markdown table (see bench/README.md for recorded runs).

Small imports over HTTP, side by side with Label Studio (`--http-batches 100`, issue 23 item 1):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/statelab_bench \
        .venv/bin/python bench/bench_import.py --sizes --export 0 --baseline 0 --http-batches 100

- StateLab: a gunicorn server (--http-workers sync workers) started for the run; one client posts
  the same --http-batches files of --batch-size ChangeIt lines one request after the other, each
  as `files` (imported in the request, all or nothing: 201), then again as groups of
  --files-per-request files per request; with REDIS_URL also as the queued single `file` upload
  (202) that a Celery worker started for the run imports, the client polling each run to its end.
  Each mode imports into a fresh project; items/s is lines over the wall time of all requests.
  `--clients 1 2` repeats every mode (and the peer) with that many concurrent clients.
- Label Studio 1.23.2, in its own virtual environment under bench/.peers/ (created with
  `python -m venv` and `pip install label-studio==1.23.2` when missing), started on a free port
  with a temporary data directory (its own PostgreSQL database with --peer-database NAME, created
  and dropped by the run; SQLite otherwise), a project made through its API, the same batches
  posted as 1,000 tasks per `POST /api/projects/{id}/import`, then stopped. --no-peer skips it;
  if it cannot be installed or started the run says why and compares with the figure recorded
  in bench/README.md instead. StateLab and the peer run alternately, --rounds times.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LABEL_STUDIO_IMPORT_PER_S = 1733  # measured on this machine class, see the shared peer notes
LABEL_STUDIO_EXPORT_100K_S = 488
# Label Studio 1.23.2 importing 100 x 1,000 tasks over HTTP, recorded side by side on 2026-11-23
# (bench/README.md, "Small imports"): the comparison when the peer cannot run here.
LABEL_STUDIO_HTTP_BATCHES_PER_S = 3333
LABEL_STUDIO_VERSION = "1.23.2"
PEERS = REPO / "bench" / ".peers"

CHILD = r"""
import resource, sys, time
import django
django.setup()
from django.core.management import call_command
t = time.perf_counter()
args = [sys.argv[1], sys.argv[2], "--protocol", "changeit", "--create"] + sys.argv[3:]
call_command("import_items", *args)
print("RESULT", time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def write_jsonl(path: Path, n: int) -> Path:
    from annotation.importing.samples import sample_line, sample_media_paths

    if path.exists():
        return path
    with open(path, "w", encoding="utf-8") as fh:
        buf = []
        for i in range(n):
            buf.append(json.dumps(sample_line("changeit", i, media=sample_media_paths("changeit", i))))
            if len(buf) == 10_000:
                fh.write("\n".join(buf) + "\n")
                buf = []
        if buf:
            fh.write("\n".join(buf) + "\n")
    return path


def streaming_import(slug: str, path: Path, *extra: str) -> tuple[float, int]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, slug, str(path), *extra],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    _, seconds, rss_kb = proc.stdout.strip().splitlines()[-1].split()
    return float(seconds), int(rss_kb) * 1024


def orm_baseline(path: Path, n: int) -> float:
    """The naive importer: one json.loads and one Item.objects.create (its own INSERT and commit) per line."""
    from annotation.models import Item, Project

    project = Project.objects.create(slug="bench-orm", name="bench-orm", protocol="changeit")
    start = time.perf_counter()
    with open(path, encoding="utf-8") as fh:
        for i, raw in enumerate(fh):
            if i >= n:
                break
            obj = json.loads(raw)
            Item.objects.create(
                project=project,
                external_id=obj.pop("id"),
                split=obj.pop("split", "test"),
                tags=obj.pop("tags", []),
                payload=obj,
                status="annotated",
            )
    return time.perf_counter() - start


def export_run(path: Path, n: int) -> dict:
    from annotation.models import Project, Release
    from annotation.releases import release_export, release_freeze

    seconds, _ = streaming_import("bench-export", path, "--verified")
    project = Project.objects.get(slug="bench-export")
    t = time.perf_counter()
    release = release_freeze(project=project, version="v1")
    freeze_s = time.perf_counter() - t
    release = Release.objects.select_related("project").get(pk=release.pk)
    out = {"items": release.item_count, "freeze_s": freeze_s}
    for fmt in ("json", "jsonl"):
        t = time.perf_counter()
        size = 0
        for chunk in release_export(release, fmt):
            size += len(chunk)
        out[f"{fmt}_s"] = time.perf_counter() - t
        out[f"{fmt}_mb"] = size / 1e6
    return out


# --- small imports over HTTP, side by side with Label Studio --------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, ok, proc: subprocess.Popen, seconds: float, headers: dict | None = None) -> None:
    import httpx

    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode}")
        try:
            if ok(httpx.get(url, timeout=5, headers=headers or {}).status_code):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"no answer from {url} within {seconds:.0f} s")


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def batch_lines(protocol_lines, start: int, n: int) -> bytes:
    return ("\n".join(json.dumps(line) for line in protocol_lines(start, n)) + "\n").encode()


def changeit_lines(start: int, n: int):
    from annotation.importing.samples import sample_line, sample_media_paths

    for i in range(start, start + n):
        yield sample_line("changeit", i, media=sample_media_paths("changeit", i))


class StateLabServer:
    """gunicorn (sync workers) serving this checkout for the run, and a researcher's token."""

    def __init__(self, workers: int, celery: bool):
        from django.contrib.auth import get_user_model
        from rest_framework.authtoken.models import Token

        user, _ = get_user_model().objects.get_or_create(username="bench-importer")
        self.token = Token.objects.get_or_create(user=user)[0].key
        self.user = user
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, DEBUG="0")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi:application", "-w", str(workers)]
            + ["-b", f"127.0.0.1:{self.port}", "--log-level", "warning"],
            cwd=REPO,
            env=env,
        )
        self.worker = None
        try:
            wait_http(f"{self.base}/api/me/", lambda code: code in (401, 403), self.proc, 60)
            if celery:
                self.worker = subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "default", "-c", "1"]
                    + ["--loglevel", "warning", "-n", f"bench-import-{self.port}@%h"],
                    cwd=REPO,
                    env=env,
                )
        except BaseException:
            self.close()
            raise

    def project(self, slug: str):
        from annotation.models import Membership, Project, Role

        project = Project.objects.create(slug=slug, name=slug, protocol="changeit")
        Membership.objects.create(project=project, user=self.user, role=Role.RESEARCHER)
        return project

    def close(self) -> None:
        stop(self.worker)
        stop(self.proc)


def in_clients(n_clients: int, requests: list, make_client, send) -> float:
    """Seconds for `n_clients` threads, each with its own client, to send every request (taken in
    order from a shared list); the first failure is raised."""
    import threading

    queue_lock = threading.Lock()
    todo = list(enumerate(requests))
    failures: list[BaseException] = []

    def client_loop() -> None:
        try:
            with make_client() as client:
                while not failures:
                    with queue_lock:
                        if not todo:
                            return
                        k, request = todo.pop(0)
                    send(client, k, request)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            failures.append(exc)

    threads = [threading.Thread(target=client_loop) for _ in range(n_clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    if failures:
        raise failures[0]
    return seconds


def statelab_http(
    server: StateLabServer, bodies: list[bytes], mode: str, per_request: int, tag: str, clients: int = 1
) -> float:
    """Seconds to import `bodies` over HTTP into a new project: `files` (per_request files a
    request, imported in the request) or `queued` (one `file` a request, polled to its end)."""
    import httpx

    from annotation.models import Item

    project = server.project(f"bench-http-{mode}-{tag}")
    url = f"/api/projects/{project.slug}/imports/"

    def make_client():
        return httpx.Client(base_url=server.base, headers={"Authorization": f"Token {server.token}"}, timeout=300)

    def send_files(client, k: int, group: list[bytes]) -> None:
        files = [("files", (f"part-{k}-{j}.jsonl", body)) for j, body in enumerate(group)]
        r = client.post(url, files=files)
        if r.status_code != 201:
            raise RuntimeError(f"StateLab import: {r.status_code} {r.text[:500]}")

    def send_queued(client, k: int, body: bytes) -> None:
        r = client.post(url, files=[("file", (f"part-{k}.jsonl", body))])
        if r.status_code != 202:
            raise RuntimeError(f"StateLab import: {r.status_code} {r.text[:500]}")
        run = r.json()
        while not run["done"]:
            time.sleep(0.005)
            run = client.get(run["url"]).json()
        if run["status"] != "finished":
            raise RuntimeError(f"StateLab import run {run['id']}: {run['status']} {run['errors'][:3]}")

    if mode == "files":
        groups = [bodies[k : k + per_request] for k in range(0, len(bodies), per_request)]
        seconds = in_clients(clients, groups, make_client, send_files)
    else:
        seconds = in_clients(clients, bodies, make_client, send_queued)
    expected = sum(body.count(b"\n") for body in bodies)
    if (got := Item.objects.filter(project=project).count()) != expected:
        raise RuntimeError(f"StateLab imported {got} items, expected {expected}")
    return seconds


LS_CONFIG = """<View>
  <Image name="image" value="$image"/>
  <TextArea name="state" toName="image"/>
  <RectangleLabels name="bbox" toName="image"><Label value="object"/></RectangleLabels>
</View>"""


class LabelStudio:
    """Label Studio in its own virtual environment, started for the run on a free port with a
    temporary data directory; stopped (and its database dropped) by close()."""

    TOKEN = "bench0import0token0" + "0" * 21

    def __init__(self, database: str | None):
        self.venv = PEERS / f"label-studio-{LABEL_STUDIO_VERSION}"
        self.exe = self.venv / "bin" / "label-studio"
        self.database = database
        self.data = Path(tempfile.mkdtemp(prefix="bench-label-studio-"))
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def install(self) -> None:
        if self.exe.exists():
            return
        print(f"installing Label Studio {LABEL_STUDIO_VERSION} into {self.venv} (once) ...", flush=True)
        PEERS.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True)
        subprocess.run(
            [str(self.venv / "bin" / "python"), "-m", "pip", "install", "-q", f"label-studio=={LABEL_STUDIO_VERSION}"],
            check=True,
            timeout=1800,
        )

    def _db_env(self) -> dict:
        if not self.database:
            return {}
        from django.conf import settings

        db = settings.DATABASES["default"]
        return {
            "DJANGO_DB": "default",
            "POSTGRE_NAME": self.database,
            "POSTGRE_USER": db.get("USER") or "postgres",
            "POSTGRE_PASSWORD": db.get("PASSWORD") or "",
            "POSTGRE_HOST": db.get("HOST") or "127.0.0.1",
            "POSTGRE_PORT": str(db.get("PORT") or 5432),
        }

    def _database(self, sql: str) -> None:
        from django.db import connection

        with connection.cursor() as cur:
            cur.execute(sql)

    def start(self) -> None:
        self.install()
        if self.database:
            self._database(f'DROP DATABASE IF EXISTS "{self.database}"')
            self._database(f'CREATE DATABASE "{self.database}"')
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "SECRET_KEY")}
        env.update(
            LABEL_STUDIO_BASE_DATA_DIR=str(self.data),
            LATEST_VERSION_CHECK="false",
            COLLECT_ANALYTICS="false",
            DEBUG="false",
            **self._db_env(),
        )
        self.log = open(self.data / "server.log", "wb")
        self.proc = subprocess.Popen(
            [str(self.exe), "start", "--no-browser", "--internal-host", "127.0.0.1", "--port", str(self.port)]
            + ["--username", "bench@example.org", "--password", "bench-password-1"]
            + ["--user-token", self.TOKEN, "--enable-legacy-api-token"],
            cwd=self.data,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_http(f"{self.base}/api/projects/", lambda code: code == 200, self.proc, 1200, self.headers)
        except RuntimeError as exc:
            tail = (self.data / "server.log").read_text(errors="replace")[-1500:]
            raise RuntimeError(f"{exc}; its log ends: {tail}") from exc

    @property
    def headers(self) -> dict:
        return {"Authorization": f"Token {self.TOKEN}"}

    def import_batches(self, tasks: list[list[dict]], tag: str, clients: int = 1) -> float:
        import httpx

        def make_client():
            return httpx.Client(base_url=self.base, headers=self.headers, timeout=600)

        with make_client() as client:
            r = client.post("/api/projects/", json={"title": f"bench-{tag}", "label_config": LS_CONFIG})
            r.raise_for_status()
            project = r.json()["id"]

        def send(client, _k: int, batch: list[dict]) -> None:
            r = client.post(f"/api/projects/{project}/import", json=batch)
            if r.status_code != 201:
                raise RuntimeError(f"Label Studio import: {r.status_code} {r.text[:500]}")

        seconds = in_clients(clients, tasks, make_client, send)
        with make_client() as client:
            count = client.get(f"/api/projects/{project}/").json().get("task_number")
        expected = sum(len(batch) for batch in tasks)
        if count != expected:
            raise RuntimeError(f"Label Studio holds {count} tasks, expected {expected}")
        return seconds

    def close(self) -> None:
        stop(self.proc)
        if getattr(self, "log", None):
            self.log.close()
        if self.database:
            try:
                self._database(f'DROP DATABASE IF EXISTS "{self.database}"')
            except Exception as exc:  # noqa: BLE001 - reported, the run's figures stand
                print(f"could not drop {self.database}: {exc}", flush=True)
        shutil.rmtree(self.data, ignore_errors=True)


def http_runs(args) -> list[tuple[str, float, float]]:
    """(what, items/s, seconds) of every HTTP round, StateLab's and Label Studio's alternated."""
    from annotation.importing.runs import import_media_root
    from annotation.importing.samples import write_sample_media

    write_sample_media(import_media_root(), "changeit")
    n, size = args.http_batches, args.batch_size
    bodies = [batch_lines(changeit_lines, k * size, size) for k in range(n)]
    # The peer gets the same items as tasks: their fields as data, the image as a URL of its own.
    tasks = [
        [
            {"data": {**line, "image": f"/data/local-files/?d={line['image']}"}}
            for line in changeit_lines(k * size, size)
        ]
        for k in range(n)
    ]
    items = n * size
    celery = bool(os.environ.get("REDIS_URL")) and not args.no_queued
    modes = [("files", 1), ("files", args.files_per_request)] + ([("queued", 1)] if celery else [])
    peer = None
    peer_note = ""
    if not args.no_peer:
        peer = LabelStudio(args.peer_database)
        try:
            print(f"starting Label Studio {LABEL_STUDIO_VERSION} ...", flush=True)
            peer.start()
        except Exception as exc:  # noqa: BLE001 - the run goes on without the peer, saying why
            peer.close()
            peer = None
            peer_note = f"Label Studio {LABEL_STUDIO_VERSION} could not be installed or started here: {exc}"
            print(peer_note, flush=True)
    else:
        peer_note = "Label Studio skipped (--no-peer)"
    results: list[tuple[str, float, float]] = []
    server = StateLabServer(args.http_workers, celery)
    try:
        # Each server process loads its code on its first import: not what is measured.
        warm = [batch_lines(changeit_lines, items + k * 10, 10) for k in range(4 * args.http_workers)]
        statelab_http(server, warm, "files", 1, "warm")
        if celery:
            statelab_http(server, warm[:2], "queued", 1, "warm")
        if peer is not None:
            peer.import_batches([[{"data": {"image": "/data/local-files/?d=img/c0.png"}}]] * 4, "warm")
        for r in range(args.rounds):
            for clients in args.clients:
                ways = f"{clients} client{'s' if clients != 1 else ''}"
                for mode, per in modes:
                    seconds = statelab_http(server, bodies, mode, per, f"{r}-{per}-{clients}", clients)
                    what = f"StateLab, {n} x {size:,} lines, " + (
                        f"{per} file(s) per request (`files`)" if mode == "files" else "queued `file` + polling"
                    )
                    results.append((f"{what}, {ways}", items / seconds, seconds))
                    print(f"round {r + 1}: {what}, {ways}: {seconds:.2f} s, {items / seconds:,.0f} items/s", flush=True)
                if peer is not None:
                    seconds = peer.import_batches(tasks, f"{r}-{clients}", clients)
                    what = f"Label Studio {LABEL_STUDIO_VERSION}, {n} x {size:,} tasks, one request each, {ways}"
                    results.append((what, items / seconds, seconds))
                    print(f"round {r + 1}: {what}: {seconds:.2f} s, {items / seconds:,.0f} items/s", flush=True)
    finally:
        server.close()
        if peer is not None:
            peer.close()

    # Every StateLab figure against Label Studio's best in this run (any client count), or against
    # the recorded figure when the peer could not run.
    peer_rates = [rate for what, rate, _ in results if what.startswith("Label Studio")]
    if peer_rates:
        reference, source = max(peer_rates), "Label Studio's best in this run"
    else:
        reference, source = LABEL_STUDIO_HTTP_BATCHES_PER_S, "Label Studio's recorded figure (bench/README.md)"
        print(f"\n{peer_note}\ncomparing with {source}: {reference:,} items/s", flush=True)
    print(f"\n| measurement | items/s | time | vs {source} ({reference:,.0f}/s) |")
    print("|---|---|---|---|")
    for what, rate, seconds in results:
        print(f"| {what} | {rate:,.0f} | {seconds:.2f} s | {rate / reference:.1f}× |")
    return results


def cleanup() -> None:
    from django.db import connection

    from annotation.models import Item, Project, Release, ReleaseItem

    projects = list(Project.objects.filter(slug__startswith="bench-").values_list("id", flat=True))
    if not projects:
        return
    with connection.cursor() as cur:
        cur.execute(
            f'DELETE FROM "{ReleaseItem._meta.db_table}" WHERE release_id IN '
            f'(SELECT id FROM "{Release._meta.db_table}" WHERE project_id = ANY(%s))',
            [projects],
        )
        cur.execute(f'DELETE FROM "{Release._meta.db_table}" WHERE project_id = ANY(%s)', [projects])
        cur.execute(f'DELETE FROM "{Item._meta.db_table}" WHERE project_id = ANY(%s)', [projects])
    Project.objects.filter(id__in=projects).delete()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--baseline", type=int, default=5_000, help="lines for the per-row ORM baseline")
    parser.add_argument("--export", type=int, default=100_000, help="items in the exported release (0 skips)")
    parser.add_argument("--work-dir", type=Path, default=None, help="where generated files go (default: a temp dir)")
    parser.add_argument(
        "--http-batches", type=int, default=0, help="small imports over HTTP: this many files (0 skips)"
    )
    parser.add_argument("--batch-size", type=int, default=1000, help="lines per file of the HTTP imports")
    parser.add_argument("--files-per-request", type=int, default=10, help="files per request in the batched mode")
    parser.add_argument("--http-workers", type=int, default=2, help="gunicorn sync workers of StateLab's server")
    parser.add_argument("--rounds", type=int, default=2, help="HTTP rounds, StateLab and Label Studio alternated")
    parser.add_argument("--clients", type=int, nargs="+", default=[1], help="concurrent HTTP clients (each count)")
    parser.add_argument("--no-peer", action="store_true", help="leave Label Studio out of the HTTP rounds")
    parser.add_argument("--no-queued", action="store_true", help="leave the queued (Celery) mode out")
    parser.add_argument(
        "--peer-database",
        default=None,
        help="PostgreSQL database for Label Studio, created and dropped (else SQLite)",
    )
    args = parser.parse_args()

    if "postgres" not in os.environ.get("DATABASE_URL", ""):
        sys.exit("Set DATABASE_URL to a scratch PostgreSQL database.")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="statelab-bench-"))
    os.environ.setdefault("MEDIA_ROOT", str(work / "media"))
    os.environ.setdefault("STATELAB_CACHE_ROOT", str(work / "cache"))
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from annotation.importing.samples import write_sample_media

    cleanup()
    data = work / "data"
    write_sample_media(data, "changeit")
    rows = []
    try:
        if args.http_batches:
            http_runs(args)
        for n in args.sizes:
            path = write_jsonl(data / f"items-{n}.jsonl", n)
            seconds, rss = streaming_import(f"bench-{n}", path)
            rows.append((f"streaming import, {n:,} lines", n / seconds, seconds, rss))
            print(
                f"import {n:>9,} lines: {seconds:7.1f} s  {n / seconds:9,.0f} items/s  peak RSS {rss / 2**20:5.0f} MiB",
                flush=True,
            )
        base_s = None
        if args.baseline > 0:  # --baseline 0 skips the per-row baseline
            base_path = write_jsonl(data / f"items-{args.baseline}.jsonl", args.baseline)
            base_s = orm_baseline(base_path, args.baseline)
            print(
                f"per-row ORM baseline, {args.baseline:,} lines: {base_s:.1f} s  {args.baseline / base_s:,.0f} items/s "
                f"({base_s / args.baseline * 1e6:.0f} µs per item)",
                flush=True,
            )
        export = None
        if args.export:
            export = export_run(write_jsonl(data / f"items-{args.export}.jsonl", args.export), args.export)
            print(
                f"release of {export['items']:,} items: freeze {export['freeze_s']:.1f} s, "
                f"export JSON {export['json_s']:.2f} s ({export['json_mb']:.0f} MB), "
                f"JSONL {export['jsonl_s']:.2f} s ({export['jsonl_mb']:.0f} MB)",
                flush=True,
            )
    finally:
        cleanup()

    print("\n| measurement | items/s | time | peak RSS | vs Label Studio |")
    print("|---|---|---|---|---|")
    for label, rate, seconds, rss in rows:
        print(
            f"| {label} | {rate:,.0f} | {seconds:.1f} s | {rss / 2**20:.0f} MiB | "
            f"{rate / LABEL_STUDIO_IMPORT_PER_S:.1f}× |"
        )
    if base_s:
        rate = args.baseline / base_s
        print(
            f"| per-row `Item.objects.create`, {args.baseline:,} lines | {rate:,.0f} | "
            f"{base_s / args.baseline * 1e6:.0f} µs/item | – | {rate / LABEL_STUDIO_IMPORT_PER_S:.1f}× |"
        )
    if export:
        print(
            f"| freeze release, {export['items']:,} items | {export['items'] / export['freeze_s']:,.0f} | "
            f"{export['freeze_s']:.1f} s | – | – |"
        )
        for fmt in ("json", "jsonl"):
            print(
                f"| streamed {fmt.upper()} export, {export['items']:,} items | "
                f"{export['items'] / export[f'{fmt}_s']:,.0f} | "
                f"{export[f'{fmt}_s']:.2f} s | – | {LABEL_STUDIO_EXPORT_100K_S / export[f'{fmt}_s']:.0f}× faster |"
            )
    print(f"\nfiles in {work}")


if __name__ == "__main__":
    main()
