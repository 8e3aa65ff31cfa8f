"""A project's Settings page. Two forms:

- the project's settings (its admins; its researchers see them read only): name, description,
  annotations per item and every workflow setting its protocol reads (gold share, lease,
  suggestions, auto-verify, rubric, ...), saved all or nothing and audited (project_edit.py);
- the disagreement thresholds of its workflow (its researchers and admins), which mark annotated
  items for adjudication (annotation/disagreement.py). Saving re-marks the items waiting for review
  and is recorded in the audit trail (project_setup.project_thresholds_set).

A POST names its form in `form` ("project" or "thresholds"; none: the thresholds, as before the
project form existed)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from ..agreement import QUINTUPLET_FIELDS
from ..disagreement import FIELD_LABELS, THRESHOLDS_OF_WORKFLOW, thresholds_from
from ..models import Role
from ..permissions import get_project_for, has_role, require_role
from ..project_edit import DEFAULTS, JSON_KEYS, edited_keys, project_update
from ..project_setup import LEASE_RANGE, SetupInvalid, project_setting, project_thresholds_set

FLAGS = ("auto_verify", "suggestions")  # checkboxes: absent from a POST means off


def _posted(request, names: tuple[str, ...]) -> dict:
    values = {name: request.POST.get(name, "") for name in names if name != "quintuplet_fields"}
    if "quintuplet_fields" in names:
        values["quintuplet_fields"] = request.POST.getlist("quintuplet_fields")  # none ticked: refused, not ignored
    return values


def _shown(key: str, value) -> object:
    """A stored setting as its form field shows it (an object as indented JSON)."""
    if value is None:
        return ""
    if key in JSON_KEYS and not isinstance(value, str):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return value


def _project_values(project) -> dict:
    """What the project form shows now: each field as the code reads it (a setting's default when
    the project does not say)."""
    values = {
        "name": project.name,
        "description": project.description,
        "annotations_per_item": project.annotations_per_item,
    }
    for key in edited_keys(project):
        values[key] = _shown(key, project_setting(project.settings, key, DEFAULTS[key], project=project.slug))
    return values


def _project_posted(request, project) -> dict:
    values = {name: request.POST.get(name, "") for name in ("name", "description", "annotations_per_item")}
    for key in edited_keys(project):
        values[key] = request.POST.get(key) == "on" if key in FLAGS else request.POST.get(key, "")
    return values


def _save_project(request, project):
    """The project form's POST (its admins): the page again with the errors, or a redirect."""
    require_role(request.user, project, Role.ADMIN)
    values = _project_posted(request, project)
    try:
        outcome = project_update(project=project, actor=request.user, values=values)
    except SetupInvalid as exc:
        return {**_project_values(project), **values}, exc.errors
    if outcome["changes"]:
        names = ", ".join(name.removeprefix("settings.").replace("_", " ") for name in outcome["changes"])
        messages.success(request, f"Saved: {names}.")
    else:
        messages.info(request, "Nothing changed: these are the settings already set.")
    return None, {}


def _save_thresholds(request, project, names, current):
    values = _posted(request, names)
    try:
        outcome = project_thresholds_set(project=project, actor=request.user, values=values)
    except SetupInvalid as exc:
        return {**current, **values}, exc.errors
    if outcome["changed"]:
        messages.success(
            request,
            f"Thresholds saved. {outcome['items_remarked']} item(s) waiting for review "
            f"were marked again: {outcome['items_marked']} now to adjudicate.",
        )
    else:
        messages.info(request, "Nothing changed: these are the thresholds already set.")
    return None, {}


@login_required
@require_http_methods(["GET", "POST"])
def project_settings(request, slug: str):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    names = THRESHOLDS_OF_WORKFLOW[project.workflow]
    current = thresholds_from(project.settings, project=project.slug).as_dict()
    values, errors = dict(current), {}
    project_values, project_errors = _project_values(project), {}
    if request.method == "POST":
        if request.POST.get("form") == "project":
            posted, project_errors = _save_project(request, project)
            project_values = posted or project_values
        else:
            posted, errors = _save_thresholds(request, project, names, current)
            values = posted or values
        if not (errors or project_errors):
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
            "may_edit_project": has_role(request.user, project, Role.ADMIN),
            "project_keys": edited_keys(project),
            "project_values": project_values,
            "project_errors": project_errors,
            "lease_range": LEASE_RANGE,
        },
        status=400 if errors or project_errors else 200,
    )
