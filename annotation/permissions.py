"""The one place that decides what a user may see and do in a project.

A user's rights come from their membership role in a project (annotator < reviewer <
researcher < admin); Django superusers act as admin everywhere. Views and APIs call
`require_role`; a user without any membership gets 404 (the project is not revealed),
a member whose role is too low gets 403.

A crowd account (annotation/studies/models.py, CrowdAccount: signed in by a study's public link,
no password) is an annotator of its study's project and nothing else, whatever membership rows
say: every question below reads it so (annotation/members.py refuses to write another role).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import connections, router
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import Http404
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions

from .db import first_row
from .models import ROLE_RANK, CrowdAccount, Membership, Project, Role, Study
from .tokens import bad_token_count, bad_tokens_blocked, client_address, token_expired, token_expired_message


def _role_cache(user) -> dict:
    cache = getattr(user, "_statelab_roles", None)
    if cache is None:
        cache = {}
        user._statelab_roles = cache
    return cache


def _crowd(user_ref) -> Exists:
    return Exists(CrowdAccount.objects.filter(user=user_ref))


def _crowd_of(user_ref, project_ref) -> Exists:
    return Exists(CrowdAccount.objects.filter(user=user_ref, study__project=project_ref))


def crowd_role(role: str | None, *, crowd: bool, own_project: bool) -> str | None:
    """The role a membership row gives: as written, or for a crowd account the annotator role in
    its study's project and none anywhere else."""
    if not crowd or role is None:
        return role
    return Role.ANNOTATOR if own_project else None


def role_in(user, project: Project) -> str | None:
    if not user or not user.is_authenticated:
        return None
    if user.is_superuser:
        return Role.ADMIN
    cache = _role_cache(user)
    if project.pk not in cache:
        row = (
            Membership.objects.filter(project=project, user=user)
            .annotate(crowd=_crowd(OuterRef("user")), own=_crowd_of(OuterRef("user"), OuterRef("project")))
            .values_list("role", "crowd", "own")
            .first()
        )
        cache[project.pk] = crowd_role(row[0], crowd=row[1], own_project=row[2]) if row else None
    return cache[project.pk]


def has_role(user, project: Project, role: str) -> bool:
    have = role_in(user, project)
    return have is not None and ROLE_RANK[have] >= ROLE_RANK[role]


def require_role(user, project: Project, role: str) -> str:
    """Return the user's role or raise 404 (not a member) / 403 (role too low)."""
    have = role_in(user, project)
    if have is None:
        raise Http404("No such project.")
    if ROLE_RANK[have] < ROLE_RANK[role]:
        raise PermissionDenied(f"This needs the {role} role in project {project.slug}.")
    return have


# The project and the caller's membership role in one statement (a correlated subquery on the
# (project, user) unique index), written once per process: the ORM spent more CPU building and
# compiling the two queries than the database spent answering them. The role goes to role_in's
# per-request cache, so require_role then decides 404 / 403 exactly as before. It runs through the
# queue's statement runner (annotation/db.py first_row): bound server-side, ids as int8.
_PROJECT_STATEMENTS: dict[tuple[str, str], tuple[str, list]] = {}


