"""The building blocks of the permission matrix (tests/test_permission_matrix.py): the identities
it asks as, the rules that say who is let in, and the shape of a route's entry (`Route`, `Case`,
`Try` and their shorthands). The table itself is tests/helpers/permission_routes.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from annotation.models import Role

if TYPE_CHECKING:
    from tests.helpers.permission_world import World

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
