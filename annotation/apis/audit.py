"""A project's audit trail through the API (researchers and admins): the events, filtered and
paged, and the same as a CSV or JSONL download."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from ..audit.trail import (
    EXPORT_FORMATS,
    AuditFilterInvalid,
    audit_event_data,
    audit_events,
    audit_export,
    audit_filters_from,
)
from ..models import AuditAction, Role
from ..permissions import get_project_for

FILTERS = [
    OpenApiParameter("action", str, enum=list(AuditAction.values), description="only this action"),
    OpenApiParameter("actor", str, description="only this username's events"),
    OpenApiParameter("since", OpenApiTypes.DATE, description="from this day (inclusive, UTC)"),
    OpenApiParameter("until", OpenApiTypes.DATE, description="to this day (inclusive, UTC)"),
]


class AuditEventSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    at = serializers.DateTimeField()
    actor = serializers.CharField(allow_null=True)
    action = serializers.ChoiceField(choices=AuditAction.choices)
    object_type = serializers.CharField()
    object_id = serializers.CharField(allow_blank=True)
    object = serializers.CharField(allow_blank=True)
    details = serializers.JSONField()


def _filtered(request, slug: str):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    return project, audit_events(project=project, filters=audit_filters_from(request.query_params))


def _refused(exc: AuditFilterInvalid) -> Response:
    return Response({"detail": str(exc), "errors": exc.errors}, status=400)


class AuditListApi(APIView):
    pagination_class = LimitOffsetPagination

    @extend_schema(
        parameters=FILTERS,
        responses={200: AuditEventSerializer(many=True), 400: OpenApiTypes.OBJECT},
        summary="The project's audit trail, newest first (filtered by action, actor, days)",
    )
    def get(self, request, slug: str):
        try:
            _project, events = _filtered(request, slug)
        except AuditFilterInvalid as exc:
            return _refused(exc)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(events, request, view=self)
        return paginator.get_paginated_response([audit_event_data(e) for e in page])


class AuditExportApi(APIView):
    """GET the filtered trail as ?fmt=csv (default) or jsonl, streamed as an attachment."""

    @extend_schema(
        parameters=[*FILTERS, OpenApiParameter("fmt", str, enum=list(EXPORT_FORMATS))],
        responses={(200, "text/csv"): OpenApiTypes.BINARY, 400: OpenApiTypes.OBJECT},
        summary="The project's audit trail as CSV or JSONL",
    )
    def get(self, request, slug: str):
        try:
            project, events = _filtered(request, slug)
        except AuditFilterInvalid as exc:
            return _refused(exc)
        fmt = request.query_params.get("fmt", "csv")
        if fmt not in EXPORT_FORMATS:
            return _refused(AuditFilterInvalid({"fmt": f"use one of {', '.join(EXPORT_FORMATS)}"}))
        content_type = "text/csv; charset=utf-8" if fmt == "csv" else "application/x-ndjson"
        response = StreamingHttpResponse(audit_export(events, fmt), content_type=content_type)
        response["Content-Disposition"] = f'attachment; filename="audit-{project.slug}.{fmt}"'
        return response
