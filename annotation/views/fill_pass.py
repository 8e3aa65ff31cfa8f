"""A project's labelling pass page (its researchers and admins; annotation/fill_pass.py): what a
pass would ask and of how many verified items, and the button that starts one (audited). Reached
from the project's Settings page."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from ..fill_form import field_label
from ..fill_pass import FillPassRefused, fill_pass_plan, fill_pass_start
from ..models import Role
from ..permissions import get_project_for


@login_required
@require_http_methods(["GET", "POST"])
def fill_pass_page(request, slug: str):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    errors: dict[str, str] = {}
    status = 200
    if request.method == "POST":
        try:
            report = fill_pass_start(project=project, actor=request.user, fields=request.POST.getlist("fields"))
        except FillPassRefused as exc:
            errors, status = exc.errors, exc.status
        else:
            asked = " and ".join(field_label(f).lower() for f in report["fields"])
            messages.success(
                request,
                f"Labelling pass started: {report['items']} verified item(s) are back in the annotators' queue, "
                f"asked for {asked}.",
            )
            return redirect("io-fill-pass", slug=project.slug)
    try:
        plan = fill_pass_plan(project=project)
    except FillPassRefused as exc:
        plan, errors, status = None, {**exc.errors, **errors}, max(status, 400)
    return render(
        request,
        "annotation/io/fill_pass.html",
        {
            "project": project,
            "plan": plan,
            "fields": [
                (f, field_label(f), (plan or {}).get("missing", {}).get(f, 0)) for f in (plan or {}).get("fields", [])
            ],
            "errors": errors,
        },
        status=status,
    )
