"""Start, stop and restart private server processes on free ports.

- PrivatePostgres: Debian's PostgreSQL binaries (initdb, pg_ctl) on 127.0.0.1:<port>, data in a
  temporary directory, trust authentication; run as the `postgres` user when we are root
  (initdb refuses root). Default server settings: nothing switched off.
- PrivateRedis: redis-server on 127.0.0.1:<port>, without persistence or with the append-only
  file as docker-compose.yml runs it (appendonly=True); stopped by SIGKILL, as a crash would.
- Gunicorn: StateLab as docker-compose.yml serves it (sync workers, --timeout 120), DEBUG=0; with
  an access log naming the worker process of each request when asked for one.
- CeleryWorker: a worker on every queue with the production settings (the visibility timeout
  left at its default).
Each takes its configuration from `stack_env`, so all processes share one private world.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl:
        return Path(pg_ctl).parent
    raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) not found")


class PrivatePostgres:
    def __init__(self):
        self.port = free_port()
        self.bin = pg_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="statelab-faults-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(self.bin / args[0]), *args[1:]]
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=120)

    def url(self, db: str = "statelab") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{db}"

    def init(self) -> PrivatePostgres:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8")
        self.start()
        self._run("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-qc", "CREATE DATABASE statelab")
        return self

    def start(self) -> None:
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            "60",
            "-o",
            f"-p {self.port} -h 127.0.0.1 -k {self.dir}",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def is_up(self) -> bool:
        return self._run("pg_isready", "-q", "-h", "127.0.0.1", "-p", str(self.port), check=False).returncode == 0

    def destroy(self) -> None:
        if self.data.exists() and (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)


class PrivateRedis:
    """appendonly=False: no persistence at all (a restart starts empty); True: the AOF as
    docker-compose.yml runs Redis (fsync every second), reloaded when it starts again."""

    def __init__(self, appendonly: bool = False):
        self.port = free_port()
        self.appendonly = appendonly
        self.dir = Path(tempfile.mkdtemp(prefix="statelab-faults-redis-"))
        self.proc: subprocess.Popen | None = None

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "yes" if self.appendonly else "no",
                "--dir",
                str(self.dir),
                "--logfile",
                str(self.dir / "redis.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_until(self.is_up, 20, "the private Redis to answer")

    def is_up(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """Gone at once, as a crashed or restarted server is (SIGKILL of our own process)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        wait_until(lambda: not self.is_up(), 10, "the private Redis to go away")

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def stack_env(pg: PrivatePostgres, rd: PrivateRedis, workdir: Path) -> dict[str, str]:
    """The environment of every StateLab process of the private stack: production settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("STATELAB_", "CELERY_", "DJANGO_", "PYTEST", "SECURE_"))
    }
    env.update(
        DATABASE_URL=pg.url(),
        REDIS_URL=rd.url(),
        SECRET_KEY="faults-test-secret-key-not-for-production-0123456789",
        DEBUG="0",
        ALLOWED_HOSTS="127.0.0.1,localhost",
        MEDIA_ROOT=str(workdir / "media"),
        STATELAB_CACHE_ROOT=str(workdir / "cache"),
        STATELAB_DATA_DIR=str(workdir / "var"),
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    return env


def manage(env: dict[str, str], *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def python_module(env: dict[str, str], module: str, *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode:
        raise RuntimeError(f"python -m {module} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


class Gunicorn:
    """StateLab under gunicorn, as docker-compose.yml runs it (sync workers, --timeout 120)."""

    ACCESS_FORMAT = "%(p)s %(s)s %(U)s %(q)s"  # "<worker pid> status path query", one line a request

    def __init__(self, env: dict[str, str], log: Path, workers: int = 4, access_log: Path | None = None):
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.workers = workers
        self.access_log = access_log
        access = ["--access-logfile", str(access_log), "--access-logformat", self.ACCESS_FORMAT] if access_log else []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "config.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(workers),
                "--timeout",
                "120",
                *access,
                "--no-control-socket",
            ],  # gunicorn 27's default socket is one path per user, shared by every instance
            cwd=ROOT,
            env=env,
            stdout=open(log, "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.log = log

        def answering() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited:\n{log.read_text()[-3000:]}")
            try:
                return httpx.get(f"{self.base_url}/api/me/", timeout=2).status_code in (401, 403)
            except httpx.HTTPError:
                return False

        try:
            wait_until(answering, 90, "gunicorn to answer", interval=0.3)
        except BaseException:
            self.stop()  # never leave a half-started server behind
            raise

    def served(self) -> dict[str, tuple[int, int]]:
        """From the access log: query string -> (worker pid, status) of each request logged so far."""
        found = {}
        for line in self.access_log.read_text().splitlines() if self.access_log else ():
            pid, status, _path, query = (line.split(" ", 3) + [""])[:4]
            if pid.startswith("<") and status.isdigit():
                found[query] = (int(pid.strip("<>")), int(status))
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the workers exit at once; the master may linger
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


class CeleryWorker:
    """A worker on the default, api and gpu queues with the production settings."""

    def __init__(self, env: dict[str, str], log: Path, name: str = "faults"):
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "worker",
                "-Q",
                "default,api,gpu",
                "--pool",
                "prefork",
                "-c",
                "1",
                "-n",
                f"{name}@%h",
                "--without-gossip",
                "--without-mingle",
                "--loglevel",
                "INFO",
            ],
            cwd=ROOT,
            env=env,
            stdout=open(log, "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.log = log

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


class CeleryBeat:
    """Celery beat with the production schedule (the lease expiry and the runs watchdog)."""

    def __init__(self, env: dict[str, str], workdir: Path):
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "config",
                "beat",
                "--loglevel",
                "INFO",
                "--schedule",
                str(workdir / "celerybeat-schedule"),
            ],
            cwd=ROOT,
            env=env,
            stdout=open(workdir / "beat.log", "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