def _project_statement(alias: str, by: str) -> tuple[str, list]:
    key = (alias, by)
    if key not in _PROJECT_STATEMENTS:
        from .models import Item, Task

        connection = connections[alias]
        qn = connection.ops.quote_name
        meta, col = Project._meta, (lambda model, name: qn(model._meta.get_field(name).column))
        # The member's role; a crowd account's is the annotator role in its study's project only
        # (crowd_role, as role_in reads it).
        role = (
            f"(SELECT CASE WHEN c.{qn(CrowdAccount._meta.pk.column)} IS NULL THEN m.{col(Membership, 'role')} "
            f"WHEN s.{col(Study, 'project')} = p.{qn(meta.pk.column)} THEN '{Role.ANNOTATOR.value}' END "
            f"FROM {qn(Membership._meta.db_table)} m "
            f"LEFT JOIN {qn(CrowdAccount._meta.db_table)} c "
            f"ON c.{col(CrowdAccount, 'user')} = m.{col(Membership, 'user')} "
            f"LEFT JOIN {qn(Study._meta.db_table)} s "
            f"ON s.{qn(Study._meta.pk.column)} = c.{col(CrowdAccount, 'study')} "
            f"WHERE m.{col(Membership, 'project')} = p.{qn(meta.pk.column)} AND m.{col(Membership, 'user')} = %(user)s "
            f"LIMIT 1)"
        )
        columns = ", ".join(f"p.{qn(f.column)}" for f in meta.concrete_fields)
        if by == "slug":
            where = f"FROM {qn(meta.db_table)} p WHERE p.{col(Project, 'slug')} = %(slug)s"
        else:
            where = (
                f"FROM {qn(Task._meta.db_table)} t "
                f"INNER JOIN {qn(Item._meta.db_table)} i ON i.{qn(Item._meta.pk.column)} = t.{col(Task, 'item')} "
                f"INNER JOIN {qn(meta.db_table)} p ON p.{qn(meta.pk.column)} = i.{col(Item, 'project')} "
                f"WHERE t.{qn(Task._meta.pk.column)} = %(task)s AND t.{col(Task, 'annotator')} = %(annotator)s"
            )
        converters = []
        for i, field in enumerate(meta.concrete_fields):
            expression = field.get_col(meta.db_table)
            found = [*connection.ops.get_db_converters(expression), *field.get_db_converters(connection)]
            if found:
                converters.append((i, found, expression))
        _PROJECT_STATEMENTS[key] = (f"SELECT {columns}, {role} {where}", converters)
    return _PROJECT_STATEMENTS[key]


_INT8_RANGE = range(-(2**63), 2**63)


def _project_with_role(user, by: str, params: dict) -> Project | None:
    if any(isinstance(p, int) and p not in _INT8_RANGE for p in params.values()):
        return None  # an id no row can have (the ORM answers such lookups with no rows, too)
    alias = router.db_for_read(Project)
    connection = connections[alias]
    sql, converters = _project_statement(alias, by)
    user_pk = user.pk if user is not None and user.is_authenticated else None
    row = first_row(sql, {"user": user_pk, **params}, using=alias)
    if row is None:
        return None
    values = list(row[:-1])
    for i, found, expression in converters:
        for converter in found:
            values[i] = converter(values[i], expression, connection)
    project = Project.from_db(alias, [f.attname for f in Project._meta.concrete_fields], values)
    if user_pk is not None and not user.is_superuser:
        _role_cache(user)[project.pk] = row[-1]
    return project


def get_project_for(user, slug: str, role: str) -> Project:
    """Load a project by slug and check the role in one step (404 when missing or hidden)."""
    project = _project_with_role(user, "slug", {"slug": slug})
    if project is None:
        raise Http404("No such project.")
    require_role(user, project, role)
    return project


def get_task_project_for(user, task_id: int, role: str) -> Project:
    """The project of the user's own task, checking the role in it (404 when no such task of theirs)."""
    project = _project_with_role(user, "task", {"task": task_id, "annotator": user.pk})
    if project is None:
        raise Http404("No such task.")
    require_role(user, project, role)
    return project


def _reachable(user) -> Q:
    """Projects a member may reach: all of theirs, or for a crowd account its study's only."""
    return ~_crowd(user) | _crowd_of(user, OuterRef("pk"))


def projects_visible_to(user) -> QuerySet[Project]:
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user).filter(_reachable(user)).distinct()


def projects_with_role(user, role: str) -> QuerySet[Project]:
    """Projects where the user has at least `role` (every project for a superuser)."""
    if not user.is_authenticated:
        return Project.objects.none()
    if user.is_superuser:
        return Project.objects.all()
    roles = [r for r, rank in ROLE_RANK.items() if rank >= ROLE_RANK[role]]
    projects = Project.objects.filter(memberships__user=user, memberships__role__in=roles)
    if ROLE_RANK[role] > ROLE_RANK[Role.ANNOTATOR]:
        return projects.filter(~_crowd(user))
    return projects.filter(_reachable(user))


def is_researcher_anywhere(user) -> bool:
    return user.is_superuser or (
        Membership.objects.filter(user=user, role__in=[Role.RESEARCHER, Role.ADMIN]).filter(~_crowd(user)).exists()
    )


