"""Creating a project in the app (page and API): its protocol, annotations per item and the
workflow settings of Project.settings, checked field by field; the creator becomes its admin.
Each Project.settings key is checked by its rule (setting_rules.py: SETTING_RULES and the
protocols' own keys; re-exported here for the callers that have always imported them from this
module). Changing a project's disagreement thresholds (the project settings page and API, and the
admin's project form, all checked by disagreement_setting_clean), which re-marks the items
waiting for review.

Who may create one is annotation.permissions.can_create_projects; the thresholds are its
researchers' (views/project_settings.py, apis/project_settings.py).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from django.db import IntegrityError, transaction

from protocols import registry

from .audit.record import audit_record
from .disagreement import THRESHOLDS_OF_WORKFLOW, thresholds_from
from .models import (
    AuditAction,
    Item,
    ItemStatus,
    Membership,
    Project,
    Role,
    default_annotations_per_item,
)
from .setting_rules import (  # noqa: F401 (re-exported: the settings' callers import them from here)
    DEFAULT_LEASE_SECONDS,
    LEASE_RANGE,
    SETTING_RULES,
    SettingRule,
    _whole,
    disagreement_setting_clean,
    gold_share_clean,
    lease_seconds_clean,
    project_setting,
    project_settings_check,
    rubric_clean,
    setting_rule,
    suggestions_clean,
)
from .verification import items_mark_disagreement, project_marking_lock

logger = logging.getLogger(__name__)

# Paths under /projects/ that are pages, not projects.
RESERVED_SLUGS = {"new"}
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
MAX_ANNOTATIONS_PER_ITEM = 50


class SetupInvalid(ValueError):
    """Input refused before anything is written; `errors` maps a field to a message."""

    def __init__(self, errors: dict[str, str]):
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


def project_settings_clean(
    *,
    protocol: str,
    gold_share: Any = 0,
    suggestions: Any = True,
    lease_seconds: Any = DEFAULT_LEASE_SECONDS,
    rubric: Any = "",
    errors: dict[str, str],
) -> dict:
    """The settings object a new project stores (keys as documented on Project.settings), each
    checked by its SETTING_RULES check; an empty form field is the default."""
    out: dict[str, Any] = {}
    share = gold_share_clean(gold_share if gold_share not in (None, "") else 0, errors)
    if share:
        out["gold_share"] = share
    lease = lease_seconds_clean(lease_seconds if lease_seconds not in (None, "") else DEFAULT_LEASE_SECONDS, errors)
    if lease is not None:
        out["lease_seconds"] = lease
    shown = suggestions_clean(suggestions if suggestions is not None else True, errors)
    if shown is False and protocol in SETTING_RULES["suggestions"].protocols:
        out["suggestions"] = False  # only quintuplet and QA forms offer suggestions
    text = rubric if rubric is not None else ""
    if not isinstance(text, str):
        errors["rubric"] = "The rubric is one text."
    elif text.strip():
        if protocol not in SETTING_RULES["rubric"].protocols:
            errors["rubric"] = (
                "A rubric is for video rating projects only ("
                f"{', '.join(registry.get(p).label for p in SETTING_RULES['rubric'].protocols)})."
            )
        elif (text := rubric_clean(text, errors)) is not None:
            out["rubric"] = text
    return out


@transaction.atomic
def project_create(
    *,
    user,
    name: Any,
    slug: Any,
    protocol: Any,
    annotations_per_item: Any = None,
    gold_share: Any = 0,
    suggestions: Any = True,
    lease_seconds: Any = DEFAULT_LEASE_SECONDS,
    rubric: Any = "",
    description: Any = "",
) -> Project:
    """Create a project with its settings and make `user` its admin. Raises SetupInvalid naming
    each bad field (nothing written). The caller checks can_create_projects."""
    errors: dict[str, str] = {}
    name = name.strip() if isinstance(name, str) else ""
    if not name or len(name) > 200:
        errors["name"] = "A name of 1 to 200 characters."
    slug = slug.strip() if isinstance(slug, str) else ""
    if not SLUG_RE.match(slug) or len(slug) > 80:
        errors["slug"] = "Lowercase letters, digits, '-' and '_' (up to 80), starting with a letter or digit."
    elif slug in RESERVED_SLUGS:
        errors["slug"] = f"'{slug}' is reserved; choose another."
    elif Project.objects.filter(slug=slug).exists():
        errors["slug"] = f"A project '{slug}' exists already."
    if protocol not in registry.names():
        errors["protocol"] = f"One of: {', '.join(registry.names())}."
        protocol = ""
    per_item = None
    if annotations_per_item not in (None, ""):
        per_item = _whole(annotations_per_item, "annotations_per_item", 1, MAX_ANNOTATIONS_PER_ITEM, errors)
    if description is not None and not isinstance(description, str):
        errors["description"] = "A text."
    settings = project_settings_clean(
        protocol=protocol,
        gold_share=gold_share,
        suggestions=suggestions,
        lease_seconds=lease_seconds,
        rubric=rubric,
        errors=errors,
    )
    if errors:
        raise SetupInvalid(errors)
    try:
        with transaction.atomic():
            project = Project.objects.create(
                name=name,
                slug=slug,
                protocol=protocol,
                settings=settings,
                description=(description or "").strip(),
                annotations_per_item=per_item or default_annotations_per_item(protocol),
            )
    except IntegrityError:  # the same slug, created a moment ago by someone else
        raise SetupInvalid({"slug": f"A project '{slug}' exists already."}) from None
    Membership.objects.create(project=project, user=user, role=Role.ADMIN)
    audit_record(
        action=AuditAction.PROJECT_CREATE,
        actor=user,
        project=project,
        obj=project,
        details={
            "protocol": protocol,
            "annotations_per_item": project.annotations_per_item,
            "settings": settings,
            "creator_role": Role.ADMIN,
        },
    )
    return project


def project_thresholds_changed(*, project: Project, actor, before: dict, set_values: dict, via: str = "") -> dict:
    """After the project's settings["disagreement"] changed (saved by the caller, in its
    transaction, which holds the project row: the caller's lock or its UPDATE; `before` is
    thresholds_from().as_dict() of the settings it replaced): when the thresholds in force changed,
    re-mark the items waiting for review; record the change in the audit trail. Returns
    {"thresholds", "items_remarked", "items_marked"}."""
    names = THRESHOLDS_OF_WORKFLOW[project.workflow]
    after = thresholds_from(project.settings, project=project.slug).as_dict()
    waiting: list[int] = []
    marked = 0
    if after != before:  # (a default written out explicitly changes what is stored, not what is marked)
        # Before listing them: a submit completing an item now either commits first (listed here)
        # or marks after this commits, under these thresholds (verification.py's marking lock).
        project_marking_lock(project=project)
        waiting = list(
            Item.objects.filter(project=project, status=ItemStatus.ANNOTATED, is_gold=False).values_list(
                "pk", flat=True
            )
        )
        marked = items_mark_disagreement(project=project, item_ids=waiting)
    changes = {name: {"before": before[name], "after": after[name]} for name in names if before[name] != after[name]}
    details = {"disagreement": changes, "set": set_values, "items_remarked": len(waiting), "items_marked": marked}
    audit_record(
        action=AuditAction.PROJECT_SETTINGS,
        actor=actor,
        project=project,
        obj=project,
        details={**details, "via": via} if via else details,
    )
    return {"thresholds": after, "items_remarked": len(waiting), "items_marked": marked}


@transaction.atomic
def project_thresholds_set(*, project: Project, actor, values: dict[str, Any]) -> dict:
    """Set the disagreement thresholds of the project's workflow (rating_spread, box_iou or
    quintuplet_fields; disagreement.thresholds_clean checks them) in settings["disagreement"].
    A change re-marks every item waiting for review with the new thresholds (verified and
    discarded items keep what they had) and is recorded in the audit trail; setting what is
    stored already changes nothing. A stored value the check refuses (read as its default) is
    dropped by a change. Raises SetupInvalid naming each bad field (nothing written).
    Returns {"changed", "thresholds", "items_remarked", "items_marked"}."""
    # One change at a time. NO KEY UPDATE: the key stays, so rows that refer to the project (audit
    # records, imported items) are not held up. Lock order: this row, the marking lock, the items
    # (verification.py's marking lock says why that cannot deadlock with a submit).
    project = Project.objects.select_for_update(no_key=True).get(pk=project.pk)
    clean, errors = disagreement_setting_clean(workflow=project.workflow, values=values)
    if errors:
        raise SetupInvalid(errors)
    stored = project.settings.get("disagreement")
    stored = dict(stored) if isinstance(stored, dict) else {}
    before = thresholds_from(project.settings, project=project.slug).as_dict()
    kept, _refused = disagreement_setting_clean(workflow=project.workflow, values=stored)
    wanted = {**kept, **clean}
    if wanted == stored:
        return {"changed": False, "thresholds": before, "items_remarked": 0, "items_marked": 0}
    project.settings = {**project.settings, "disagreement": wanted}
    project.save(update_fields=["settings"])
    outcome = project_thresholds_changed(project=project, actor=actor, before=before, set_values=clean)
    return {"changed": True, **outcome}
