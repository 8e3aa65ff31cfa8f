"""Who may do what, for every URL pattern: a permission matrix generated from the URL configuration.

`ROUTES` has one entry per named URL pattern (the admin is one class, `ADMIN_NAMESPACE`): how to
fill its arguments from a seeded world, which methods to try, who is let in, and what a person
who is let in gets. The walk over `get_resolver()` fails, naming the pattern, when a pattern has no
entry (or an entry no pattern): a new route cannot ship without saying who may use it. The table
is tests/helpers/permission_routes.py (a new route's entry goes there), its rules and identities
tests/helpers/permission_rules.py, the seeded world tests/helpers/permission_world.py.

Identities: anonymous, a signed-in non-member, the project's annotator / reviewer / researcher /
admin member, a superuser, a researcher of another project, and two crowd accounts of one platform
id: one from a study of the project, one from a study of the other project (each also holds a
researcher membership row of the project it is not in, as an attack before the fix left them: the
rows give nothing); each through a session and (API routes) through a token; pages asked with only
a token must treat the caller as anonymous. The expected status follows from the entry's rule:
- anonymous: a page redirects to the login page, the API answers 401 or 403 (a bad token: 401);
- not a member of the project (researchers of another project included): 404;
- a member below the role: 403;
- let in: the entry's status for that method (2xx, or the 400 / 409 of data refused after the
  permission check, or 405 for a method the route does not serve).
Every mutating request is sent with data that is refused after the permission check, so no
identity changes anything: the domain tables are fingerprinted before and after each one.

One test builds the world once and collects every mismatch, so a broken rule is reported with
all the places it breaks.
"""

from __future__ import annotations

import hashlib
import json

import pytest
from django.apps import apps
from django.contrib import admin
from django.db import connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from annotation.models import Annotation, ImportRun, Item, MediaAsset, Membership, Project
from inference.models import InferenceJob
from tests.helpers.lanes import through_lanes
from tests.helpers.permission_routes import ROUTES
from tests.helpers.permission_rules import (
    ADMIN,
    ANON,
    IDENTITIES,
    LOGIN,
    OTHER,
    RESEARCHER,
    SESSION,
    SUPERUSER,
    TOKEN,
    Rule,
    Try,
)
from tests.helpers.permission_world import World, build_world

# (The marker also makes pytest-django set up the test database the module's world is built in.)
pytestmark = pytest.mark.django_db

# ---------------------------------------------------------------------------------------------
# The URL configuration, walked

ADMIN_NAMESPACE = "admin"  # the admin site is one class (test_admin_pages_follow_the_admin_sites_rule)


def url_patterns(patterns=None, prefix: str = "", namespace: str | None = None):
    """(key, route) for every pattern: the namespaced name, or the route when unnamed."""
    for p in get_resolver().url_patterns if patterns is None else patterns:
        if isinstance(p, URLResolver):
            ns = ":".join(x for x in (namespace, p.namespace) if x) or None
            yield from url_patterns(p.url_patterns, prefix + str(p.pattern), ns)
        elif isinstance(p, URLPattern):
            route = prefix + str(p.pattern)
            key = f"{namespace}:{p.name}" if namespace and p.name else (p.name or route)
            yield key, route, namespace


def test_every_url_pattern_has_an_entry():
    found = {key: route for key, route, ns in url_patterns() if ns != ADMIN_NAMESPACE}
    missing = sorted(f"{key} ({route})" for key, route in found.items() if key not in ROUTES)
    assert not missing, (
        "URL patterns without an entry in tests/helpers/permission_routes.py ROUTES (say who may use them): "
        + ", ".join(missing)
    )
    stale = sorted(set(ROUTES) - set(found))
    assert not stale, f"ROUTES entries for patterns that no longer exist: {', '.join(stale)}"
    admin_routes = [route for key, route, ns in url_patterns() if ns == ADMIN_NAMESPACE]
    assert admin_routes and all(route.startswith("admin/") for route in admin_routes)


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory):
    """The world, built once for the module inside a transaction that is rolled back at its end
    (each test's own transaction nests inside it as a savepoint)."""
    from django.db import transaction

    media_root = tmp_path_factory.mktemp("matrix-media")
    with django_db_blocker.unblock():
        with transaction.atomic():
            yield build_world(media_root)
            transaction.set_rollback(True)


@pytest.fixture
def clients(world, settings):
    settings.MEDIA_ROOT = world.media_root
    return {(who, mode): client_as(world, who, mode) for who in IDENTITIES for mode in (SESSION, TOKEN)}


# ---------------------------------------------------------------------------------------------
# Requests and checks

DOMAIN_APPS = ("annotation", "inference", "evaluation", "authtoken", "auth")


def fingerprint() -> str:
    """One digest of every row of the domain tables: equal before and after means nothing changed."""
    return hashlib.sha256(repr(table_digests()).encode()).hexdigest()


