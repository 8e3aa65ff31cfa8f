"""503 Service Unavailable, not 500, while PostgreSQL or Redis cannot be reached.

When the database or Redis is down (restarted, failing over, out of connections) a request fails
with a connection error. That is the operator's problem, not a bug in the request: the client is
told to come back (503 with Retry-After), as JSON under /api/ and as a short plain page elsewhere.
Nothing is half-written: every write path is one transaction, so a request that failed here
committed nothing, or committed everything and the client's retry of the same request (the same
Idempotency-Key for a submit) returns what was stored.

Django reconnects on its own once the server is back: a connection that raised such an error is
closed at the end of its request (CONN_MAX_AGE's usability check), the next request opens a new
one; and a persistent connection that a restart broke while it sat idle is found by the health
check (CONN_HEALTH_CHECKS, also run by annotation/db.py's statements) before the first query of the
next request and replaced, so a request sent once the server is back never gets this 503. No
restart of the web processes is needed.

Two entry points, one answer:
- `ServiceUnavailableMiddleware.process_exception` for errors raised by a view (DRF re-raises
  anything that is not an API exception, so API views land here too);
- `server_error` (config.urls handler500) for the rare error raised outside a view, in another
  middleware (a session saved after the view), which Django turns into a 500 before any outer
  middleware could see it. It answers 503 when the error being handled is one of these, and
  Django's own 500 otherwise.
"""

from __future__ import annotations

import logging
import sys

from django.db import InterfaceError as DjangoInterfaceError
from django.db import OperationalError as DjangoOperationalError
from django.http import HttpResponse, JsonResponse
from django.views import defaults

logger = logging.getLogger("statelab.unavailable")

RETRY_AFTER_SECONDS = 5
API_PREFIX = "/api/"


def _unavailable_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [DjangoOperationalError, DjangoInterfaceError]
    try:  # psycopg's own, should one escape Django's wrapper (raw connections)
        import psycopg

        types += [psycopg.OperationalError, psycopg.InterfaceError]
    except ImportError:  # pragma: no cover - psycopg is a dependency
        pass
    try:  # the cache (leaderboards) and anything else talking to Redis directly
        import redis

        types += [redis.exceptions.ConnectionError, redis.exceptions.TimeoutError]
    except ImportError:  # pragma: no cover
        pass
    try:  # Celery cannot publish to the broker
        import kombu.exceptions

        types.append(kombu.exceptions.OperationalError)
    except ImportError:  # pragma: no cover
        pass
    return tuple(types)


UNAVAILABLE = _unavailable_types()


def which_service(exc: BaseException) -> str:
    module = type(exc).__module__
    if module.startswith(("redis", "kombu")):
        return "redis"
    return "database"


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>StateLab is briefly unavailable</title></head>
<body><h1>StateLab is briefly unavailable</h1>
<p>The {service} cannot be reached right now. Nothing you saved before this message is lost.
Please try again in a few seconds.</p></body></html>
"""


def unavailable_response(request, exc: BaseException) -> HttpResponse:
    service = which_service(exc)
    logger.warning(
        "503 for %s %s: %s unavailable: %s",
        request.method,
        request.path,
        service,
        str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
    )
    if request.path.startswith(API_PREFIX):
        response = JsonResponse(
            {
                "detail": f"Service temporarily unavailable ({service}); please retry.",
                "retry_after": RETRY_AFTER_SECONDS,
            },
            status=503,
        )
    else:
        response = HttpResponse(PAGE.format(service=service), status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    return response


class ServiceUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, UNAVAILABLE):
            return unavailable_response(request, exception)
        return None


def server_error(request, template_name: str = defaults.ERROR_500_TEMPLATE_NAME):
    """handler500: 503 when the error being handled is an unavailable database or Redis."""
    exc = sys.exc_info()[1]
    if exc is not None and isinstance(exc, UNAVAILABLE):
        return unavailable_response(request, exc)
    return defaults.server_error(request, template_name)
