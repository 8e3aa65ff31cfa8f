"""Creating a project in the app (page and API): its protocol, annotations per item and the
workflow settings of Project.settings, checked field by field; the creator becomes its admin.

Who may create one is annotation.permissions.can_create_projects.
"""
from __future__ import annotations

import math
import re
from typing import Any

from django.db import IntegrityError, transaction

from .audit import audit_record
from .models import AuditAction, Membership, Project, Protocol, Role, default_annotations_per_item
from .queue.rules import DEFAULT_LEASE_SECONDS

# Paths under /projects/ that are pages, not projects.
RESERVED_SLUGS = {"new"}
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
MAX_ANNOTATIONS_PER_ITEM = 50
LEASE_RANGE = (60, 24 * 3600)
MAX_RUBRIC = 5000


class SetupInvalid(ValueError):
    """Input refused before anything is written; `errors` maps a field to a message."""

    def __init__(self, errors: dict[str, str]):
        self.errors = dict(errors)
        super().__init__("; ".join(f"{k}: {v}" for k, v in self.errors.items()))


def _whole(value: Any, name: str, low: int, high: int, errors: dict[str, str]) -> int | None:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        errors[name] = f"A whole number from {low} to {high}."
        return None
    return value


def _share(value: Any, errors: dict[str, str]) -> float | None:
    try:
        share = float(value) if not isinstance(value, bool) else None
    except (TypeError, ValueError):
        share = None
    if share is None or not math.isfinite(share) or not 0 <= share <= 1:
        errors["gold_share"] = "A share from 0 to 1 (e.g. 0.1 for one claim in ten)."
        return None
    return share


def _flag(value: Any, name: str, errors: dict[str, str]) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "on", "1", "yes", "false", "off", "0", "no", ""):
        return value.lower() in ("true", "on", "1", "yes")
    errors[name] = "true or false."
    return None


def project_settings_clean(*, protocol: str, gold_share: Any = 0, suggestions: Any = True,
                           lease_seconds: Any = DEFAULT_LEASE_SECONDS, rubric: Any = "",
                           errors: dict[str, str]) -> dict:
    """The settings object a new project stores (keys as documented on Project.settings)."""
    out: dict[str, Any] = {}
    share = _share(gold_share if gold_share not in (None, "") else 0, errors)
    if share:
        out["gold_share"] = share
    lease = _whole(lease_seconds if lease_seconds not in (None, "") else DEFAULT_LEASE_SECONDS,
                   "lease_seconds", *LEASE_RANGE, errors)
    if lease is not None:
        out["lease_seconds"] = lease
    shown = _flag(suggestions if suggestions is not None else True, "suggestions", errors)
    if shown is False and protocol in (Protocol.STATUS, Protocol.VISUALTRANS, Protocol.M3VERSE):
        out["suggestions"] = False  # only quintuplet and QA forms offer suggestions
    text = rubric if rubric is not None else ""
    if not isinstance(text, str):
        errors["rubric"] = "The rubric is one text."
    elif text.strip():
        if protocol != Protocol.OSCBENCH:
            errors["rubric"] = "A rubric is for video rating (OSCBench) projects only."
        elif len(text) > MAX_RUBRIC:
            errors["rubric"] = f"At most {MAX_RUBRIC} characters."
        else:
            out["rubric"] = text.strip()
    return out


@transaction.atomic
def project_create(*, user, name: Any, slug: Any, protocol: Any, annotations_per_item: Any = None,
                   gold_share: Any = 0, suggestions: Any = True, lease_seconds: Any = DEFAULT_LEASE_SECONDS,
                   rubric: Any = "", description: Any = "") -> Project:
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
    if protocol not in Protocol.values:
        errors["protocol"] = f"One of: {', '.join(Protocol.values)}."
        protocol = ""
    per_item = None
    if annotations_per_item not in (None, ""):
        per_item = _whole(annotations_per_item, "annotations_per_item", 1, MAX_ANNOTATIONS_PER_ITEM, errors)
    if description is not None and not isinstance(description, str):
        errors["description"] = "A text."
    settings = project_settings_clean(protocol=protocol, gold_share=gold_share, suggestions=suggestions,
                                      lease_seconds=lease_seconds, rubric=rubric, errors=errors)
    if errors:
        raise SetupInvalid(errors)
    try:
        with transaction.atomic():
            project = Project.objects.create(
                name=name, slug=slug, protocol=protocol, settings=settings, description=(description or "").strip(),
                annotations_per_item=per_item or default_annotations_per_item(protocol))
    except IntegrityError:  # the same slug, created a moment ago by someone else
        raise SetupInvalid({"slug": f"A project '{slug}' exists already."}) from None
    Membership.objects.create(project=project, user=user, role=Role.ADMIN)
    audit_record(action=AuditAction.PROJECT_CREATE, actor=user, project=project, obj=project,
                 details={"protocol": protocol, "annotations_per_item": project.annotations_per_item,
                          "settings": settings, "creator_role": Role.ADMIN})
    return project
