"""Releases through the API (researchers): list, freeze, and the streamed export."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from ..interchange.authors import AuthorsExportError, authors_download_response, authors_export_formats
from ..models import Release, Role
from ..permissions import get_project_for
from ..releases import (
    ReleaseRefused,
    export_formats,
    release_download_response,
    release_freeze,
    release_list_data,
)


class ReleaseSerializer(serializers.Serializer):
    version = serializers.CharField()
    split = serializers.CharField()
    item_count = serializers.IntegerField()
    checksum = serializers.CharField()
    created_at = serializers.DateTimeField()


class ReleaseListApi(APIView):
    """GET the project's releases; POST {version, split} freezes a new one."""

    class InputSerializer(serializers.Serializer):
        version = serializers.CharField(max_length=50)
        split = serializers.CharField(max_length=50, default="test", required=False)

    @extend_schema(responses=ReleaseSerializer(many=True))
    def get(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        return Response(release_list_data(project=project))

    @extend_schema(request=InputSerializer, responses={201: ReleaseSerializer})
    def post(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            release = release_freeze(project=project, user=request.user, **data.validated_data)
        except ReleaseRefused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_400_BAD_REQUEST)
        return Response(
            {
                "version": release.version,
                "split": release.split,
                "item_count": release.item_count,
                "checksum": release.checksum,
                "created_at": release.created_at.isoformat(),
            },
            status=status.HTTP_201_CREATED,
        )


class ReleaseExportApi(APIView):
    """GET the release streamed as ?fmt=json (default), jsonl, zip (with media), and for box
    projects coco (COCO object-detection JSON) or coco_zip (with the images).

    (`fmt`, not `format`: DRF reserves ?format= for choosing its renderer.)
    """

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "fmt",
                str,
                description=(
                    "json (default), jsonl, zip, hf (a zipped Hugging Face dataset folder); coco or coco_zip for "
                    "box projects; or the name of one of the protocol's authors' formats that write "
                    "(a zip of the paper's own files, docs/importing.md)"
                ),
            )
        ],
        responses={(200, "application/json"): OpenApiTypes.BINARY},
    )
    def get(self, request, slug, version):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        release = get_object_or_404(Release.objects.select_related("project"), project=project, version=version)
        fmt = request.query_params.get("fmt", "json")
        authors = [f.name for f in authors_export_formats(project.protocol)]
        if fmt in authors:
            try:
                return authors_download_response(release, fmt, actor=request.user)
            except AuthorsExportError as exc:
                return Response({"detail": str(exc)}, status=400)
        allowed = [*export_formats(project.protocol), *authors]
        if fmt not in allowed:
            return Response({"detail": f"fmt must be one of {', '.join(allowed)}"}, status=400)
        return release_download_response(release, fmt, actor=request.user)
