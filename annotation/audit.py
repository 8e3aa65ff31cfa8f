"""The audit trail's one write: `audit_record`, called by the service that makes a change, inside
its transaction (so the event and the change commit or roll back together).

Who imported, verified, edited, discarded, froze, exported, launched, cancelled or retried what,
and when (issue 10, DESIGN.md's invariants). Reading it is annotation/audit_trail.py.
"""
from __future__ import annotations

from typing import Any

from django.db import models

from .models import AuditAction, AuditEvent, Project


def audit_record(*, action: str, actor=None, project: Project | None = None, obj: models.Model | None = None,
                 object_type: str = "", object_repr: str = "", details: dict[str, Any] | None = None) -> AuditEvent:
    """Record one event. `obj` gives the object's type, id and text; without one, name it with
    `object_type` / `object_repr` (an import of a file, say). An anonymous or missing actor is
    recorded as none (a command, a worker acting for nobody)."""
    if action not in AuditAction.values:
        raise ValueError(f"unknown audit action {action!r}")
    if actor is not None and not getattr(actor, "is_authenticated", False):
        actor = None
    return AuditEvent.objects.create(
        actor=actor,
        actor_name=actor.get_username() if actor is not None else "",
        project=project,
        action=action,
        object_type=object_type or (obj._meta.label_lower if obj is not None else ""),
        object_id=str(obj.pk) if obj is not None and obj.pk is not None else "",
        object_repr=(object_repr or (str(obj) if obj is not None else ""))[:200],
        details=details or {},
    )
