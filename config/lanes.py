"""Two middleware chains in the web process: the full one, and a shorter one for API requests that
carry a token and no session.

A request to /api/ that names a token (``Authorization: Token ...``, as DRF's TokenAuthentication
reads it) and sends no session cookie can only be authenticated by its token: without a session
cookie the session middleware would find an empty session, the authentication middleware an
anonymous user, and DRF's SessionAuthentication (first in REST_FRAMEWORK's list) nothing. The
middleware that exists for sessions and pages does no work for such a request that its answer
shows, yet costs CPU on every one of them (about 0.15 ms of a token GET /api/me/'s 0.95 ms,
measured in process; bench/README.md). Those requests skip:

- WhiteNoise (it serves /static/ only);
- the session middleware, and the authentication middleware that reads the session: the request
  gets an anonymous ``request.user`` instead (``SessionlessUserMiddleware``), as a session-less
  request gets through the full chain, until DRF authenticates the token and sets it;
- CSRF: every API view is a DRF view, which is exempt from the middleware's check and enforces
  CSRF itself for a session-authenticated request; a token request is not one, and a page of
  another site cannot send an ``Authorization`` header cross-origin without the API allowing it
  (it sends no CORS headers);
- messages (the API never adds any).

Everything else stays, in the same order: the security headers and HTTPS redirect, the 503 while
PostgreSQL or Redis is down, the body and NUL checks, X-Frame-Options, the Content-Security-Policy
of the API's HTML documentation, and django-axes.

A request with a session cookie, with no token, or outside /api/ takes the full chain; so does a
browser's workbench, which calls the API with its session and a CSRF token. Tests:
tests/test_lanes.py (the same answers through both chains; CSRF still refused for sessions).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.core.handlers.wsgi import WSGIHandler

API_PREFIX = "/api/"
SKIPPED = frozenset(
    {
        "whitenoise.middleware.WhiteNoiseMiddleware",
        "django.contrib.sessions.middleware.SessionMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.auth.middleware.AuthenticationMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
    }
)
SESSIONLESS_USER = "config.lanes.SessionlessUserMiddleware"


def token_lane_middleware(middleware: list[str]) -> list[str]:
    """The full chain less SKIPPED, with SESSIONLESS_USER where the authentication middleware was."""
    out = []
    for name in middleware:
        if name == "django.contrib.auth.middleware.AuthenticationMiddleware":
            out.append(SESSIONLESS_USER)
        elif name not in SKIPPED:
            out.append(name)
    return out


class SessionlessUserMiddleware:
    """``request.user`` for a request without a session: anonymous until DRF authenticates it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.user = AnonymousUser()
        return self.get_response(request)


def takes_token_lane(environ: dict) -> bool:
    """An /api/ request naming a token (DRF's keyword, any case) and sending no session cookie."""
    if not environ.get("PATH_INFO", "").startswith(API_PREFIX):
        return False
    words = environ.get("HTTP_AUTHORIZATION", "").split(None, 1)
    if not words or words[0].lower() != "token":
        return False
    return settings.SESSION_COOKIE_NAME not in environ.get("HTTP_COOKIE", "")


class TokenLaneMixin:
    """A Django handler (WSGIHandler here, the test client's handler in tests) that builds
    token_lane_middleware's chain instead of the full one."""

    def load_middleware(self, is_async=False):
        # Django's loader reads settings.MIDDLEWARE: the lane's list while it runs (once, as the
        # process starts), the full one again afterwards.
        full = settings.MIDDLEWARE
        settings.MIDDLEWARE = token_lane_middleware(list(full))
        try:
            super().load_middleware(is_async)
        finally:
            settings.MIDDLEWARE = full


class TokenLaneHandler(TokenLaneMixin, WSGIHandler):
    """Django's WSGI handler with token_lane_middleware's chain (built once, as Django builds its own)."""


class LanedApplication:
    """The WSGI application: token requests to the API through TokenLaneHandler, the rest through
    Django's handler with the full chain."""

    def __init__(self):
        self.full = WSGIHandler()
        self.token = TokenLaneHandler()

    def __call__(self, environ, start_response):
        handler = self.token if takes_token_lane(environ) else self.full
        return handler(environ, start_response)
