"""Reading the audit trail (annotation/audit/record.py writes it): a project's events filtered by action,
actor and date range, as rows for the page and the API, and as a CSV or JSONL export.

Researchers and admins of the project read it (annotation/views/audit.py, apis/audit.py).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.utils import timezone

from protocols.kit.csv_cells import csv_writer

from ..models import AuditAction, AuditEvent, Project

EXPORT_FORMATS = ("csv", "jsonl")
EXPORT_COLUMNS = ("at", "actor", "action", "object_type", "object_id", "object", "details")


class AuditFilterInvalid(ValueError):
    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class AuditFilters:
    action: str = ""
    actor: str = ""  # a username
    since: date | None = None  # inclusive
    until: date | None = None  # inclusive

    def as_query(self) -> dict[str, str]:
        """The filters as query parameters (pagination and export links keep them)."""
        out = {
            "action": self.action,
            "actor": self.actor,
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
        }
        return {k: v for k, v in out.items() if v}


def _day(params, name: str, errors: dict) -> date | None:
    raw = (params.get(name) or "").strip()
    if not raw:
        return None
    try:
        return date.fromisoformat(raw)
    except ValueError:
        errors[name] = f"{raw[:40]!r} is not a date; use YYYY-MM-DD"
        return None


def audit_filters_from(params) -> AuditFilters:
    """Filters from query parameters (action, actor, since, until); AuditFilterInvalid names the bad ones."""
    errors: dict[str, str] = {}
    action = (params.get("action") or "").strip()
    if action and action not in AuditAction.values:
        errors["action"] = f"use one of {', '.join(AuditAction.values)}"
    actor = (params.get("actor") or "").strip()
    if len(actor) > 150 or "\x00" in actor:
        errors["actor"] = "not a username"
    since, until = _day(params, "since", errors), _day(params, "until", errors)
    if since and until and since > until:
        errors["until"] = "the range ends before it starts"
    if errors:
        raise AuditFilterInvalid(errors)
    return AuditFilters(action=action, actor=actor, since=since, until=until)


def _start_of(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min), timezone.get_current_timezone())


def audit_events(*, project: Project, filters: AuditFilters = AuditFilters()) -> QuerySet[AuditEvent]:
    """The project's events, newest first, filtered."""
    events = AuditEvent.objects.filter(project=project)
    if filters.action:
        events = events.filter(action=filters.action)
    if filters.actor:
        events = events.filter(actor_name=filters.actor)
    if filters.since:
        events = events.filter(at__gte=_start_of(filters.since))
    if filters.until:
        events = events.filter(at__lt=_start_of(filters.until + timedelta(days=1)))
    return events.order_by("-at", "-pk")


def audit_actors(*, project: Project) -> list[str]:
    """Everyone who appears in the project's trail, and its current researchers and admins (the
    page's actor filter offers them)."""
    named = set(
        AuditEvent.objects.filter(project=project)
        .exclude(actor_name="")
        .values_list("actor_name", flat=True)
        .distinct()
    )
    members = get_user_model().objects.filter(memberships__project=project).values_list("username", flat=True)
    return sorted(named | set(members))


def audit_event_data(event: AuditEvent) -> dict:
    return {
        "id": event.pk,
        "at": event.at.isoformat(),
        "actor": event.actor_name or None,
        "action": event.action,
        "object_type": event.object_type,
        "object_id": event.object_id,
        "object": event.object_repr,
        "details": event.details,
    }


def audit_details_text(details: dict) -> str:
    """The details as `key=value` words for the page (None values left out)."""
    return " ".join(
        f"{k}={json.dumps(v) if isinstance(v, (dict, list)) else v}"
        for k, v in (details or {}).items()
        if v is not None
    )


def audit_export(events: QuerySet[AuditEvent], fmt: str) -> Iterator[str]:
    """The events as CSV (a header row, details as JSON text) or JSONL, streamed in chunks."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(EXPORT_FORMATS)}")
    rows = (audit_event_data(e) for e in events.iterator(chunk_size=2000))
    if fmt == "jsonl":
        for row in rows:
            yield json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n"
        return
    buffer = io.StringIO()
    writer = csv_writer(buffer)  # no cell starts like a formula (protocols/kit/csv_cells.py)
    writer.writerow(EXPORT_COLUMNS)
    for row in rows:
        writer.writerow(
            [
                row["at"],
                row["actor"] or "",
                row["action"],
                row["object_type"],
                row["object_id"],
                row["object"],
                json.dumps(row["details"], ensure_ascii=False, sort_keys=True),
            ]
        )
        if buffer.tell() > 64 * 1024:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()
