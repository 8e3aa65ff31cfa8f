"""Label Studio as the peer of the import bench (bench/bench_import.py --http-batches): installed in
its own virtual environment under bench/.peers/ (git-ignored) when missing, started on a free port
with a temporary data directory (and its own PostgreSQL database when asked), fed the same
batches over its import API, stopped. Also the HTTP helpers both sides of that bench share.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PEERS = REPO / "bench" / ".peers"
LABEL_STUDIO_VERSION = "1.23.2"
# Label Studio 1.23.2 importing 100 x 1,000 tasks over HTTP, recorded side by side on 2026-11-23
# (bench/README.md, "Small imports"): the comparison when the peer cannot run here.
LABEL_STUDIO_HTTP_BATCHES_PER_S = 3333


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
