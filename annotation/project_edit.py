"""Changing a project's settings in the app (its admins, on the project's Settings page): its name,
description, annotations per item and every key of Project.settings its protocol reads, each checked
by the rule the create path and the admin's project form use (project_setup.SETTING_RULES). The
disagreement thresholds have their own form and service (project_setup.project_thresholds_set),
which re-marks the items waiting for review.

All or nothing: a bad value refuses the whole change (SetupInvalid naming each field) and nothing is
written; a change is recorded in the audit trail with each field's value before and after.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import transaction

from .audit.record import audit_record
from .models import AuditAction, Project
from .project_setup import DEFAULT_LEASE_SECONDS, MAX_ANNOTATIONS_PER_ITEM, SETTING_RULES, SetupInvalid, _whole

MAX_DESCRIPTION = 5000
# The keys of Project.settings this page sets, in the order it shows them (the thresholds have
# their own form); a key shows only for the protocols that read it (SettingRule.protocols).
EDITED_KEYS = (
    "gold_share",
    "lease_seconds",
    "auto_verify",
    "suggestions",
    "multiple",
    "rubric",
    "state_labels",
    "license",
    "citation",
)
# What each key is when the project does not say (its reader's default; None: nothing, or the
# protocol's own default, as for "multiple").
DEFAULTS: dict[str, Any] = {
    "gold_share": 0,
    "lease_seconds": DEFAULT_LEASE_SECONDS,
    "auto_verify": False,
    "suggestions": True,
    "multiple": None,
    "rubric": None,
    "state_labels": None,
    "license": None,
    "citation": None,
}
# Keys given as JSON on a form (an object: criterion -> text, object -> state labels).
JSON_KEYS = ("rubric", "state_labels")


def edited_keys(project: Project) -> tuple[str, ...]:
    """The settings keys the page offers for this project: those its protocol's code reads."""
    return tuple(key for key in EDITED_KEYS if project.protocol in SETTING_RULES[key].protocols)


def _from_form(key: str, value: Any) -> Any:
    """A form's text for `key` as its check takes it: empty is "the default" (None); a rubric or
    state labels starting with "{" is read as JSON (a rubric may also be one plain text)."""
    if isinstance(value, str):
        value = value.strip()
        if value == "":
            return None
        if key in JSON_KEYS and value.startswith(("{", "[")):
            try:
                return json.loads(value)
            except ValueError as exc:
                raise SetupInvalid({key: f"Not valid JSON ({exc.msg}, line {exc.lineno})."}) from None
    return value


def _settings_clean(project: Project, values: dict[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    """The settings `values` give (None: back to the default, so the key is dropped)."""
    clean: dict[str, Any] = {}
    keys = edited_keys(project)
    for key, given in values.items():
        if key not in keys:
            errors[key] = f"Not a setting of {project.protocol} projects on this page."
            continue
        try:
            given = _from_form(key, given)
        except SetupInvalid as exc:
            errors.update(exc.errors)
            continue
        if given is None:
            clean[key] = None
            continue
        before = len(errors)
        value = SETTING_RULES[key].clean(given, errors)
        if len(errors) == before:
            clean[key] = value
    return clean


@transaction.atomic
def project_update(*, project: Project, actor, values: dict[str, Any]) -> dict[str, Any]:
    """Set what `values` names: "name", "description", "annotations_per_item" (raised only: items
    already holding as many annotations as a lower number would wait for more forever) and settings
    keys of edited_keys(project) (None or an empty text: back to the default). Raises SetupInvalid
    naming each bad field (nothing written). Returns {"changes": {field: {"before", "after"}}}."""
    # One change at a time, and none lost to a threshold change saved meanwhile: the row is read
    # again under its lock and only the fields given here change (NO KEY UPDATE, as the thresholds).
    project = Project.objects.select_for_update(no_key=True).get(pk=project.pk)
    values = dict(values)
    errors: dict[str, str] = {}
    fields: dict[str, Any] = {}
    if "name" in values:
        name = values.pop("name")
        name = name.strip() if isinstance(name, str) else ""
        if not name or len(name) > 200:
            errors["name"] = "A name of 1 to 200 characters."
        fields["name"] = name
    if "description" in values:
        description = values.pop("description")
        description = description.strip() if isinstance(description, str) else None
        if description is None or len(description) > MAX_DESCRIPTION:
            errors["description"] = f"A text of at most {MAX_DESCRIPTION} characters."
        fields["description"] = description
    if "annotations_per_item" in values:
        given = values.pop("annotations_per_item")
        per_item = _whole(given, "annotations_per_item", 1, MAX_ANNOTATIONS_PER_ITEM, errors)
        if per_item is not None and per_item < project.annotations_per_item:
            errors["annotations_per_item"] = (
                f"It can be raised, not lowered (now {project.annotations_per_item}): items that already hold "
                "as many annotations as the lower number would wait for more forever."
            )
        fields["annotations_per_item"] = per_item
    settings_given = _settings_clean(project, values, errors)
    if errors:
        raise SetupInvalid(errors)

    stored = dict(project.settings) if isinstance(project.settings, dict) else {}
    settings = dict(stored)
    for key, value in settings_given.items():
        if value is None:
            settings.pop(key, None)
        elif key in stored or value != DEFAULTS[key]:  # a default the project does not state stays unstated
            settings[key] = value
    changes = {
        name: {"before": getattr(project, name), "after": value}
        for name, value in fields.items()
        if getattr(project, name) != value
    }
    changes.update(
        {
            f"settings.{key}": {"before": stored.get(key), "after": settings.get(key)}
            for key in settings_given
            if stored.get(key) != settings.get(key)
        }
    )
    if not changes:
        return {"changes": {}}
    for name, value in fields.items():
        setattr(project, name, value)
    project.settings = settings
    project.save(update_fields=[*fields, "settings"])
    audit_record(
        action=AuditAction.PROJECT_SETTINGS,
        actor=actor,
        project=project,
        obj=project,
        details={"changes": changes, "via": "settings page"},
    )
    return {"changes": changes}