def table_digests() -> list[tuple[str, str]]:
    """(table, digest of its rows) for every domain table, to name the tables a request changed."""
    tables = sorted(
        {
            m._meta.db_table
            for label in DOMAIN_APPS
            for m in apps.get_app_config(label).get_models()
            if m._meta.managed and not m._meta.proxy
        }
    )
    sql = " UNION ALL ".join(
        f"SELECT '{t}', md5(coalesce(string_agg(x::text, '|' ORDER BY x::text), '')) || ' rows=' || count(*) "
        f"FROM {connection.ops.quote_name(t)} x"
        for t in tables
    )
    with connection.cursor() as cur:
        # UNION ALL promises no order (a parallel append returns its branches as they finish):
        # sorted here, or two runs of the same rows would pair one table's digest with another's.
        cur.execute(sql)
        return sorted(cur.fetchall())


def other_sessions() -> list[str]:
    """The other connections to this database at this moment (a writer outside the requests)."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT pid, application_name, client_addr, state, left(query, 160) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return [" ".join(str(c) for c in row) for row in cur.fetchall()]


def client_as(w: World, who: str, mode: str) -> Client:
    # 5xx come back as responses (and show up as mismatches) instead of aborting the walk.
    if mode == TOKEN:
        # Served as gunicorn serves them: API requests with a token take the token lane (config/lanes.py).
        return through_lanes(
            Client(
                raise_request_exception=False,
                headers={"Authorization": f"Token {w.tokens[who]}"} if who != ANON else {},
            )
        )
    client = Client(raise_request_exception=False)
    if who != ANON:
        client.force_login(w.users[who])
    return client


def send(client: Client, attempt: Try, url: str, kind: str):
    if attempt.method == "GET":
        return client.get(url)
    if attempt.multipart or (kind != "api" and attempt.method == "POST"):
        return client.post(url, attempt.data)
    return client.generic(attempt.method, url, json.dumps(attempt.data), content_type="application/json")


def expected(kind: str, mode: str, who: str, rule: Rule, ok: frozenset):
    """The set of acceptable statuses, or "login" for a redirect to the login page."""
    if kind == "public":
        return ok
    if who == ANON or (kind == "page" and mode == TOKEN):  # a page asked with only a token: anonymous
        return "login" if kind == "page" else frozenset({401, 403})
    outcome = rule(who)
    return ok if outcome == "ok" else frozenset({outcome})


def check(response, want) -> bool:
    if want == "login":
        return response.status_code == 302 and response["Location"].startswith(LOGIN)
    return response.status_code in want


def describe(response) -> str:
    if response.status_code in (301, 302):
        return f"{response.status_code} -> {response['Location']}"
    return str(response.status_code)


def routes_in_use() -> dict[str, str]:
    return {key: route for key, route, ns in url_patterns() if ns != ADMIN_NAMESPACE}


def test_permission_matrix(world, clients):
    """Every route x method x identity x (session, token) gets the status its entry names, and no
    mutating request changes any row."""
    present = routes_in_use()
    mismatches, changed, asked = [], [], 0
    for key, entry in ROUTES.items():
        if key not in present:
            continue  # reported by test_every_url_pattern_has_an_entry
        for case in entry.cases:
            url = reverse(key, kwargs=case.kwargs(world))
            for attempt in case.tries:
                full = url + (f"?{attempt.query}" if attempt.query else "")
                label = f"{key}{f' [{case.label}]' if case.label else ''} {attempt.method} {full}"
                before = table_digests() if attempt.method != "GET" else None
                for who in IDENTITIES:
                    for mode in (SESSION, TOKEN):
                        want = expected(entry.kind, mode, who, attempt.rule or case.rule, attempt.ok)
                        response = send(clients[(who, mode)], attempt, full, entry.kind)
                        asked += 1
                        if not check(response, want):
                            mismatches.append(
                                f"{label} as {who} ({mode}): got {describe(response)}, expected "
                                f"{want if want == 'login' else sorted(want)}"
                            )
                after = table_digests() if before is not None else None
                if after != before:
                    tables = sorted(
                        f"{t} ({d.split(' ')[-1]} -> {e.split(' ')[-1]})"
                        for (t, d), (_, e) in zip(before, after, strict=True)
                        if d != e
                    )
                    changed.append(f"{label}: {', '.join(tables)}; other sessions: {other_sessions()}")
    assert asked > 1000
    assert not mismatches, f"{len(mismatches)} of {asked} requests broke the matrix:\n" + "\n".join(mismatches)
    assert not changed, "refused or no-op requests changed rows:\n" + "\n".join(changed)


def test_a_wrong_token_is_refused_not_anonymous(world):
    """A token that is not one is refused on every API route ("Invalid token."), never treated
    as an anonymous caller. (DRF answers 403 rather than 401 as the session comes first.) Each
    request from its own address: wrong tokens are counted per address, past a limit 429."""
    present = routes_in_use()
    wrong_ones = []
    for n, (key, entry) in enumerate(ROUTES.items()):
        if entry.kind == "api" and key in present:
            url = reverse(key, kwargs=entry.cases[0].kwargs(world))
            client = Client(
                raise_request_exception=False,
                REMOTE_ADDR=f"198.51.100.{n + 1}",
                headers={"Authorization": "Token " + "0" * 40},
            )
            response = client.get(url)
            if response.status_code not in (401, 403) or response.json() != {"detail": "Invalid token."}:
                wrong_ones.append(f"{key} GET {url}: {response.status_code} {response.content[:200]!r}")
    assert not wrong_ones, "\n".join(wrong_ones)


def test_session_writes_need_the_csrf_token(world, settings):
    """The matrix's session clients skip CSRF (as Django's test client does); a browser session
    without the token is refused and nothing is written."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.users[RESEARCHER])
    before = fingerprint()
    api_post = client.post(
        "/api/projects/mine/releases/", json.dumps({"version": "v9"}), content_type="application/json"
    )
    page_post = client.post("/projects/mine/releases/", {"version": "v9"})
    assert (api_post.status_code, page_post.status_code) == (403, 403)
    assert "CSRF" in api_post.json()["detail"]
    assert fingerprint() == before


