"""A project's members, managed in the app by its researchers and admins (page and API): add one
by username or e-mail, many from a CSV file, change or remove a role, invite links.

Rules, the same on every path:
- nobody grants a role above their own, nor changes or removes a member whose role is above theirs;
- a project always keeps at least one researcher or admin (the last one cannot leave or be demoted);
- nobody revokes an invite link for a role above their own (as they could not have made it);
- changes lock the project row first, so two concurrent changes cannot both remove "the other" lead;
- every change is recorded through audit_record in its transaction;
- a crowd account (signed in by a study link, annotation/studies/) is the annotator of its study's
  project and nothing else: no other role, no other project, no invite (CrowdAccountRefused).
"""

from __future__ import annotations

import csv
import hashlib
import io
import secrets
from dataclasses import dataclass, field
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from .audit.record import audit_record
from .models import ROLE_RANK, AuditAction, CrowdAccount, Membership, Project, ProjectInvite, Role
from .permissions import role_in
from .project_setup import SetupInvalid

LEADS = (Role.RESEARCHER, Role.ADMIN)
CSV_MAX_BYTES = 1_000_000
CSV_MAX_LINES = 5000
CSV_HEADERS = (("username_or_email", "role"), ("username", "role"))
INVITE_HOURS = (1, 24 * 90)


class MemberRefused(Exception):
    """A change the rules refuse (HTTP 409 / a message on the page); nothing changed."""


class CrowdAccountRefused(MemberRefused, PermissionDenied):
    """A crowd account given a role or project beyond its study's, or accepting an invite. A
    MemberRefused (409 in the API, a message on the members page and the admin's form) and a
    PermissionDenied, so a page that does not catch it answers 403."""


class InviteGone(Exception):
    """An invite link that is unknown, used, revoked or expired (HTTP 410); the message says which."""


def _lock(project: Project) -> Project:
    return Project.objects.select_for_update().get(pk=project.pk)


def _actor_rank(actor, project: Project) -> int:
    return ROLE_RANK.get(role_in(actor, project), 0)


def _username(user) -> str:
    return user.get_username() if user is not None else ""


def not_addable(name: str) -> str:
    """The one answer for an account that does not exist and one this project may not see (a crowd
    account of another project's study), so that neither tells whether an account exists."""
    return f"No account you can add is named {str(name)[:200]!r}."


def _foreign_crowd(project: Project, user) -> bool:
    """Whether `user` is a crowd account of another project's study (hidden from this project)."""
    return CrowdAccount.objects.filter(user=user).exclude(study__project=project).exists()


def find_user(identifier: str, *, by_email: bool = True):
    """A user by exact username, else (by_email) by e-mail (case-insensitive); None when no single
    match. The members API passes by_email=False: it takes usernames only."""
    User = get_user_model()
    text = (identifier or "").strip()
    if not text:
        return None
    user = User.objects.filter(username=text).first()
    if user is None and by_email and "@" in text:
        found = list(User.objects.filter(email__iexact=text)[:2])
        user = found[0] if len(found) == 1 else None
    return user


def _check_role(role: str) -> None:
    if role not in Role.values:
        raise SetupInvalid({"role": f"One of: {', '.join(Role.values)}."})


def _check_crowd(project: Project, target, role: str | None) -> None:
    """CrowdAccountRefused unless `target` is a person's account, or a crowd account made the
    annotator of its own study's project (or removed)."""
    if role is None:
        return
    account = CrowdAccount.objects.filter(user=target).select_related("study__project").first()
    if account is None or (role == Role.ANNOTATOR and account.study.project_id == project.pk):
        return
    name, study = target.get_username(), account.study
    if study.project_id == project.pk:
        raise CrowdAccountRefused(
            f"{name} is a crowd participant's account (study \u201c{study.name}\u201d, signed in by its link): "
            f"it can only be an annotator of {project.slug}, not {role}."
        )
    # Another project's study is not even confirmed to exist: the same words as an unknown name.
    raise CrowdAccountRefused(not_addable(name))


def _check_change(project: Project, actor, target, current: str | None, role: str | None) -> None:
    """Raise MemberRefused when `actor` may not move `target` from `current` to `role` (None: remove)."""
    _check_crowd(project, target, role)
    rank = _actor_rank(actor, project)
    if role is not None and ROLE_RANK[role] > rank:
        raise MemberRefused(f"Only a member with the {role} role (or above) can grant it.")
    if current is not None and ROLE_RANK[current] > rank:
        raise MemberRefused(
            f"{target.get_username()} is {current}, above your role; only an {current} can change that."
        )
    if current in LEADS and role not in LEADS:
        others = Membership.objects.filter(project=project, role__in=LEADS).exclude(user=target).exists()
        if not others:
            raise MemberRefused(
                f"{target.get_username()} is the project's last researcher or admin; make someone "
                f"else researcher or admin first."
            )


