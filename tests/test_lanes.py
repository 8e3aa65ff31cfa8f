"""The web process's two middleware chains (config/lanes.py), through the real WSGI application
that gunicorn serves (config.wsgi.application), not the test client's handler.

An API request with a token and no session cookie takes the short chain; everything else the full
one. The short chain must answer what the full one answers (statuses, bodies, the security
headers), and a request that carries a session must still be held to CSRF.
"""

from __future__ import annotations

import io
import json

import pytest
from django.core import signals
from django.core.cache import cache
from django.core.handlers.wsgi import WSGIHandler
from django.db import close_old_connections
from django.test import Client
from rest_framework.authtoken.models import Token

from annotation.tokens import BAD_TOKEN_KEY
from config.lanes import SKIPPED, takes_token_lane, token_lane_middleware
from tests.annotation.work_factories import make_item, valid_result

pytestmark = pytest.mark.django_db
ADDRESS = "10.30.0.1"


@pytest.fixture(scope="module")
def apps():
    from config.wsgi import application

    return {"lane": application, "full": WSGIHandler()}


@pytest.fixture(autouse=True)
def _in_the_tests_transaction():
    # As Django's test client does: a request's end must not close the test's connection.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    cache.delete(BAD_TOKEN_KEY.format(address=ADDRESS))
    yield
    cache.delete(BAD_TOKEN_KEY.format(address=ADDRESS))
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def call(app, method: str, path: str, *, body=None, token: str | None = None, cookie: str = "", headers=None):
    """(status, headers, body) of one request through `app`, as gunicorn would call it."""
    data = json.dumps(body).encode() if body is not None else b""
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": ADDRESS,
        "HTTP_HOST": "127.0.0.1",
        "wsgi.input": io.BytesIO(data),
        "wsgi.url_scheme": "http",
        "wsgi.errors": io.StringIO(),
        "CONTENT_LENGTH": str(len(data)),
        "CONTENT_TYPE": "application/json" if body is not None else "",
    }
    if token is not None:
        environ["HTTP_AUTHORIZATION"] = f"Token {token}"
    if cookie:
        environ["HTTP_COOKIE"] = cookie
    for name, value in (headers or {}).items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    started = []
    response = app(environ, lambda status, response_headers, exc_info=None: started.append((status, response_headers)))
    try:
        content = b"".join(response)
    finally:
        getattr(response, "close", lambda: None)()
    status, response_headers = started[0]
    return int(status.split()[0]), {k.lower(): v for k, v in response_headers}, content


def test_which_requests_take_the_token_lane():
    token = {"PATH_INFO": "/api/me/", "HTTP_AUTHORIZATION": "Token abc"}
    assert takes_token_lane(token)
    assert takes_token_lane({**token, "HTTP_AUTHORIZATION": "token abc"})  # DRF's keyword, any case
    assert takes_token_lane({**token, "HTTP_COOKIE": "theme=dark"})
    assert not takes_token_lane({**token, "HTTP_COOKIE": "csrftoken=x; sessionid=abc"})
    assert not takes_token_lane({**token, "HTTP_AUTHORIZATION": "Bearer abc"})
    assert not takes_token_lane({**token, "HTTP_AUTHORIZATION": ""})
    assert not takes_token_lane({"PATH_INFO": "/api/me/"})
    assert not takes_token_lane({**token, "PATH_INFO": "/projects/"})
    assert not takes_token_lane({**token, "PATH_INFO": "/apix/"})


def test_the_lane_leaves_out_only_the_session_middleware(settings):
    lane = token_lane_middleware(list(settings.MIDDLEWARE))
    assert set(settings.MIDDLEWARE) - set(lane) == SKIPPED
    assert set(lane) - set(settings.MIDDLEWARE) == {"config.lanes.SessionlessUserMiddleware"}
    kept = [m for m in settings.MIDDLEWARE if m not in SKIPPED]
    assert [m for m in lane if m in kept] == kept  # same order


