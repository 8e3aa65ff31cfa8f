"""An annotator's own recent work (annotation/amend.py): their submissions in a project, one of
them with its item as the annotate page shows it, and amending it while the item is not reviewed.

Another person's annotation is never found (404, superusers included: it is the annotator's own
history, not a review tool). Errors as in annotation/apis/work.py: 400 with the fields to fix, 409
when the item was reviewed already.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from ..amend import annotation_amend, own_annotation_for_amending, own_recent_annotations
from ..models import Annotation, Role
from ..permissions import get_project_for, require_role
from ..queue import TaskNotFound
from ..selectors import annotation_view
from .work import AnnotationOut, ErrorOut, WorkApi, _parse

RecentOut = inline_serializer(
    "OwnRecentAnnotation",
    many=True,
    fields={
        "id": serializers.IntegerField(),
        "item": serializers.IntegerField(),
        "submitted_at": serializers.DateTimeField(),
        "revisions": serializers.IntegerField(help_text="How many times it was amended."),
        "summary": serializers.CharField(),
        "amendable": serializers.BooleanField(),
        "amend_url": serializers.CharField(),
    },
)


def _own_project(request, annotation_id: int):
    """The project of the caller's own annotation, where they must still annotate (404 otherwise)."""
    annotation = (
        Annotation.objects.filter(pk=annotation_id, annotator=request.user).select_related("item__project").first()
        if request.user.is_authenticated
        else None
    )
    if annotation is None:
        raise TaskNotFound("No such annotation of yours.")
    require_role(request.user, annotation.item.project, Role.ANNOTATOR)
    return annotation.item.project


class OwnRecentApi(WorkApi):
    @extend_schema(responses={200: RecentOut}, summary="Your own recent annotations here, newest first")
    def get(self, request, slug):
        project = get_project_for(request.user, slug, Role.ANNOTATOR)
        return Response(own_recent_annotations(user=request.user, project=project))


class OwnAnnotationApi(WorkApi):
    @extend_schema(
        responses={200: OpenApiTypes.OBJECT, 404: ErrorOut},
        summary="One of your annotations with its item (annotator-safe), for amending",
    )
    def get(self, request, annotation_id):
        _own_project(request, annotation_id)
        return Response(own_annotation_for_amending(user=request.user, annotation_id=annotation_id))


class AmendApi(WorkApi):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "AmendInput"

        result = serializers.JSONField()
        time_spent_ms = serializers.IntegerField(min_value=0, max_value=24 * 3600 * 1000, required=False, default=0)

    @extend_schema(
        request=InputSerializer,
        summary="Amend your annotation while its item is not reviewed",
        responses={200: AnnotationOut, 400: ErrorOut, 404: ErrorOut, 409: ErrorOut},
    )
    def post(self, request, annotation_id):
        _own_project(request, annotation_id)
        data = _parse(self.InputSerializer, request.data)
        amended = annotation_amend(
            annotation_id=annotation_id, user=request.user, result=data["result"], time_spent_ms=data["time_spent_ms"]
        )
        return Response(
            {**annotation_view(annotation=amended.annotation, warnings=amended.warnings), "changed": amended.changed}
        )
