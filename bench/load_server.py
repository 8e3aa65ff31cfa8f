"""bench_load.py's servers: the PostgreSQL database it fills, the gunicorn instances it loads
(the checkout's code, or --previous's tree unpacked by `git archive`), their CPU, and their warm-up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent


def server_url() -> str:
    return os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/postgres"


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def admin_sql(statement: str) -> None:
    import psycopg

    with psycopg.connect(with_database(server_url(), "postgres"), autocommit=True) as conn:
        conn.execute(statement)


def database_exists(name: str) -> bool:
    import psycopg

    with psycopg.connect(with_database(server_url(), "postgres"), autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None


def start_gunicorn(port: int, workers: int, tree: Path = ROOT) -> subprocess.Popen:
    """gunicorn serving the code in `tree` (the checkout, or --previous's copy)."""
    import httpx

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--timeout",
            "120",
            "--log-level",
            "warning",
            "--no-control-socket",
        ],  # gunicorn 27's control socket is one path per user, shared by every instance
        cwd=tree,
        env=dict(os.environ, DEBUG="0"),
        start_new_session=True,
    )
    deadline = time.time() + 90
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("gunicorn exited")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/me/", timeout=2).status_code in (401, 403):
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError("gunicorn did not start")


def stop_gunicorn(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def code_of(rev: str, into: Path) -> Path:
    """The tree of commit `rev`, unpacked into `into` (git archive: the checkout is not touched)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", rev], check=True, capture_output=True, text=True
    ).stdout.strip()
    print(f"previous code: {rev} ({commit}), unpacked for its own gunicorn")
    return into


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its descendants (Linux /proc): gunicorn's master and workers."""
    ticks = os.sysconf("SC_CLK_TCK")
    parent, cpu = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / ticks
    tree, frontier = {pid}, [pid]
    while frontier:
        kids = [p for p, pp in parent.items() if pp in frontier and p not in tree]
        tree.update(kids)
        frontier = kids
    return sum(cpu.get(p, 0.0) for p in tree)


def warm_workers(port: int, workers: int, token: str, rounds: int = 5) -> None:
    """Send every worker requests before anything is measured: 2 x workers clients at once, each
    `rounds` GET /api/me/ with an annotator's token (a 200: nothing logged). A worker's first
    request can cost more than a second of CPU (whatever the code under test imports lazily: the
    previous code imports its URLconf then); with several connections waiting at once, each idle
    worker accepts one, so none is left cold."""
    import httpx

    def client() -> None:
        headers = {"Authorization": f"Token {token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as c:
            for _ in range(rounds):
                c.get("/api/me/").raise_for_status()

    threads = [threading.Thread(target=client) for _ in range(2 * workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