def can_create_projects(user) -> bool:
    """Staff, and researchers or admins of some project (the creator becomes the new project's
    admin). Annotators, reviewers and crowd accounts cannot spawn projects (and so admin rights)."""
    return bool(user and user.is_authenticated and (user.is_staff or is_researcher_anywhere(user)))


def require_project_creator(user) -> None:
    if not can_create_projects(user):
        raise PermissionDenied(
            "Creating a project needs the researcher or admin role in some project (or a staff account)."
        )


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's token authentication with its one query written once per process (PostgreSQL).

    REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"] names it in place of DRF's class.

    Same statement (the token joined with its user), same checks and messages; what goes is the
    ORM's per-request building and compiling of `Token.objects.select_related("user").get(key=...)`,
    about 1 ms of CPU per request, more than the query itself. Models whose fields need converting
    from the database take DRF's own path. Both paths
    add the token's lifetime and the count of wrong tokens per address (annotation/tokens.py).
    """

    _compiled: dict[str, tuple | None] = {}

    def authenticate(self, request):
        # Wrong tokens are counted per client address (annotation/tokens.py): past the limit, every
        # token request from there gets 429 for the rest of the window, a right token included.
        words = authentication.get_authorization_header(request).split()
        if not words or words[0].lower() != self.keyword.lower().encode():
            return None  # no token offered (DRF's own test)
        address = client_address(getattr(request, "_request", request))
        if bad_tokens_blocked(address):
            raise exceptions.Throttled(
                wait=settings.STATELAB_BAD_TOKEN_WINDOW_SECONDS, detail="Too many wrong tokens from this address."
            )
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed as exc:
            if getattr(exc, "bad_token", False):
                bad_token_count(address)
            raise TokenRefused(exc.detail) from exc

    def _statement(self, alias: str):
        if alias not in self._compiled:
            connection = connections[alias]
            token_model, user_model = self.get_model(), get_user_model()
            token_fields, user_fields = token_model._meta.concrete_fields, user_model._meta.concrete_fields
            if any(hasattr(f, "from_db_value") for f in (*token_fields, *user_fields)):
                self._compiled[alias] = None
                return None
            qn = connection.ops.quote_name
            columns = [f"t.{qn(f.column)}" for f in token_fields] + [f"u.{qn(f.column)}" for f in user_fields]
            sql = (
                f"SELECT {', '.join(columns)} FROM {qn(token_model._meta.db_table)} t "
                f"INNER JOIN {qn(user_model._meta.db_table)} u "
                f"ON u.{qn(user_model._meta.pk.column)} = t.{qn(token_model._meta.get_field('user').column)} "
                f"WHERE t.{qn(token_model._meta.get_field('key').column)} = %(key)s"
            )
            self._compiled[alias] = (sql, [f.attname for f in token_fields], [f.attname for f in user_fields])
        return self._compiled[alias]

    def authenticate_credentials(self, key):
        token_model = self.get_model()
        alias = router.db_for_read(token_model)
        statement = self._statement(alias)
        if statement is None:
            try:
                user, token = super().authenticate_credentials(key)
            except exceptions.AuthenticationFailed as exc:
                if exc.detail == _("Invalid token."):
                    exc.bad_token = True
                raise
            return self._unexpired(user, token)
        sql, token_names, user_names = statement
        row = first_row(sql, {"key": key}, using=alias)
        if row is None:
            raise _bad_token()
        n = len(token_names)
        token = token_model.from_db(alias, token_names, row[:n])
        token.user = get_user_model().from_db(alias, user_names, row[n:])
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        return self._unexpired(token.user, token)

    @staticmethod
    def _unexpired(user, token):
        if token_expired(token.created):
            raise exceptions.AuthenticationFailed(token_expired_message())
        return (user, token)


class TokenRefused(exceptions.APIException):
    """A token that does not authenticate: 401 with `WWW-Authenticate: Token`. (DRF would answer an
    AuthenticationFailed with 403 here, because session authentication comes first and names no
    scheme; a client holding an expired or revoked token should be told to authenticate again.)"""

    status_code = 401
    default_code = "authentication_failed"
    auth_header = "Token"


def _bad_token() -> exceptions.AuthenticationFailed:
    exc = exceptions.AuthenticationFailed(_("Invalid token."))
    exc.bad_token = True  # counted against the caller's address
    return exc
