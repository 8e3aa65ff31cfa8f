"""A project's labelling pass over the API (its researchers and admins; annotation/fill_pass.py):
GET what a pass would ask and of how many items; POST {"fields": [...]} (optional: all the
protocol's fill fields) starts one.

Errors: 400 {"detail", "errors": {field: message}} for a protocol with no fill fields or fields it
does not fill; 409 when no verified item lacks them; 404 for a project the caller may not see, 403
for a role too low. Nothing changes on any of them.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import APIView

from ..fill_pass import FillPassRefused, fill_pass_plan, fill_pass_start
from ..models import Role
from ..permissions import get_project_for
from .members import ErrorOut

REFUSALS = {400: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut}


def refused(exc: FillPassRefused) -> Response:
    return Response({"detail": str(exc), "errors": exc.errors}, status=exc.status)


class FillPassApi(APIView):
    parser_classes = [JSONParser]

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "FillPassInput"

        fields = serializers.JSONField(
            required=False, help_text="the label fields to ask (default: every field the protocol's passes fill)"
        )

    @extend_schema(
        responses={200: OpenApiTypes.OBJECT, **REFUSALS},
        summary="What a labelling pass would ask, and of how many verified items",
    )
    def get(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        try:
            return Response(fill_pass_plan(project=project))
        except FillPassRefused as exc:
            return refused(exc)

    @extend_schema(
        request=InputSerializer,
        responses={201: OpenApiTypes.OBJECT, **REFUSALS},
        summary="Start a labelling pass: verified items lacking the fields go back to the annotators",
    )
    def post(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        data = request.data if isinstance(request.data, dict) else None
        if data is None:
            return refused(FillPassRefused({"body": 'Expected a JSON object, e.g. {"fields": [...]}.'}))
        unknown = sorted(set(data) - {"fields"})
        if unknown:
            return refused(FillPassRefused({name: "Unknown field; expected only 'fields'." for name in unknown}))
        try:
            report = fill_pass_start(project=project, actor=request.user, fields=data.get("fields"))
        except FillPassRefused as exc:
            return refused(exc)
        return Response(report, status=status.HTTP_201_CREATED)
