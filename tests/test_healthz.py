"""/healthz: the database, Redis and the live workers per queue, for health checks; no sign-in.

A real worker process reports itself (config.workers) and is listed; SIGKILLed, it disappears
once its heartbeat's TTL (production value) runs out. A private redis-server on a free port,
killed, makes /healthz answer 503 without naming the server.
"""

import json
import os
import signal
import socket
import subprocess
import time

import pytest
from django.conf import settings
from django.test import Client

from tests.inference.worker import start_worker, stop_worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


HEALTH_TOKEN = "health-check-secret"


def health(query: str = "", *, token: str | None = HEALTH_TOKEN):
    """/healthz as the deployment's own health checker asks it (with the health token), or as
    anyone asks it (token=None)."""
    headers = {"HTTP_X_HEALTH_TOKEN": token} if token else {}
    response = Client().get("/healthz" + query, **headers)
    return response.status_code, response.json()


@pytest.fixture(autouse=True)
def health_token(settings):
    settings.STATELAB_HEALTH_TOKEN = HEALTH_TOKEN


def test_healthz_answers_anonymously_with_database_redis_and_queues(broker):
    status, body = health()
    assert status == 200 and body["status"] == "ok"
    assert body["database"] == {"ok": True} and body["redis"] == {"ok": True, "configured": True}
    assert body["queues"] == {q: {"workers": 0, "hostnames": []} for q in ("default", "api", "gpu")}
    status, body = health("?require=gpu")
    assert status == 503 and body["missing"] == ["gpu"]


def test_healthz_names_hosts_only_to_staff_or_the_health_token(broker, make_user):
    record = {"hostname": "spy@db-host-7", "queue": "api", "pid": 1, "at": time.time()}
    broker.set("statelab:worker:api:spy@db-host-7", json.dumps(record), ex=60)
    try:
        for token in (None, "wrong-token", ""):
            status, body = health(token=token)
            assert status == 200 and body["queues"]["api"] == {"workers": 1}, body
            assert "db-host-7" not in json.dumps(body)
        assert health(token=HEALTH_TOKEN)[1]["queues"]["api"]["hostnames"] == ["spy@db-host-7"]
        ops = make_user("ops")
        ops.is_staff = True
        ops.save()
        staff = Client()
        staff.force_login(ops)
        assert staff.get("/healthz").json()["queues"]["api"]["hostnames"] == ["spy@db-host-7"]
        researcher = Client()
        researcher.force_login(make_user("someone"))
        assert "db-host-7" not in researcher.get("/healthz").content.decode()
    finally:
        broker.delete("statelab:worker:api:spy@db-host-7")


@pytest.mark.worker
@pytest.mark.slow
def test_a_real_worker_is_listed_per_queue_and_gone_after_the_ttl_once_killed(broker, tmp_path):
    worker = start_worker("health", tmp_path / "worker.log", queues="default,api")
    try:
        body = wait_for(
            lambda: (lambda b: b if b["queues"]["api"]["workers"] else None)(health()[1]), 60, "the worker's heartbeat"
        )
        host = body["queues"]["api"]["hostnames"][0]
        assert host.startswith("health@") and body["queues"]["default"]["hostnames"] == [host]
        assert body["queues"]["gpu"]["workers"] == 0
        assert health("?require=api,default")[0] == 200 and health("?require=api,gpu")[0] == 503
        record = [k for k in broker.keys("statelab:worker:*")]
        assert sorted(k.decode() for k in record) == [f"statelab:worker:api:{host}", f"statelab:worker:default:{host}"]
        assert 0 < broker.ttl(record[0]) <= settings.STATELAB_WORKER_TTL_SECONDS

        os.killpg(worker.pid, signal.SIGKILL)  # no goodbye: its keys must expire on their own
        worker.wait(10)
        killed = time.monotonic()
        assert health()[1]["queues"]["api"]["workers"] == 1  # still listed until the TTL runs out
        wait_for(
            lambda: health()[1]["queues"]["api"]["workers"] == 0,
            settings.STATELAB_WORKER_TTL_SECONDS + 5,
            "the dead worker to drop out",
        )
        gone = time.monotonic() - killed
        print(
            f"\nkilled worker left /healthz {gone:.1f} s after the kill (TTL {settings.STATELAB_WORKER_TTL_SECONDS} s)"
        )
        assert gone <= settings.STATELAB_WORKER_TTL_SECONDS + 5
    finally:
        stop_worker(worker)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_healthz_is_503_while_redis_is_down_and_names_no_server(settings, tmp_path):
    port = free_port()
    server = subprocess.Popen(
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
        wait_for(lambda: health()[0] == 200, 10, "the private redis-server")
        server.send_signal(signal.SIGKILL)
        server.wait(5)
        response = Client().get("/healthz", HTTP_X_HEALTH_TOKEN=HEALTH_TOKEN)
        body = response.json()
        assert response.status_code == 503 and body["status"] == "unavailable"
        assert body["database"] == {"ok": True}
        assert body["redis"] == {"ok": False, "configured": True, "error": "ConnectionError"}
        anonymous = Client().get("/healthz")
        assert anonymous.status_code == 503 and anonymous.json()["redis"] == {"ok": False, "configured": True}
        assert str(port) not in response.content.decode() and "127.0.0.1" not in response.content.decode()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(5)
