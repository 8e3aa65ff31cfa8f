"""The home page (the user's projects) and a project's overview page (every member)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from ..amend import own_recent_annotations
from ..models import ItemStatus, Role
from ..overview import project_overview_data
from ..permissions import can_create_projects, get_project_for
from ..selectors import project_list_for


@login_required
def home(request):
    return render(
        request,
        "home.html",
        {"projects": project_list_for(user=request.user), "can_create_projects": can_create_projects(request.user)},
    )


@login_required
def project_overview(request, slug):
    project = get_project_for(request.user, slug, Role.ANNOTATOR)
    data = project_overview_data(project=project, user=request.user)
    rows = [(label, data["status_counts"][value]) for value, label in ItemStatus.choices]
    return render(
        request,
        "annotation/io/project.html",
        {
            "project": project,
            "data": data,
            "status_rows": rows,
            "recent_work": own_recent_annotations(user=request.user, project=project),
        },
    )
