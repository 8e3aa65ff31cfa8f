"""Pages to set up projects: a new project (staff, or researchers / admins of some project), a
project's members page (its researchers and admins: add, CSV, change, remove, invite links and their
revocation), and
the page an invite link opens (any signed-in user)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from ..members import (
    INVITE_HOURS,
    InviteGone,
    MemberRefused,
    invite_accept,
    invite_create,
    invite_find,
    invite_revoke,
    invites_of,
    member_add,
    member_remove,
    member_set_role,
    members_import_csv,
    members_of,
)
from ..models import ROLE_RANK, Membership, ProjectInvite, Protocol, Role
from ..permissions import get_project_for, require_project_creator, role_in
from ..project_setup import LEASE_RANGE, SetupInvalid, project_create
from ..queue.rules import DEFAULT_LEASE_SECONDS

PROJECT_FIELDS = (
    "name",
    "slug",
    "protocol",
    "annotations_per_item",
    "gold_share",
    "lease_seconds",
    "rubric",
    "description",
)


@login_required
@require_http_methods(["GET", "POST"])
def project_new(request):
    require_project_creator(request.user)
    values = {"gold_share": "0", "lease_seconds": str(DEFAULT_LEASE_SECONDS), "suggestions": True}
    errors: dict[str, str] = {}
    if request.method == "POST":
        values = {name: request.POST.get(name, "") for name in PROJECT_FIELDS}
        values["suggestions"] = request.POST.get("suggestions") == "on"
        try:
            project = project_create(user=request.user, **values)
        except SetupInvalid as exc:
            errors = exc.errors
        else:
            messages.success(request, f"Project {project.slug} created; you are its admin. Add members below.")
            return redirect("io-members", slug=project.slug)
    return render(
        request,
        "annotation/io/project_new.html",
        {
            "values": values,
            "errors": errors,
            "protocols": Protocol.choices,
            "lease_range": LEASE_RANGE,
        },
        status=400 if errors else 200,
    )


def _grantable(request, project) -> list[tuple[str, str]]:
    rank = ROLE_RANK.get(role_in(request.user, project), 0)
    return [(value, label) for value, label in Role.choices if ROLE_RANK[value] <= rank]


def _members_post(request, project) -> tuple[int, dict]:
    """Carry out one form of the members page; (status, extra context)."""
    action = request.POST.get("action", "")
    try:
        if action == "add":
            membership, outcome = member_add(
                project=project,
                actor=request.user,
                role=request.POST.get("role", ""),
                username_or_email=request.POST.get("username_or_email", ""),
            )
            messages.success(request, f"{membership.user.get_username()}: {outcome} ({membership.role}).")
        elif action == "role":
            membership, outcome = member_set_role(
                project=project, actor=request.user, role=request.POST.get("role", ""), user_id=_user_id(request)
            )
            messages.success(request, f"{membership.user.get_username()}: {outcome} ({membership.role}).")
        elif action == "remove":
            member_remove(project=project, actor=request.user, user_id=_user_id(request))
            messages.success(request, "Member removed.")
        elif action == "csv":
            uploaded = request.FILES.get("file")
            if uploaded is None:
                raise SetupInvalid({"file": "Choose a .csv file of username_or_email,role lines."})
            report = members_import_csv(project=project, actor=request.user, data=uploaded.read())
            return 200, {"csv_report": report}
        elif action == "invite":
            hours = request.POST.get("hours", "")
            invite, token = invite_create(
                project=project,
                actor=request.user,
                role=request.POST.get("role", ""),
                hours=int(hours) if hours.strip().isdigit() else -1,
            )
            return 200, {"invite_url": request.build_absolute_uri(f"/invites/{token}/"), "invite": invite}
        elif action == "revoke":
            invite = invite_revoke(
                project=project, actor=request.user, invite_id=_posted_id(request, "invite_id", "Which invite link?")
            )
            messages.success(request, f"Invite #{invite.pk} ({invite.role}) revoked: its link no longer works.")
        else:
            raise SetupInvalid({"action": "One of add, role, remove, csv, invite, revoke."})
    except SetupInvalid as exc:
        return 400, {"errors": exc.errors, "action": action}
    except MemberRefused as exc:
        return 409, {"errors": {"refused": str(exc)}, "action": action}
    except Membership.DoesNotExist:
        raise Http404("No such member.") from None
    except ProjectInvite.DoesNotExist:
        raise Http404("No such invite link.") from None
    return 302, {}


def _user_id(request) -> int:
    return _posted_id(request, "user_id", "Which member?")


def _posted_id(request, name: str, question: str) -> int:
    raw = request.POST.get(name, "")
    if not raw.isdigit() or len(raw) > 18:
        raise SetupInvalid({name: question})
    return int(raw)


@login_required
@require_http_methods(["GET", "POST"])
def project_members(request, slug):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    status, extra = 200, {}
    if request.method == "POST":
        status, extra = _members_post(request, project)
        if status == 302:
            return redirect("io-members", slug=project.slug)
    return render(
        request,
        "annotation/io/members.html",
        {
            "project": project,
            "members": members_of(project=project),
            "invites": invites_of(project=project),
            "roles": _grantable(request, project),
            "invite_hours": INVITE_HOURS,
            "errors": {},
            **extra,
        },
        status=status,
    )


@login_required
@require_http_methods(["GET", "POST"])
def invite_page(request, token):
    """What the link is for and a Join button; joining redirects to the project. A used, expired
    or unknown link answers 410 with a page saying which."""
    try:
        invite = invite_find(token)
        if request.method == "POST":
            membership, outcome = invite_accept(token=token, user=request.user)
            if outcome == "already":
                messages.info(request, f"You are a member of {membership.project.name} already ({membership.role}).")
            else:
                messages.success(request, f"You joined {membership.project.name} as {membership.role}.")
            return redirect("io-project", slug=membership.project.slug)
    except InviteGone as exc:
        return render(request, "annotation/io/invite.html", {"gone": str(exc)}, status=410)
    current = (
        Membership.objects.filter(project=invite.project, user=request.user).values_list("role", flat=True).first()
    )
    return render(request, "annotation/io/invite.html", {"invite": invite, "current": current})