def test_the_lane_answers_what_the_full_chain_answers(apps, make_user, make_project):
    annotator, stranger = make_user("ann"), make_user("stranger")
    project = make_project("boxes", "changeit", members={annotator: "annotator"}, annotations_per_item=1)
    make_item(project)
    make_item(project)
    key, other = Token.objects.create(user=annotator).key, Token.objects.create(user=stranger).key
    for path in ("/api/me/", "/api/projects/"):
        lane, full = call(apps["lane"], "GET", path, token=key), call(apps["full"], "GET", path, token=key)
        assert lane[0] == full[0] == 200
        assert json.loads(lane[2]) == json.loads(full[2])
        for header in ("x-frame-options", "x-content-type-options", "referrer-policy", "content-type"):
            assert lane[1][header] == full[1][header], header
        assert "set-cookie" not in lane[1]
    # the annotation loop through the lane, the full chain taking the second item
    for name, app in (("lane", apps["lane"]), ("full", apps["full"])):
        status, _, body = call(app, "POST", "/api/projects/boxes/tasks/next/", body={}, token=key)
        assert status == 200, (name, body)
        task = json.loads(body)
        assert "ground_truth" not in json.dumps(task["item"])
        path = f"/api/tasks/{task['task']}/"
        # someone else's task: 404 through either chain, whatever the body
        assert call(app, "PUT", path + "draft/", body={"draft": {}, "version": 0}, token=other)[0] == 404
        status, _, body = call(
            app, "PUT", path + "draft/", body={"draft": {"bbox": [1, 2, 3, 4]}, "version": 0}, token=key
        )
        assert (status, json.loads(body)["version"]) == (200, 1), body
        # a stale version: 409, as ever
        assert call(app, "PUT", path + "draft/", body={"draft": {}, "version": 0}, token=key)[0] == 409
        result = valid_result("box")
        status, headers, body = call(
            app, "POST", path + "submit/", body={"result": result}, token=key, headers={"Idempotency-Key": name}
        )
        assert status == 201, body
        assert headers["content-type"] == "application/json"
        # the task endpoints answer JSON whatever Accept asks for
        status, headers, _ = call(
            app, "POST", path + "submit/", body={"result": result}, token=key,
            headers={"Idempotency-Key": name, "Accept": "text/html"},
        )  # fmt: skip
        assert (status, headers["content-type"]) == (200, "application/json")
    status, _, body = call(apps["lane"], "POST", "/api/projects/boxes/tasks/next/", body={}, token=key)
    assert status == 204, body


def test_a_wrong_token_through_the_lane_is_refused_and_counted(apps, make_user):
    good = Token.objects.create(user=make_user("u")).key
    for i in range(20):
        status, headers, body = call(apps["lane"], "GET", "/api/me/", token=f"guess{i}")
        assert (status, json.loads(body)) == (401, {"detail": "Invalid token."})
        assert headers["www-authenticate"] == "Token"
    assert call(apps["lane"], "GET", "/api/me/", token="guess-21")[0] == 429
    assert call(apps["lane"], "GET", "/api/me/", token=good)[0] == 429  # a right token waits too


def test_a_session_is_held_to_csrf_with_or_without_a_token(apps, make_user, make_project):
    user = make_user("researcher")
    make_project("mine", "status", members={user: "researcher"})
    browser = Client()
    browser.force_login(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    key = Token.objects.create(user=user).key
    for token in (None, key):
        status, _, body = call(
            apps["lane"], "POST", "/api/projects/mine/releases/", body={"version": "v9"}, token=token, cookie=cookie
        )
        assert status == 403 and "CSRF" in json.loads(body)["detail"], (token, body)
    assert call(apps["lane"], "GET", "/api/me/", cookie=cookie)[0] == 200  # the session itself is read
    # a page is never served by the lane: no session, no page
    assert call(apps["lane"], "GET", "/", token=key)[0] == 302


def test_every_view_under_api_is_a_drf_view():
    """The lane's reasoning about CSRF (config/lanes.py) holds for DRF views: a view added under
    /api/ that is not one must be thought about first."""
    from django.urls import URLPattern, URLResolver, get_resolver
    from rest_framework.views import APIView

    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                yield prefix + str(p.pattern), p.callback

    api = [(route, view) for route, view in walk(get_resolver().url_patterns) if route.startswith("api/")]
    assert len(api) > 40
    not_drf = [route for route, view in api if not issubclass(getattr(view, "cls", object), APIView)]
    assert not not_drf, not_drf


def test_the_permission_matrix_token_clients_take_the_lane(make_user):
    """tests/test_permission_matrix.py sends its token requests through tests.helpers.lanes, so the
    whole matrix runs through the lane: the helper must really route them there."""
    from tests.helpers.lanes import through_lanes

    user = make_user("u")
    token = through_lanes(Client(headers={"Authorization": f"Token {Token.objects.create(user=user).key}"}))
    assert token.handler.lane._middleware_chain is None  # built on the first request it serves
    assert token.get("/api/me/").status_code == 200
    assert token.handler.lane._middleware_chain is not None
    assert token.handler._middleware_chain is None  # the full chain served nothing
    session = through_lanes(Client())
    session.force_login(user)
    assert session.get("/api/me/").status_code == 200
    assert session.handler.lane._middleware_chain is None