def _put(project: Project, actor, user, role: str, *, via: str) -> str:
    """Add `user` with `role`, or change their role. Returns added / changed / unchanged."""
    membership = Membership.objects.filter(project=project, user=user).first()
    current = membership.role if membership else None
    if current == role:
        return "unchanged"
    _check_change(project, actor, user, current, role)
    if membership is None:
        membership = Membership.objects.create(project=project, user=user, role=role)
        audit_record(
            action=AuditAction.MEMBER_ADD,
            actor=actor,
            project=project,
            obj=membership,
            details={"user": user.get_username(), "role": role, "via": via},
        )
        return "added"
    membership.role = role
    membership.save(update_fields=["role"])
    audit_record(
        action=AuditAction.MEMBER_CHANGE,
        actor=actor,
        project=project,
        obj=membership,
        details={"user": user.get_username(), "from": current, "to": role, "via": via},
    )
    return "changed"


@transaction.atomic
def member_add(
    *,
    project: Project,
    actor,
    username_or_email: str,
    role: str,
    by_email: bool = True,
    field: str = "username_or_email",
) -> tuple[Membership, str]:
    """Add a member (or set the role of one already in). Raises SetupInvalid (unknown user, a crowd
    account of another project's study, bad role; the first two in the same words, under `field`)
    or MemberRefused."""
    _check_role(role)
    user = find_user(username_or_email, by_email=by_email)
    if user is None or _foreign_crowd(project, user):
        raise SetupInvalid({field: not_addable(username_or_email)})
    project = _lock(project)
    outcome = _put(project, actor, user, role, via="form")
    return Membership.objects.get(project=project, user=user), outcome


@transaction.atomic
def member_put(*, project: Project, actor, user, role: str, via: str) -> str:
    """Add `user` with `role` or change their role (the admin's membership form); the same rules
    and audit as the members page. Returns added / changed / unchanged; raises MemberRefused."""
    _check_role(role)
    return _put(_lock(project), actor, user, role, via=via)


def member_change_refusal(*, project: Project, actor, user, role: str | None) -> str | None:
    """Why `actor` may not give `user` the role `role` (None: remove them), or None when they may:
    the members page's rules, for a form to show before saving (the change itself checks again
    under the project's lock)."""
    current = Membership.objects.filter(project=project, user=user).values_list("role", flat=True).first()
    if current == role:
        return None
    try:
        _check_change(project, actor, user, current, role)
    except MemberRefused as exc:
        return str(exc)
    return None


@transaction.atomic
def member_set_role(*, project: Project, actor, user_id: int, role: str) -> tuple[Membership, str]:
    _check_role(role)
    project = _lock(project)
    membership = Membership.objects.select_related("user").filter(project=project, user_id=user_id).first()
    if membership is None:
        raise Membership.DoesNotExist("No such member.")
    outcome = _put(project, actor, membership.user, role, via="form")
    membership.refresh_from_db()
    return membership, outcome


@transaction.atomic
def member_remove(*, project: Project, actor, user_id: int) -> None:
    project = _lock(project)
    membership = Membership.objects.select_related("user").filter(project=project, user_id=user_id).first()
    if membership is None:
        raise Membership.DoesNotExist("No such member.")
    _check_change(project, actor, membership.user, membership.role, None)
    audit_record(
        action=AuditAction.MEMBER_REMOVE,
        actor=actor,
        project=project,
        obj=membership,
        details={"user": membership.user.get_username(), "role": membership.role},
    )
    membership.delete()


# --- CSV ----------------------------------------------------------------------------------------


@dataclass
class CsvReport:
    lines: list[dict] = field(default_factory=list)  # {line, username_or_email, role, outcome, message}

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self.lines:
            out[row["outcome"]] = out.get(row["outcome"], 0) + 1
        return out


