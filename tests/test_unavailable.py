"""config/unavailable.py: a database or Redis that cannot be reached gives 503 + Retry-After, never
500 (JSON under /api/, a short page elsewhere); any other error stays a 500. The same under real
outages, with gunicorn and private servers: tests/test_faults.py."""

import pytest
import redis
from django.db import InterfaceError, OperationalError
from django.test import RequestFactory

from config import unavailable


@pytest.fixture
def client_500(client):
    client.raise_request_exception = False  # what a browser gets, not the exception
    return client


def test_api_view_that_loses_the_database_answers_503_json(client_500, make_user, monkeypatch):
    # given a signed-in user and a view whose query meets a dropped connection
    client_500.force_login(make_user("ann"))
    from annotation.apis import projects

    def lost(self, request):
        raise OperationalError("terminating connection due to administrator command")

    monkeypatch.setattr(projects.MeApi, "get", lost)
    # when
    r = client_500.get("/api/me/")
    # then
    assert r.status_code == 503
    assert r["Retry-After"] == "5" and r["Cache-Control"] == "no-store"
    assert r.json() == {"detail": "Service temporarily unavailable (database); please retry.", "retry_after": 5}


def test_page_that_loses_redis_answers_a_short_503_page(client_500, make_user, monkeypatch):
    client_500.force_login(make_user("ann"))
    from annotation.views import home

    def lost(request):
        raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(home, "render", lambda *a, **k: lost(None))
    r = client_500.get("/")
    assert r.status_code == 503 and r["Retry-After"] == "5"
    assert r["Content-Type"].startswith("text/html")
    assert b"briefly unavailable" in r.content and b"redis" in r.content


def test_other_errors_stay_500(client_500, make_user, monkeypatch):
    client_500.force_login(make_user("ann"))
    from annotation.apis import projects

    monkeypatch.setattr(projects.MeApi, "get", lambda self, request: 1 / 0)
    assert client_500.get("/api/me/").status_code == 500


@pytest.mark.parametrize(
    "exc, status",
    [
        (InterfaceError("connection already closed"), 503),
        (redis.exceptions.TimeoutError("Timeout reading"), 503),
        (ValueError("a bug"), 500),
    ],
)
def test_handler500_answers_503_for_an_outage_raised_outside_a_view(exc, status):
    # An error in another middleware (a session saved after the view) never reaches
    # process_exception; Django hands it to handler500 while it is being handled.
    request = RequestFactory().post("/api/tasks/1/submit/")
    try:
        raise exc
    except Exception:
        response = unavailable.server_error(request)
    assert response.status_code == status


UNREACHABLE_REDIS = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}
}  # nothing listens on port 1


def test_tokens_work_while_the_cache_is_unreachable(client, make_user, settings):
    # given the bad-token counter's cache (Redis) down
    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=make_user("ann")).key
    settings.CACHES = UNREACHABLE_REDIS
    # when an annotator calls the API with their token, then it answers as usual (the annotation
    # flow needs nothing else from Redis), and a wrong token is still refused with 401
    r = client.get("/api/me/", HTTP_AUTHORIZATION=f"Token {token}")
    assert (r.status_code, r.json()["username"]) == (200, "ann")
    assert client.get("/api/me/", HTTP_AUTHORIZATION="Token " + "0" * 40).status_code == 401
