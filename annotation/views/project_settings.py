"""A project's settings page (its researchers): the disagreement thresholds of its workflow, which
mark annotated items for adjudication (annotation/disagreement.py). Saving re-marks the items
waiting for review and is recorded in the audit trail (project_setup.project_thresholds_set)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from ..agreement import QUINTUPLET_FIELDS
from ..disagreement import FIELD_LABELS, THRESHOLDS_OF_WORKFLOW, thresholds_from
from ..models import Role
from ..permissions import get_project_for
from ..project_setup import SetupInvalid, project_thresholds_set


def _posted(request, names: tuple[str, ...]) -> dict:
    values = {name: request.POST.get(name, "") for name in names if name != "quintuplet_fields"}
    if "quintuplet_fields" in names:
        values["quintuplet_fields"] = request.POST.getlist("quintuplet_fields")  # none ticked: refused, not ignored
    return values


@login_required
@require_http_methods(["GET", "POST"])
def project_settings(request, slug: str):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    names = THRESHOLDS_OF_WORKFLOW[project.workflow]
    current = thresholds_from(project.settings, project=project.slug).as_dict()
    values, errors = dict(current), {}
    if request.method == "POST":
        values = _posted(request, names)
        try:
            outcome = project_thresholds_set(project=project, actor=request.user, values=values)
        except SetupInvalid as exc:
            errors = exc.errors
            values = {**current, **values}
        else:
            if outcome["changed"]:
                messages.success(
                    request,
                    f"Thresholds saved. {outcome['items_remarked']} item(s) waiting for review "
                    f"were marked again: {outcome['items_marked']} now to adjudicate.",
                )
            else:
                messages.info(request, "Nothing changed: these are the thresholds already set.")
            return redirect("io-project-settings", slug=project.slug)
    return render(
        request,
        "annotation/io/project_settings.html",
        {
            "project": project,
            "names": names,
            "values": values,
            "errors": errors,
            "quintuplet_fields": [
                (f, FIELD_LABELS["quintuplet"][f], f in (values.get("quintuplet_fields") or []))
                for f in QUINTUPLET_FIELDS
            ],
        },
        status=400 if errors else 200,
    )
