"""/healthz: is this StateLab up? For compose health checks and load balancers; no sign-in.

JSON: the database and Redis (each ok, or the error's class name: never a host, a password or a
message that could carry them), and the live workers of each queue (hostnames and counts, as the
workers report them: config.workers). 200 when the database and Redis answer (Redis is not
needed in the demo, which runs without it), else 503. Workers are reported, not required; a
caller that needs some queue served says so: ``/healthz?require=gpu`` (or ``require=api,gpu``)
answers 503 while one of them has no live worker.

Who asks decides how much is said: anyone gets the verdict, whether the database and Redis are up,
and the number of live workers per queue; host names and error classes only go to a signed-in
staff user or a caller that sends the deployment's health token (setting STATELAB_HEALTH_TOKEN,
header ``X-Health-Token``), since they map the deployment for an attacker.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from config import workers


def _database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        connection.close()  # a broken connection is not reused by the next check
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True}


def _redis_and_workers() -> tuple[dict, dict]:
    client = workers.redis_client()
    if client is None:
        return {"ok": True, "configured": False}, {}
    try:
        client.ping()
        live = workers.live_workers(client)
    except Exception as exc:
        return {"ok": False, "configured": True, "error": type(exc).__name__}, {}
    finally:
        client.close()
    return {"ok": True, "configured": True}, live


def _may_see_details(request) -> bool:
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated and user.is_active and user.is_staff:
        return True
    expected = getattr(settings, "STATELAB_HEALTH_TOKEN", "")
    given = request.headers.get("X-Health-Token", "")
    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())


def _without_details(part: dict) -> dict:
    return {key: value for key, value in part.items() if key != "error"}


@never_cache
@require_safe
def healthz(request):
    database = _database()
    redis_state, live = _redis_and_workers()
    queues = {
        queue: {"workers": len(found), "hostnames": sorted(w.get("hostname", "?") for w in found)}
        for queue, found in live.items()
    }
    required = [q.strip() for q in request.GET.get("require", "").split(",") if q.strip()]
    missing = [q for q in required if not queues.get(q, {}).get("workers")]
    ok = database["ok"] and redis_state["ok"] and not missing
    body = {
        "status": "ok" if ok else "unavailable",
        "database": database,
        "redis": redis_state,
        "queues": queues,
        "eager": not getattr(settings, "REDIS_URL", ""),
    }
    if required:
        body["required"] = required
        body["missing"] = missing
    if not _may_see_details(request):
        body["database"] = _without_details(database)
        body["redis"] = _without_details(redis_state)
        body["queues"] = {queue: {"workers": found["workers"]} for queue, found in queues.items()}
    return JsonResponse(body, status=200 if ok else 503)