def _csv_rows(data: bytes) -> list[tuple[int, str, str]]:
    """(line number, identifier, role) per data line; SetupInvalid naming the line when the file
    itself is malformed (nothing is written then)."""
    if len(data) > CSV_MAX_BYTES:
        raise SetupInvalid({"file": f"At most {CSV_MAX_BYTES // 1000} kB."})
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SetupInvalid({"file": f"Not UTF-8 text (byte {exc.start})."}) from None
    rows, seen = [], {}
    try:
        for number, cells in enumerate(csv.reader(io.StringIO(text, newline="")), start=1):
            if not cells or all(not c.strip() for c in cells):
                continue
            if len(cells) != 2:
                raise SetupInvalid(
                    {"file": f"line {number}: {len(cells)} columns; each line is username_or_email,role."}
                )
            ident, role = cells[0].strip(), cells[1].strip().lower()
            if not rows and (ident.lower(), role) in CSV_HEADERS:
                continue  # the header line
            key = ident.lower()
            if key in seen:
                raise SetupInvalid({"file": f"line {number}: {ident!r} is on line {seen[key]} already."})
            seen[key] = number
            rows.append((number, ident, role))
            if len(rows) > CSV_MAX_LINES:
                raise SetupInvalid({"file": f"At most {CSV_MAX_LINES} lines."})
    except csv.Error as exc:
        raise SetupInvalid({"file": f"Not a CSV file: {exc}."}) from None
    if not rows:
        raise SetupInvalid({"file": "No lines: write one username_or_email,role per line."})
    return rows


@transaction.atomic
def members_import_csv(*, project: Project, actor, data: bytes, by_email: bool = True) -> CsvReport:
    """Add or change members from `username_or_email,role` lines (a header line is optional).

    Each line is reported: added, changed, unchanged, unknown user, bad role or refused (the rules
    above). A malformed file (not UTF-8 CSV, a line without exactly two columns, a name twice, no
    lines) raises SetupInvalid and writes nothing. A crowd account of another project's study is
    reported as an unknown user, in the same words. by_email=False (the API): usernames only."""
    rows = _csv_rows(data)
    project = _lock(project)
    report = CsvReport()
    for number, ident, role in rows:
        row = {"line": number, "username_or_email": ident, "role": role, "message": ""}
        user = find_user(ident, by_email=by_email)
        if role not in Role.values:
            row.update(outcome="bad role", message=f"One of: {', '.join(Role.values)}.")
        elif user is None or _foreign_crowd(project, user):
            row.update(outcome="unknown user", message=not_addable(ident))
        else:
            try:
                row["outcome"] = _put(project, actor, user, role, via="csv")
            except MemberRefused as exc:
                row.update(outcome="refused", message=str(exc))
        report.lines.append(row)
    return report


# --- invites ------------------------------------------------------------------------------------


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def invite_create(*, project: Project, actor, role: str, hours: int) -> tuple[ProjectInvite, str]:
    """A single-use link (the token is returned once; only its digest is kept)."""
    _check_role(role)
    if isinstance(hours, bool) or not isinstance(hours, int) or not INVITE_HOURS[0] <= hours <= INVITE_HOURS[1]:
        raise SetupInvalid({"hours": f"A whole number of hours from {INVITE_HOURS[0]} to {INVITE_HOURS[1]}."})
    if ROLE_RANK[role] > _actor_rank(actor, project):
        raise MemberRefused(f"Only a member with the {role} role (or above) can invite as {role}.")
    token = secrets.token_urlsafe(32)
    invite = ProjectInvite.objects.create(
        project=project,
        role=role,
        token_sha256=_digest(token),
        expires_at=timezone.now() + timedelta(hours=hours),
        created_by=actor,
    )
    audit_record(
        action=AuditAction.MEMBER_INVITE,
        actor=actor,
        project=project,
        obj=invite,
        details={"role": role, "expires_at": invite.expires_at.isoformat()},
    )
    return invite, token


INVITE_STATES = ("open", "used", "revoked", "expired")


def invite_state(invite: ProjectInvite, now=None) -> str:
    if invite.used_at is not None:
        return "used"
    if invite.revoked_at is not None:
        return "revoked"
    return "expired" if invite.expires_at <= (now or timezone.now()) else "open"


def invite_find(token: str) -> ProjectInvite:
    """The open invite of `token`; InviteGone with a clear message otherwise."""
    invite = (
        ProjectInvite.objects.select_related("project", "used_by").filter(token_sha256=_digest(token or "")).first()
        if token and len(token) < 100
        else None
    )
    if invite is None:
        raise InviteGone("This invite link is not valid: check that it was copied whole, or ask for a new one.")
    state = invite_state(invite)
    if state == "used":
        raise InviteGone("This invite link was used already; each link lets one person join. Ask for a new one.")
    if state == "revoked":
        raise InviteGone(f"This invite link was revoked on {invite.revoked_at:%Y-%m-%d %H:%M} UTC. Ask for a new one.")
    if state == "expired":
        raise InviteGone(f"This invite link expired on {invite.expires_at:%Y-%m-%d %H:%M} UTC. Ask for a new one.")
    return invite