# ---------------------------------------------------------------------------------------------
# The admin, as a class: every admin pattern is served by the admin site, whose rule is its own
# (staff, and the researchers / admins of any project for their projects' rows). Tried on its
# index and on every registered model's list and the change page of a seeded row.

ADMIN_LOGIN = "/admin/login/?next="
ADMIN_INSIDE = (RESEARCHER, ADMIN, OTHER, SUPERUSER)  # researcher or admin somewhere (or superuser)
SUPERUSER_ONLY_MODELS = ("auth.user", "auth.group", "authtoken.tokenproxy")


def admin_pages(w: World) -> list[tuple[str, object, object]]:
    """(url, model admin, row) for the index and each registered model's list and change page."""
    seeded = {
        Project: w.mine,
        Item: w.annotated,
        MediaAsset: w.asset,
        ImportRun: w.run,
        InferenceJob: w.finished_job,
        Annotation: w.annotation,
        Membership: Membership.objects.filter(project=w.mine).first(),
    }
    pages = [("/admin/", None, None)]
    for model, model_admin in admin.site._registry.items():
        base = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        pages.append((base, model_admin, None))
        row = seeded.get(model) or model._default_manager.order_by("pk").first()
        if row is not None:
            pages.append((f"{base}{row.pk}/change/", model_admin, row))
    return pages


RELATIONS_TO_PROJECT = ("item", "annotation", "release", "job", "study", "participant")


def project_id_of(row, depth: int = 0) -> int | None:
    """The project a row belongs to, directly or through its item, annotation, release, job, study
    or participant (an invite, an audit event, a prediction, an excluded annotation, ...)."""
    if row is None or depth > 3:
        return None
    if isinstance(row, Project):
        return row.pk
    if getattr(row, "project_id", None) is not None:
        return row.project_id
    forward = {f.name for f in row._meta.concrete_fields}
    for name in RELATIONS_TO_PROJECT:
        if name in forward and (found := project_id_of(getattr(row, name), depth + 1)) is not None:
            return found
    return None


def belongs_to_mine(w: World, row) -> bool:
    """A row of a project the other researcher is not in (mine, or its video twin)."""
    return project_id_of(row) in (w.mine.pk, w.osc.pk)


def test_admin_pages_follow_the_admin_sites_rule(world, clients):
    pages = admin_pages(world)
    wrong_ones = []
    for url, model_admin, row in pages:
        label = model_admin.model._meta.label_lower if model_admin else "index"
        for (who, mode), client in clients.items():
            if mode == TOKEN and who != SUPERUSER:
                continue  # one token is enough to show that tokens never open the admin
            response = client.get(url)
            status, where = response.status_code, response.get("Location", "")
            if mode == TOKEN or who not in ADMIN_INSIDE:
                ok = status == 302 and where.startswith(ADMIN_LOGIN)  # tokens never open the admin
            elif who == SUPERUSER:
                ok = status == 200
            elif label in SUPERUSER_ONLY_MODELS:
                ok = status == 403
            elif who == OTHER and belongs_to_mine(world, row):
                ok = status in (302, 403, 404) and not where.startswith(ADMIN_LOGIN)  # another project's row
            else:
                ok = status in (200, 302, 403) and status < 500 and not where.startswith(ADMIN_LOGIN)
            if not ok:
                wrong_ones.append(f"GET {url} ({label}) as {who} ({mode}): got {describe(response)}")
    assert len(pages) > 20
    assert not wrong_ones, f"{len(wrong_ones)} admin requests broke the rule:\n" + "\n".join(wrong_ones)
