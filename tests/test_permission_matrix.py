"""Who may do what, for every URL pattern: a permission matrix generated from the URL configuration.

`ROUTES` below has one entry per named URL pattern (the admin is one class, `ADMIN_URLS`): how to
fill its arguments from a seeded world, which methods to try, who is let in, and what a person
who is let in gets. The walk over `get_resolver()` fails, naming the pattern, when a pattern has no
entry (or an entry no pattern): a new route cannot ship without saying who may use it.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from django.apps import apps
from django.contrib import admin
from django.db import connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token

from annotation.models import (
    Annotation,
    ImportRun,
    Item,
    ItemStatus,
    MediaAsset,
    Membership,
    Project,
    ProjectAsset,
    ProjectInvite,
    Role,
    Task,
    TaskStatus,
)
from inference.models import InferenceJob, JobStatus
from tests.helpers.lanes import through_lanes

# (The marker also makes pytest-django set up the test database the module's world is built in.)
pytestmark = pytest.mark.django_db

# ---------------------------------------------------------------------------------------------
# Identities

SESSION, TOKEN = "session", "token"
ANON, STRANGER, ANNOTATOR, REVIEWER, RESEARCHER, ADMIN, SUPERUSER, OTHER = (
    "anonymous",
    "non-member",
    "annotator",
    "reviewer",
    "researcher",
    "admin",
    "superuser",
    "other-researcher",
)
# Crowd accounts (annotation/studies/): an annotator of their own study's project and nothing else.
CROWD, CROWD_ELSEWHERE = "crowd", "crowd-of-other-project"
IDENTITIES = (ANON, STRANGER, ANNOTATOR, REVIEWER, RESEARCHER, ADMIN, SUPERUSER, OTHER, CROWD, CROWD_ELSEWHERE)
CROWD_PID = "5f0c1d2e3f4a5b6c7d8e9f00"  # the same Prolific id in both studies: two accounts
MEMBER_ROLE = {ANNOTATOR: Role.ANNOTATOR, REVIEWER: Role.REVIEWER, RESEARCHER: Role.RESEARCHER, ADMIN: Role.ADMIN}
RANK = {Role.ANNOTATOR: 0, Role.REVIEWER: 1, Role.RESEARCHER: 2, Role.ADMIN: 3}
LOGIN = "/accounts/login/?next="

# ---------------------------------------------------------------------------------------------
# Who is let in (a rule answers "ok", 403 or 404 for a signed-in identity)

Rule = Callable[[str], object]


def member(role: str, *, crowd_study_here: bool = True) -> Rule:
    """Project-scoped: non-members 404, members below `role` 403; superusers act as admin. The crowd
    account is an annotator of the project its study is in (`mine`), of no other project."""

    def rule(who: str):
        if who == SUPERUSER:
            return "ok"
        if who == CROWD:  # an annotator of its study's project, whatever else its rows say
            if not crowd_study_here:
                return 404
            return "ok" if role == Role.ANNOTATOR else 403
        if who not in MEMBER_ROLE:
            return 404
        return "ok" if RANK[MEMBER_ROLE[who]] >= RANK[role] else 403

    return rule


def own_task(who: str):
    """A task is reachable only by the annotator who holds it; anyone else (superusers too): 404."""
    return "ok" if who == ANNOTATOR else 404


def signed_in(who: str):
    return "ok"


def researcher_anywhere(who: str):
    """The shared upload area: researchers (or admins) of any project; other signed-in users 403."""
    return "ok" if who in (RESEARCHER, ADMIN, SUPERUSER, OTHER) else 403


def superuser_only(who: str):
    return "ok" if who == SUPERUSER else 404


# ---------------------------------------------------------------------------------------------
# The table


@dataclass(frozen=True)
class Try:
    method: str
    ok: frozenset  # what an identity that is let in gets
    data: object = None  # body (JSON for the API, form fields for pages)
    rule: Rule | None = None  # overrides the case's rule (a wrong method: any signed-in user gets 405)
    query: str = ""
    multipart: bool = False  # an upload endpoint: the body goes as multipart form data


def get(*ok: int, query: str = "") -> Try:
    return Try("GET", frozenset(ok), query=query)


def post(*ok: int, data=None, multipart: bool = False) -> Try:
    return Try("POST", frozenset(ok), data=data if data is not None else {}, multipart=multipart)


def put(*ok: int, data=None) -> Try:
    return Try("PUT", frozenset(ok), data=data if data is not None else {})


def wrong(method: str) -> Try:
    """A method the route does not serve: 405 for anyone signed in, before any project check."""
    return Try(method, frozenset({405}), data={} if method != "GET" else None, rule=signed_in)


@dataclass(frozen=True)
class Case:
    kwargs: Callable[[World], dict]
    rule: Rule
    tries: tuple[Try, ...]
    label: str = ""


@dataclass(frozen=True)
class Route:
    kind: str  # "page" (session only; a token alone is anonymous), "api" (session and token), "public"
    cases: tuple[Case, ...]


def page(kwargs, rule, *tries, label="") -> Route:
    return Route("page", (Case(kwargs, rule, tries, label),))


def api(kwargs, rule, *tries, label="") -> Route:
    return Route("api", (Case(kwargs, rule, tries, label),))


def public(*tries) -> Route:
    """Open to everyone, anonymous included."""
    return Route("public", (Case(lambda w: {}, signed_in, tries),))


def slug(w):
    return {"slug": w.mine.slug}


def osc_slug(w):
    return {"slug": w.osc.slug}


NO_ARGS = lambda w: {}  # noqa: E731
INVALID = {"version": ""}

ROUTES: dict[str, Route] = {
    # Accounts and API documentation
    "login": public(get(200)),
    "logout": public(wrong("GET")),  # POST would end the identity's session (and its token)
    "api-schema": public(get(200)),
    "api-docs": public(get(200)),
    "api-redoc": public(get(200)),
    "healthz": public(get(200)),  # database, Redis and live workers: no sign-in, no secrets (config/health.py)
    # Annotation pages
    "home": page(NO_ARGS, signed_in, get(200)),
    "io-project": page(slug, member(Role.ANNOTATOR), get(200)),
    # Project setup (annotation/views/members.py): creating needs a researcher/admin role somewhere
    # (or staff); the members page is the project's researchers'; an invite link (expired here:
    # 410, nothing joins) is for anyone signed in; amending is the annotator's own (others 404).
    "io-project-new": page(NO_ARGS, researcher_anywhere, get(200), post(400, data={}), wrong("DELETE")),
    "io-members": page(slug, member(Role.RESEARCHER), get(200), post(400, data={}), wrong("DELETE")),
    # The project settings page (disagreement thresholds; the world's project compares quintuplet
    # fields, and none ticked is refused). Its project form is the project admins' (no name: refused).
    "io-project-settings": Route(
        "page",
        (
            Case(slug, member(Role.RESEARCHER), (get(200), post(400, data={}), wrong("DELETE")), "thresholds"),
            Case(slug, member(Role.ADMIN), (post(400, data={"form": "project"}),), "project form"),
        ),
    ),
    # The labelling pass page (annotation/fill_pass.py): a field no pass fills is refused (400).
    "io-fill-pass": page(
        slug, member(Role.RESEARCHER), get(200), post(400, data={"fields": "state_a"}), wrong("DELETE")
    ),
    "io-invite": page(lambda w: {"token": w.invite_token}, signed_in, get(410), post(410)),
    "work-amend": page(
        lambda w: {"slug": w.mine.slug, "annotation_id": w.annotation.pk}, own_task, get(200), wrong("POST")
    ),
    "io-import": page(slug, member(Role.RESEARCHER), get(200), post(400, data={}), wrong("DELETE")),
    "io-import-run": page(lambda w: {"slug": w.mine.slug, "run_id": w.run.pk}, member(Role.RESEARCHER), get(200)),
    "io-releases": page(slug, member(Role.RESEARCHER), get(200), post(400, data=INVALID), wrong("DELETE")),
    "io-release-download": page(lambda w: {"slug": w.mine.slug, "version": "v1"}, member(Role.RESEARCHER), get(200)),
    "work-annotate": page(slug, member(Role.ANNOTATOR), get(200), wrong("POST")),
    "work-review-list": page(slug, member(Role.REVIEWER), get(200), wrong("POST")),
    "work-review-detail": page(
        lambda w: {"slug": w.mine.slug, "item_id": w.annotated.pk}, member(Role.REVIEWER), get(200)
    ),
    "work-agreement": page(slug, member(Role.REVIEWER), get(200), wrong("POST")),
    "io-audit": page(slug, member(Role.RESEARCHER), get(200), get(400, query="since=yesterday"), wrong("POST")),
    # Crowd studies (annotation/views/studies.py): the project's researchers manage them. The public
    # study link is anonymous-accessible BY DESIGN: the crowd platform's id (PROLIFIC_PID, workerId)
    # is the participant's identity; without one (as asked here) it explains itself (200), and a
    # signed-in non-participant is never signed out by it. The finish page belongs to a study's
    # participants (the crowd account of the project's study; it did none of its task and nothing
    # is left to claim, so the page says so, without a code; anyone else 404).
    "io-studies": page(slug, member(Role.RESEARCHER), get(200), post(400, data={}), wrong("DELETE")),
    "io-study": page(
        lambda w: {"slug": w.mine.slug, "study_id": w.study.pk},
        member(Role.RESEARCHER),
        get(200),
        post(400, data={}),
        wrong("DELETE"),
    ),
    "io-study-csv": page(
        lambda w: {"slug": w.mine.slug, "study_id": w.study.pk}, member(Role.RESEARCHER), get(200), wrong("POST")
    ),
    "study-entry": Route("public", (Case(lambda w: {"token": w.study.token}, signed_in, (get(200), wrong("POST"))),)),
    "study-finish": page(
        lambda w: {"token": w.study.token}, lambda who: "ok" if who == CROWD else 404, get(200), wrong("POST")
    ),
    "api-studies": api(slug, member(Role.RESEARCHER), get(200), post(400, data={"name": ""}), wrong("DELETE")),
    "api-study": api(
        lambda w: {"slug": w.mine.slug, "study_id": w.study.pk}, member(Role.RESEARCHER), get(200), wrong("POST")
    ),
    "api-study-close": api(
        lambda w: {"slug": w.mine.slug, "study_id": w.study.pk}, member(Role.RESEARCHER), post(409), wrong("GET")
    ),
    "api-study-decision": api(
        lambda w: {"slug": w.mine.slug, "study_id": w.study.pk, "participant_id": w.participant.pk},
        member(Role.RESEARCHER),
        post(400, data={"decision": "maybe"}),
        wrong("GET"),
    ),
    # Annotation API
    "api-me": api(NO_ARGS, signed_in, get(200), wrong("DELETE")),
    "api-projects": api(
        NO_ARGS,
        signed_in,
        get(200),
        Try("POST", frozenset({400}), data={"slug": "x"}, rule=researcher_anywhere),
        wrong("DELETE"),
    ),
    "api-members": api(slug, member(Role.RESEARCHER), get(200), post(400, data={"role": "boss"}), wrong("PUT")),
    "api-members-csv": api(slug, member(Role.RESEARCHER), post(400, multipart=True), wrong("GET")),
    # A role change refused for its data; a removal of someone who is not a member: 404 once let in.
    "api-member": Route(
        "api",
        (
            Case(
                lambda w: {"slug": w.mine.slug, "user_id": w.users[ANNOTATOR].pk},
                member(Role.RESEARCHER),
                (Try("PATCH", frozenset({400}), data={"role": "boss"}), wrong("GET")),
                "member",
            ),
            Case(
                lambda w: {"slug": w.mine.slug, "user_id": w.users[STRANGER].pk},
                member(Role.RESEARCHER),
                (Try("DELETE", frozenset({404}), data={}),),
                "not a member",
            ),
        ),
    ),
    "api-invites": api(
        slug,
        member(Role.RESEARCHER),
        get(200),
        get(400, query="state=gone"),
        post(400, data={"role": "boss"}),
        wrong("DELETE"),
    ),
    # Revoking the world's invite, which expired: 409 once let in, nothing changes.
    "api-invite-revoke": api(
        lambda w: {"slug": w.mine.slug, "invite_id": w.invite.pk}, member(Role.RESEARCHER), post(409), wrong("GET")
    ),
    "api-invite-accept": api(lambda w: {"token": w.invite_token}, signed_in, post(410), wrong("GET")),
    "api-own-annotations": api(slug, member(Role.ANNOTATOR), get(200), wrong("POST")),
    "api-own-annotation": api(lambda w: {"annotation_id": w.annotation.pk}, own_task, get(200), wrong("POST")),
    "api-annotation-amend": api(
        lambda w: {"annotation_id": w.annotation.pk}, own_task, post(400, data={"result": {}}), wrong("GET")
    ),
    "api-project-overview": api(slug, member(Role.ANNOTATOR), get(200), wrong("DELETE")),
    # A box threshold for a quintuplet project: refused (400), nothing changes.
    "api-project-thresholds": api(
        slug, member(Role.RESEARCHER), get(200), Try("PATCH", frozenset({400}), data={"box_iou": 0.4}), wrong("DELETE")
    ),
    "api-fill-pass": api(
        slug, member(Role.RESEARCHER), get(200), post(400, data={"fields": ["state_a"]}), wrong("DELETE")
    ),
    "api-item-import": api(slug, member(Role.RESEARCHER), get(200), post(400, multipart=True), wrong("DELETE")),
    "api-item-import-formats": api(slug, member(Role.RESEARCHER), get(200), wrong("POST")),
    "api-import-run": api(lambda w: {"run_id": w.run.pk}, member(Role.RESEARCHER), get(200), wrong("DELETE")),
    "api-annotation-import": api(slug, member(Role.RESEARCHER), post(400, multipart=True), wrong("GET")),
    "api-releases": api(slug, member(Role.RESEARCHER), get(200), post(400, data=INVALID), wrong("DELETE")),
    "api-release-export": api(
        lambda w: {"slug": w.mine.slug, "version": "v1"},
        member(Role.RESEARCHER),
        get(200),
        get(400, query="fmt=exe"),
        wrong("DELETE"),
    ),
    "api-task-next": api(slug, member(Role.ANNOTATOR), post(400, data={"exclude": "not a list"}), wrong("GET")),
    # The annotator's own task (submitted): drafts and submits refused for their data, renew and
    # skip refused as the task is no longer held.
    "api-task-draft": api(lambda w: {"task_id": w.task.pk}, own_task, put(400, data={"version": -1}), wrong("POST")),
    "api-task-renew": api(lambda w: {"task_id": w.task.pk}, own_task, post(409), wrong("GET")),
    "api-task-submit": api(
        lambda w: {"task_id": w.task.pk}, own_task, post(400, data={"result": {}, "time_spent_ms": -1}), wrong("GET")
    ),
    "api-task-skip": api(lambda w: {"task_id": w.task.pk}, own_task, post(409), wrong("GET")),
    "api-review-queue": api(slug, member(Role.REVIEWER), get(200), get(400, query="limit=x"), wrong("POST")),
    "api-item-review": api(
        lambda w: {"item_id": w.annotated.pk},
        member(Role.REVIEWER),
        get(200),
        post(400, data={"decision": "maybe"}),
        wrong("DELETE"),
    ),
    "api-agreement": api(slug, member(Role.REVIEWER), get(200), wrong("POST")),
    "api-audit": api(slug, member(Role.RESEARCHER), get(200), get(400, query="action=nope"), wrong("POST")),
    "api-audit-export": api(slug, member(Role.RESEARCHER), get(200), get(400, query="fmt=xlsx"), wrong("POST")),
    # Inference pages and API (the job's project decides)
    "inference:job-detail": page(lambda w: {"pk": w.finished_job.pk}, member(Role.RESEARCHER), get(200)),
    "inference:job-results": page(lambda w: {"pk": w.finished_job.pk}, member(Role.RESEARCHER), get(200)),
    "inference:job-samples": page(lambda w: {"pk": w.finished_job.pk}, member(Role.RESEARCHER), get(200)),
    # Launch a job on an endpoint that does not exist: 400, nothing created.
    "api-jobs": api(slug, member(Role.RESEARCHER), post(400, data={"endpoint": "no-such-endpoint"}), wrong("GET")),
    "api-job-progress": api(lambda w: {"pk": w.finished_job.pk}, member(Role.RESEARCHER), get(200), wrong("POST")),
    # Cancel a finished job: 409 and nothing changes; retry a queued one: nothing to retry.
    "api-job-cancel": api(lambda w: {"pk": w.finished_job.pk}, member(Role.RESEARCHER), post(409), wrong("GET")),
    "api-job-retry-failed": api(lambda w: {"pk": w.queued_job.pk}, member(Role.RESEARCHER), post(200), wrong("GET")),
    # Evaluation pages and API
    "evaluation:leaderboard": page(slug, member(Role.RESEARCHER), get(200)),
    "evaluation:leaderboard-download": page(
        lambda w: {"slug": w.mine.slug, "fmt": "csv"}, member(Role.RESEARCHER), get(200)
    ),
    "evaluation:correlation": page(osc_slug, member(Role.RESEARCHER, crowd_study_here=False), get(200)),
    "evaluation:correlation-download": page(
        lambda w: {"slug": w.osc.slug, "fmt": "json"}, member(Role.RESEARCHER, crowd_study_here=False), get(200)
    ),
    "api-leaderboard": api(
        slug, member(Role.RESEARCHER), get(200), get(200, query="fmt=csv"), get(400, query="fmt=exe"), wrong("POST")
    ),
    "api-correlation": api(
        osc_slug,
        member(Role.RESEARCHER, crowd_study_here=False),
        get(200),
        get(200, query="fmt=latex"),
        wrong("POST"),
    ),
    # The power page and its API: a bad target is a 400 naming it, for whoever is let in.
    "evaluation:power": page(slug, member(Role.RESEARCHER), get(200), get(400, query="half_width=abc")),
    "api-power": api(
        slug,
        member(Role.RESEARCHER),
        get(200),
        get(200, query="fmt=markdown&half_width=1.5"),
        get(400, query="half_width=0"),
        wrong("POST"),
    ),
    # MLLM judges of a pairwise project: the page says when a project is not one; the API answers
    # 404 naming the protocol, and a 400 for a Likert project the caller cannot compare with.
    "evaluation:judges": page(slug, member(Role.RESEARCHER), get(200), get(400, query="likert=nowhere")),
    "api-judges": api(slug, member(Role.RESEARCHER), get(404), get(400, query="likert=nowhere"), wrong("POST")),
    # Excluding a rater from a board with a rater screen: the matrix's project is of a protocol
    # without one, so whoever is let in gets 404 naming that, before the body is read; nothing changes.
    "api-rater-exclusions": api(slug, member(Role.RESEARCHER), post(404, data={}), wrong("GET")),
    # Media: stored assets for any member of a project using them, the upload area for
    # researchers anywhere, anything else for superusers only.
    "media": Route(
        "page",
        (
            Case(lambda w: {"path": w.asset.file.name}, member(Role.ANNOTATOR), (get(200),), "asset"),
            Case(lambda w: {"path": "incoming/upload.png"}, researcher_anywhere, (get(200),), "upload area"),
            Case(lambda w: {"path": "exports/job-1.json"}, superuser_only, (get(200),), "other file"),
        ),
    ),
}

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
        "URL patterns without an entry in tests/test_permission_matrix.py ROUTES (say who may use them): "
        + ", ".join(missing)
    )
    stale = sorted(set(ROUTES) - set(found))
    assert not stale, f"ROUTES entries for patterns that no longer exist: {', '.join(stale)}"
    admin_routes = [route for key, route, ns in url_patterns() if ns == ADMIN_NAMESPACE]
    assert admin_routes and all(route.startswith("admin/") for route in admin_routes)


# ---------------------------------------------------------------------------------------------
# The world


@dataclass
class World:
    users: dict
    tokens: dict
    mine: Project
    osc: Project
    other: Project
    annotated: Item
    annotation: Annotation
    task: Task
    run: ImportRun
    finished_job: InferenceJob
    queued_job: InferenceJob
    asset: MediaAsset
    media_root: Path = field(default=None)
    invite_token: str = ""  # an expired invite of `mine`
    invite: object = None  # its row
    study: object = None  # a closed crowd study of `mine` with one participant
    participant: object = None


def build_world(media_root: Path) -> World:
    from django.contrib.auth import get_user_model

    from inference.services import predictions_import
    from protocols.oscbench import CRITERIA
    from tests.evaluation.factories import make_release, rate
    from tests.helpers.items import osc_payload, status_payload

    User = get_user_model()
    users = {
        who: User.objects.create_user(f"m-{who}", password=None)
        for who in IDENTITIES
        if who not in (ANON, SUPERUSER, CROWD, CROWD_ELSEWHERE)  # the crowd accounts come with their studies
    }
    users[SUPERUSER] = User.objects.create_superuser("m-superuser", "root@example.org", None)
    tokens = {who: Token.objects.create(user=u).key for who, u in users.items()}

    def project(slug_: str, protocol: str) -> Project:
        p = Project.objects.create(slug=slug_, name=slug_, protocol=protocol)
        for who, role in MEMBER_ROLE.items():
            Membership.objects.create(project=p, user=users[who], role=role)
        return p

    mine, osc = project("mine", "status"), project("mine-osc", "oscbench")
    other = Project.objects.create(slug="other", name="other", protocol="status")
    Membership.objects.create(project=other, user=users[OTHER], role=Role.RESEARCHER)

    release = make_release(mine, {f"it{i}": status_payload(i) for i in range(3)})
    make_release(osc, {f"g{i}": osc_payload("gen", i, "regular") for i in range(3)})
    for i, level in enumerate([1, 3, 5]):
        for rater in ("r1", "r2"):
            rate(f"g{i}", osc, rater, {c: level for c in CRITERIA})
    predictions_import(
        project=osc,
        lines=[
            json.dumps({"item": f"g{i}", "query": "judge", "answer": {c: lv for c in CRITERIA}})
            for i, lv in enumerate([2, 3, 4])
        ],
        model_name="j1",
        release=osc.releases.get(),
    )

    # A stored asset of an item of `mine`, the upload area and a job export on disk.
    png = b"\x89PNG\r\n\x1a\n" + b"\0" * 32
    sha = hashlib.sha256(png).hexdigest()
    rel = f"assets/{sha[:2]}/{sha}.png"
    for name, body in ((rel, png), ("incoming/upload.png", png), ("exports/job-1.json", b"{}")):
        (media_root / name).parent.mkdir(parents=True, exist_ok=True)
        (media_root / name).write_bytes(body)
    asset = MediaAsset.objects.create(sha256=sha, kind="image", file=rel, mime="image/png", size_bytes=len(png))
    ProjectAsset.objects.create(project=mine, asset=asset)  # stored by an import of `mine`

    annotated = Item.objects.create(
        project=mine,
        external_id="annotated",
        payload=status_payload(7),
        media={"image_a": sha, "image_b": sha},
        status=ItemStatus.ANNOTATED,
    )
    task = Task.objects.create(
        item=annotated,
        annotator=users[ANNOTATOR],
        status=TaskStatus.SUBMITTED,
        lease_expires=timezone.now() - timedelta(minutes=1),
    )
    annotation = Annotation.objects.create(
        item=annotated, annotator=users[ANNOTATOR], task=task, result={"state_a": "closed"}
    )
    run = ImportRun.objects.create(
        project=mine,
        created_by=users[RESEARCHER],
        file_name="items.jsonl",
        status="refused",
        errors=["line 1: field id: required"],
        error_count=1,
    )
    finished_job = InferenceJob.objects.create(
        model_name="m1",
        project=mine,
        release=release,
        protocol="status",
        status=JobStatus.FINISHED,
        finished_at=timezone.now(),
    )
    queued_job = InferenceJob.objects.create(
        model_name="m2", project=mine, release=release, protocol="status", status=JobStatus.QUEUED
    )
    invite_token = "expired-invite-token"
    invite = ProjectInvite.objects.create(
        project=mine,
        role=Role.ANNOTATOR,
        created_by=users[RESEARCHER],
        token_sha256=hashlib.sha256(invite_token.encode()).hexdigest(),
        expires_at=timezone.now() - timedelta(hours=1),
    )
    world = World(
        users,
        tokens,
        mine,
        osc,
        other,
        annotated,
        annotation,
        task,
        run,
        finished_job,
        queued_job,
        asset,
        media_root,
        invite_token,
        invite,
    )
    from annotation.models import CrowdAccount, Study, StudyParticipant

    world.study = Study.objects.create(
        project=mine,
        name="s",
        token="matrix-study-token",
        max_participants=1,
        tasks_per_participant=1,
        completion_code="C",
        is_open=False,
    )
    other_study = Study.objects.create(
        project=other,
        name="s2",
        token="matrix-other-study-token",
        max_participants=1,
        tasks_per_participant=1,
        completion_code="C",
    )
    for who, study, home, elsewhere in ((CROWD, world.study, mine, other), (CROWD_ELSEWHERE, other_study, other, mine)):
        crowd = User.objects.create_user(f"prolific-{CROWD_PID}-{who}", password=None)
        CrowdAccount.objects.create(user=crowd, study=study, platform="prolific", external_id=CROWD_PID)
        Membership.objects.create(project=home, user=crowd, role=Role.ANNOTATOR)
        Membership.objects.create(project=elsewhere, user=crowd, role=Role.RESEARCHER)  # gives nothing
        participant = StudyParticipant.objects.create(study=study, user=crowd, external_id=CROWD_PID)
        users[who], tokens[who] = crowd, Token.objects.create(user=crowd).key
        if who == CROWD:
            world.participant = participant
    return world


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
