"""Live Celery workers, as the workers themselves report them, per queue.

Each worker process (main process, from Celery's ``worker_ready`` signal) starts a daemon thread
that writes one Redis key per queue it consumes, ``statelab:worker:<queue>:<hostname>``, holding
its hostname, pid, concurrency and, for gpu workers, the GPU (nvidia-smi) and the model it has
loaded, every STATELAB_WORKER_HEARTBEAT_SECONDS with a TTL of STATELAB_WORKER_TTL_SECONDS. Redis
rather than a table: liveness is ephemeral, the TTL expires a dead worker's keys with no sweeper,
no database writes every few seconds per worker, and /healthz can still list workers while the
database is down. A clean shutdown deletes the keys at once; a killed worker's go after the TTL.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import threading
import time
from typing import Any

from django.conf import settings

log = logging.getLogger(__name__)

QUEUES = ("default", "api", "gpu")
PREFIX = "statelab:worker:"
MODEL_PREFIX = "statelab:worker-model:"
START_HINTS = {
    "default": "celery -A config worker -Q default --loglevel INFO",
    "api": "celery -A config worker -Q api --concurrency 8 --loglevel INFO",
    "gpu": "celery -A config worker -Q gpu --concurrency 1 --pool solo --loglevel INFO (on a GPU host with vllm)",
}


def heartbeat_seconds() -> float:
    return float(getattr(settings, "STATELAB_WORKER_HEARTBEAT_SECONDS", 10))


def ttl_seconds() -> int:
    return int(getattr(settings, "STATELAB_WORKER_TTL_SECONDS", 30))


def redis_client(url: str | None = None):
    """A client for REDIS_URL with short timeouts (health checks must answer fast), or None."""
    url = url if url is not None else getattr(settings, "REDIS_URL", "")
    if not url:
        return None
    import redis

    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


# --- reading ------------------------------------------------------------------------------------


def live_workers(client=None) -> dict[str, list[dict[str, Any]]]:
    """Queue -> the live workers consuming it (each a dict: hostname, pid, concurrency, gpu, model,
    seen_s), for the three queues and any other reported. Raises redis errors to the caller."""
    client = client or redis_client()
    found: dict[str, list[dict[str, Any]]] = {q: [] for q in QUEUES}
    if client is None:
        return found
    keys = sorted(client.scan_iter(match=PREFIX + "*", count=500))
    values = client.mget(keys) if keys else []
    now = time.time()
    for value in values:
        if not value:
            continue
        try:
            record = json.loads(value)
        except ValueError:
            continue
        record["seen_s"] = round(max(0.0, now - float(record.pop("at", now))), 1)
        found.setdefault(record.get("queue", "?"), []).append(record)
    return found


def queue_status(queue: str) -> dict[str, Any]:
    """The workers of one queue and a sentence for pages: who consumes it, or how to start one."""
    if not getattr(settings, "REDIS_URL", ""):
        return {
            "queue": queue,
            "workers": [],
            "eager": True,
            "message": "No Redis: background work runs inside the web process (demo mode).",
        }
    try:
        workers = live_workers().get(queue, [])
    except Exception as exc:
        return {
            "queue": queue,
            "workers": [],
            "eager": False,
            "message": f"Cannot reach Redis to see the {queue} queue's workers ({type(exc).__name__}).",
        }
    if not workers:
        message = (
            f"No worker is consuming the {queue} queue: start one with "
            f"`{START_HINTS.get(queue, f'celery -A config worker -Q {queue}')}`."
        )
    else:
        names = ", ".join(_describe(w) for w in workers)
        message = f"{len(workers)} worker{'s' if len(workers) != 1 else ''} on the {queue} queue: {names}."
    return {"queue": queue, "workers": workers, "eager": False, "message": message}


def _describe(worker: dict[str, Any]) -> str:
    extra = [x for x in (worker.get("model") and f"model {worker['model']}", worker.get("gpu")) if x]
    return worker.get("hostname", "?") + (f" ({'; '.join(extra)})" if extra else "")


# --- writing (inside a worker) ---------------------------------------------------------------


def gpu_name() -> str | None:
    """The GPU's name from nvidia-smi, without importing torch (no CUDA in the forking parent)."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    names = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    return ", ".join(names) or None


def report_model(hostname: str | None, model: str | None) -> None:
    """A gpu worker's process records the model its engine now holds (read by the heartbeat)."""
    client = redis_client()
    if not hostname or not model or client is None:
        return
    try:
        client.set(MODEL_PREFIX + hostname, model, ex=24 * 3600)
    except Exception:
        log.warning("could not record the loaded model", exc_info=True)


class WorkerHeartbeat:
    def __init__(self, hostname: str, queues: list[str], concurrency: int | None):
        self.hostname, self.queues, self.concurrency = hostname, queues, concurrency
        self.gpu = gpu_name() if "gpu" in queues else None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="statelab-worker-heartbeat", daemon=True)

    def start(self) -> WorkerHeartbeat:
        self.beat()
        self._thread.start()
        return self

    def beat(self) -> None:
        client = redis_client()
        if client is None:
            return
        model = None
        if "gpu" in self.queues:
            model = client.get(MODEL_PREFIX + self.hostname)
            model = model.decode() if model else None
        pipe = client.pipeline()
        for queue in self.queues:
            record = {
                "queue": queue,
                "hostname": self.hostname,
                "pid": os.getpid(),
                "concurrency": self.concurrency,
                "at": time.time(),
            }
            if queue == "gpu":
                record.update(gpu=self.gpu, model=model)
            pipe.set(f"{PREFIX}{queue}:{self.hostname}", json.dumps(record), ex=ttl_seconds())
        pipe.execute()

    def _run(self) -> None:
        while not self._stop.wait(heartbeat_seconds()):
            try:
                self.beat()
            except Exception:  # Redis away for a moment: the keys lapse, the next beat restores them
                log.warning("worker heartbeat failed", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        client = redis_client()
        if client is not None:
            try:
                client.delete(*[f"{PREFIX}{q}:{self.hostname}" for q in self.queues], MODEL_PREFIX + self.hostname)
            except Exception:
                log.warning("could not remove the worker heartbeat", exc_info=True)


_current: WorkerHeartbeat | None = None


def on_worker_ready(sender=None, **_) -> None:
    """Celery's worker_ready (sender: the consumer): start reporting this worker's queues."""
    global _current
    try:
        queues = sorted(sender.app.amqp.queues.consume_from)
        concurrency = getattr(getattr(sender, "controller", None), "concurrency", None)
        _current = WorkerHeartbeat(sender.hostname, queues, concurrency).start()
    except Exception:
        log.exception("could not start the worker heartbeat")


def on_worker_shutdown(**_) -> None:
    if _current is not None:
        _current.stop()


def connect(signals) -> None:
    signals.worker_ready.connect(on_worker_ready, weak=False)
    signals.worker_shutdown.connect(on_worker_shutdown, weak=False)
