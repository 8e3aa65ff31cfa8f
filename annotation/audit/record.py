"""The audit trail's one write: `audit_record`, called by the service that makes a change, inside
its transaction (so the event and the change commit or roll back together).

Who imported, verified, edited, discarded, froze, exported, launched, cancelled or retried what,
and when (docs/architecture.md, "Invariants"). Reading it is annotation/audit/trail.py.

Where a change came from, when not from a page or the API, is said by `audit_source`: the
management commands run inside `audit_source("cli")`, so their events carry details.source = "cli"
(with the --actor they were given, or with no actor at all).

A change made in the Django admin is described by `row_changes` (admin_site.AuditedAdmin): the
fields it changed, a JSON object field (an item's payload, a project's settings) by its changed
top-level keys.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models.fields.files import FieldFile

from ..models import AuditAction, AuditEvent, Project

CLI_SOURCE = "cli"
_source: ContextVar[str] = ContextVar("statelab_audit_source", default="")


@contextmanager
def audit_source(source: str) -> Iterator[None]:
    """Events recorded inside the block name `source` in their details (e.g. "cli")."""
    token = _source.set(source)
    try:
        yield
    finally:
        _source.reset(token)


def audit_record(
    *,
    action: str,
    actor=None,
    project: Project | None = None,
    obj: models.Model | None = None,
    object_type: str = "",
    object_repr: str = "",
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """Record one event. `obj` gives the object's type, id and text; without one, name it with
    `object_type` / `object_repr` (an import of a file, say). An anonymous or missing actor is
    recorded as none (a command run without --actor, a worker acting for nobody); inside
    `audit_source`, details.source says where the change came from."""
    if action not in AuditAction.values:
        raise ValueError(f"unknown audit action {action!r}")
    if actor is not None and not getattr(actor, "is_authenticated", False):
        actor = None
    details = dict(details or {})
    if _source.get():
        details.setdefault("source", _source.get())
    return AuditEvent.objects.create(
        actor=actor,
        actor_name=actor.get_username() if actor is not None else "",
        project=project,
        action=action,
        object_type=object_type or (obj._meta.label_lower if obj is not None else ""),
        object_id=str(obj.pk) if obj is not None and obj.pk is not None else "",
        object_repr=(object_repr or (str(obj) if obj is not None else ""))[:200],
        details=details,
    )


def row_values(obj: models.Model) -> dict[str, Any]:
    """The row's stored fields as JSON values (a relation as its id, a file as its name), leaving
    out its id and the timestamps Django keeps (auto_now)."""
    out = {}
    for field in obj._meta.concrete_fields:
        if field.primary_key or getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            continue
        value = field.value_from_object(obj)
        if isinstance(value, FieldFile):
            value = value.name or ""
        out[field.attname] = json.loads(json.dumps(value, cls=DjangoJSONEncoder))
    return out


def _change(before: dict, after: dict, key: str) -> dict[str, Any]:
    """{"before", "after"}, a side left out where the key is absent."""
    return {**({"before": before[key]} if key in before else {}), **({"after": after[key]} if key in after else {})}


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)  # true is not 1 here


def row_changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What changed between two row_values of one row: field -> {"before", "after"}; a field whose
    value is a JSON object on both sides as {key: {"before", "after"}} of its changed top-level
    keys (a side left out where the key is absent). Empty when nothing changed."""
    changes: dict[str, Any] = {}
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        if name in before and name in after and _same(old, new):
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            changes[name] = {
                key: _change(old, new, key)
                for key in sorted(set(old) | set(new), key=str)
                if key not in old or key not in new or not _same(old[key], new[key])
            }
        else:
            changes[name] = _change(before, after, name)
    return changes
