"""A project's audit trail page (researchers and admins): who did what, when; filtered by action,
actor and days, fifty events a page, with CSV and JSONL downloads of the filtered trail."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render
from django.views.decorators.http import require_GET

from ..audit.trail import (
    EXPORT_FORMATS,
    AuditFilterInvalid,
    AuditFilters,
    audit_actors,
    audit_details_text,
    audit_events,
    audit_filters_from,
)
from ..models import AuditAction, Role
from ..permissions import get_project_for

PER_PAGE = 50


@login_required
@require_GET
def project_audit(request, slug):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    errors: dict[str, str] = {}
    try:
        filters = audit_filters_from(request.GET)
    except AuditFilterInvalid as exc:
        errors, filters = exc.errors, AuditFilters()
    page = Paginator(audit_events(project=project, filters=filters), PER_PAGE).get_page(request.GET.get("page"))
    for event in page:
        # (a template cannot loop over a details dict that has an "items" key)
        event.details_text = audit_details_text(event.details)
    query = filters.as_query()
    return render(
        request,
        "annotation/io/audit.html",
        {
            "project": project,
            "page": page,
            "filters": filters,
            "errors": errors,
            "actions": AuditAction.choices,
            "actors": audit_actors(project=project),
            "query": urlencode(query),
            "exports": [
                (fmt, f"/api/projects/{project.slug}/audit/export/?{urlencode({**query, 'fmt': fmt})}")
                for fmt in EXPORT_FORMATS
            ],
        },
        status=400 if errors else 200,
    )
