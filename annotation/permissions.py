"""The one place that decides what a user may see and do in a project.

A user's rights come from their membership role in a project (annotator < reviewer <
researcher < admin); Django superusers act as admin everywhere. Views and APIs call
`require_role`; a user without any membership gets 404 (the project is not revealed),
a member whose role is too low gets 403.
"""
from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from .models import ROLE_RANK, Membership, Project, Role


def role_in(user, project: Project) -> str | None:
    if not user or not user.is_authenticated:
        return None
    if user.is_superuser:
        return Role.ADMIN
    cache = getattr(user, "_statelab_roles", None)
    if cache is None:
        cache = {}
        user._statelab_roles = cache
    if project.pk not in cache:
        cache[project.pk] = (
            Membership.objects.filter(project=project, user=user).values_list("role", flat=True).first()
        )
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


def get_project_for(user, slug: str, role: str) -> Project:
    """Load a project by slug and check the role in one step (404 when missing or hidden)."""
    try:
        project = Project.objects.get(slug=slug)
    except Project.DoesNotExist:
        raise Http404("No such project.")
    require_role(user, project, role)
    return project


def projects_visible_to(user) -> QuerySet[Project]:
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(memberships__user=user).distinct()


def is_researcher_anywhere(user) -> bool:
    return user.is_superuser or Membership.objects.filter(
        user=user, role__in=[Role.RESEARCHER, Role.ADMIN]
    ).exists()