@transaction.atomic
def invite_accept(*, token: str, user) -> tuple[Membership, str]:
    """Join the invite's project with its role: (membership, "added"), or (membership, "already")
    when the user is a member already (the link then stays unused)."""
    invite = invite_find(token)
    if CrowdAccount.objects.filter(user=user).exists():
        raise CrowdAccountRefused(
            "This account is a crowd participant's, signed in by a study link: it cannot join projects "
            "through invites. Sign in with your own account to use this invite."
        )
    invite = ProjectInvite.objects.select_for_update().select_related("project").get(pk=invite.pk)
    invite_find(token)  # again under the lock: a second tab may just have used it
    existing = Membership.objects.filter(project=invite.project, user=user).first()
    if existing is not None:
        return existing, "already"
    membership = Membership.objects.create(project=invite.project, user=user, role=invite.role)
    invite.used_by, invite.used_at = user, timezone.now()
    invite.save(update_fields=["used_by", "used_at"])
    audit_record(
        action=AuditAction.MEMBER_ADD,
        actor=user,
        project=invite.project,
        obj=membership,
        details={"user": user.get_username(), "role": invite.role, "via": f"invite {invite.pk}"},
    )
    return membership, "added"


@transaction.atomic
def invite_revoke(*, project: Project, actor, invite_id: int) -> ProjectInvite:
    """Revoke an open invite link of `project`: whoever opens it afterwards gets 410. Raises
    ProjectInvite.DoesNotExist (no such invite in the project) or MemberRefused (used, revoked or
    expired already; or a link for a role above the actor's)."""
    invite = (
        ProjectInvite.objects.select_for_update()
        .select_related("project")
        .filter(project=project, pk=invite_id)
        .first()
    )  # the lock serialises it with invite_accept
    if invite is None:
        raise ProjectInvite.DoesNotExist("No such invite link.")
    state = invite_state(invite)
    if state != "open":
        raise MemberRefused(f"Invite #{invite.pk} is {state} already; only an open link can be revoked.")
    if ROLE_RANK[invite.role] > _actor_rank(actor, project):
        raise MemberRefused(
            f"Invite #{invite.pk} is for the {invite.role} role, above yours; only an {invite.role} can revoke it."
        )
    invite.revoked_by, invite.revoked_at = actor, timezone.now()
    invite.save(update_fields=["revoked_by", "revoked_at"])
    audit_record(
        action=AuditAction.INVITE_REVOKE,
        actor=actor,
        project=project,
        obj=invite,
        details={
            "role": invite.role,
            "created_by": _username(invite.created_by) or None,
            "expires_at": invite.expires_at.isoformat(),
        },
    )
    return invite


# --- reading ------------------------------------------------------------------------------------


def members_of(*, project: Project) -> list[dict]:
    rows = Membership.objects.filter(project=project).select_related("user").order_by("user__username")
    return [{"user_id": m.user_id, "username": m.user.get_username(), "role": m.role} for m in rows]


def invites_of(*, project: Project, state: str = "", limit: int = 50) -> list[dict]:
    """The project's invite links, newest first (`state`: only those open, used, revoked or
    expired): who made each, for which role, until when, and who used or revoked it. Never the
    token, which is not kept, nor its digest."""
    now = timezone.now()
    rows = ProjectInvite.objects.filter(project=project).select_related("created_by", "used_by", "revoked_by")
    if state:
        if state not in INVITE_STATES:
            raise SetupInvalid({"state": f"One of: {', '.join(INVITE_STATES)}."})
        rows = rows.filter(
            **{
                "open": {"used_at__isnull": True, "revoked_at__isnull": True, "expires_at__gt": now},
                "used": {"used_at__isnull": False},
                "revoked": {"used_at__isnull": True, "revoked_at__isnull": False},
                "expired": {"used_at__isnull": True, "revoked_at__isnull": True, "expires_at__lte": now},
            }[state]
        )
    return [invite_data(invite, now) for invite in rows[:limit]]


def invite_data(invite: ProjectInvite, now=None) -> dict:
    """One invite link as the page and the API show it (no token, no digest)."""
    return {
        "id": invite.pk,
        "role": invite.role,
        "state": invite_state(invite, now),
        "expires_at": invite.expires_at,
        "created_by": _username(invite.created_by),
        "created_at": invite.created_at,
        "used_by": _username(invite.used_by),
        "used_at": invite.used_at,
        "revoked_by": _username(invite.revoked_by),
        "revoked_at": invite.revoked_at,
    }
