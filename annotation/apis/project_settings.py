"""A project's disagreement thresholds over the API (its researchers and admins): read them, and
set those of its workflow (re-marks the items waiting for review; recorded in the audit trail).

Errors: 400 {"detail", "errors": {field: message}} for a bad or foreign threshold (nothing
changes), 404 for a project the caller may not see, 403 for a role too low.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import APIView

from ..disagreement import THRESHOLDS_OF_WORKFLOW, thresholds_from
from ..models import Role
from ..permissions import get_project_for
from ..project_setup import SetupInvalid, project_thresholds_set
from .members import ErrorOut, bad_request

REFUSALS = {400: ErrorOut, 403: ErrorOut, 404: ErrorOut}


def thresholds_out(project) -> dict:
    return {
        "workflow": project.workflow,
        "settable": list(THRESHOLDS_OF_WORKFLOW[project.workflow]),
        "thresholds": thresholds_from(project.settings, project=project.slug).as_dict(),
    }


class ProjectThresholdsApi(APIView):
    parser_classes = [JSONParser]

    class InputSerializer(serializers.Serializer):
        """Any of the workflow's thresholds; disagreement.thresholds_clean checks the values."""

        class Meta:
            ref_name = "DisagreementThresholdsInput"

        rating_spread = serializers.JSONField(required=False, help_text="rating: a whole number from 1 to 4")
        box_iou = serializers.JSONField(required=False, help_text="box: above 0 and at most 1")
        quintuplet_fields = serializers.JSONField(required=False, help_text="quintuplet: one or more of the six fields")

    @extend_schema(
        responses={200: OpenApiTypes.OBJECT, **REFUSALS},
        summary="The project's disagreement thresholds (and which its workflow lets you set)",
    )
    def get(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        return Response(thresholds_out(project))

    @extend_schema(
        request=InputSerializer,
        responses={200: OpenApiTypes.OBJECT, **REFUSALS},
        summary="Set disagreement thresholds; the items waiting for review are marked again",
    )
    def patch(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        data = request.data if isinstance(request.data, dict) else None
        if data is None:
            return bad_request({"body": "A JSON object of thresholds."})
        unknown = sorted(set(data) - set(self.InputSerializer().fields))
        if unknown:
            return bad_request({name: "Not a disagreement threshold." for name in unknown})
        if not data:
            return bad_request(
                {"body": f"Give one of: {', '.join(THRESHOLDS_OF_WORKFLOW[project.workflow]) or 'nothing (QA)'}."}
            )
        try:
            outcome = project_thresholds_set(project=project, actor=request.user, values=dict(data))
        except SetupInvalid as exc:
            return bad_request(exc.errors)
        project.refresh_from_db(fields=["settings"])
        return Response(
            {
                **thresholds_out(project),
                "changed": outcome["changed"],
                "items_remarked": outcome["items_remarked"],
                "items_marked": outcome["items_marked"],
            }
        )
