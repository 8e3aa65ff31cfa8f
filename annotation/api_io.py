"""DRF endpoints for imports, releases and exports (researcher role), and a project overview.

Each view parses its input, checks the role through `annotation.permissions`, calls one service
and serializes the answer. Refused imports answer 400 with the "line N: field F: reason" list.
"""
from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from .importing import ImportRefused, annotations_import, items_import
from .importing.sources import copy_upload
from .models import Release, Role
from .permissions import get_project_for
from .releases import EXPORT_CONTENT_TYPES, EXPORT_FORMATS, ReleaseRefused, export_filename, release_export, release_freeze
from .views_io import project_overview_data, release_list_data


def import_media_root() -> Path:
    """Where media paths of an uploaded bare JSONL resolve (a zip carries its own media)."""
    root = Path(getattr(settings, "IMPORT_MEDIA_ROOT", None) or Path(settings.MEDIA_ROOT) / "incoming")
    root.mkdir(parents=True, exist_ok=True)
    return root


def run_upload(uploaded, run):
    """Spool an upload to a temporary file, call run(path), always delete the file."""
    name = (uploaded.name or "").lower()
    suffix = ".zip" if name.endswith(".zip") else ".jsonl"
    tmp = copy_upload(uploaded, Path(settings.CACHE_ROOT) / "uploads", suffix=suffix)
    try:
        return run(tmp)
    finally:
        tmp.unlink(missing_ok=True)


class UploadSerializer(serializers.Serializer):
    file = serializers.FileField()
    verified = serializers.BooleanField(default=False, required=False)


class ErrorListSerializer(serializers.Serializer):
    detail = serializers.CharField()
    error_count = serializers.IntegerField()
    errors = serializers.ListField(child=serializers.CharField(), help_text='"line N: field F: reason"')


class ReleaseSerializer(serializers.Serializer):
    version = serializers.CharField()
    split = serializers.CharField()
    item_count = serializers.IntegerField()
    checksum = serializers.CharField()
    created_at = serializers.DateTimeField()


class ProjectOverviewApi(APIView):
    """Counts per status and split, the user's role and the project's pages (any member)."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, slug):
        project = get_project_for(request.user, slug, Role.ANNOTATOR)
        return Response(project_overview_data(project=project, user=request.user))


class ItemImportApi(APIView):
    """POST a .jsonl or .zip of items (multipart field `file`; `verified` optional)."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request=UploadSerializer, responses={201: OpenApiTypes.OBJECT, 200: OpenApiTypes.OBJECT, 400: ErrorListSerializer})
    def post(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        data = UploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            report = run_upload(
                data.validated_data["file"],
                lambda path: items_import(
                    project=project, path=path, media_root=import_media_root(), verified=data.validated_data["verified"]
                ),
            )
        except ImportRefused as exc:
            return Response(exc.as_dict(), status=status.HTTP_400_BAD_REQUEST)
        return Response(report.as_dict(), status=status.HTTP_201_CREATED if report.created else status.HTTP_200_OK)


class AnnotationImportApi(APIView):
    """POST a .jsonl of ratings (oscbench) or blind QA answers (visualtrans, m3verse)."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request=UploadSerializer, responses={201: OpenApiTypes.OBJECT, 200: OpenApiTypes.OBJECT, 400: ErrorListSerializer})
    def post(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        data = UploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            report = run_upload(data.validated_data["file"], lambda path: annotations_import(project=project, path=path))
        except ImportRefused as exc:
            return Response(exc.as_dict(), status=status.HTTP_400_BAD_REQUEST)
        return Response(report.as_dict(), status=status.HTTP_201_CREATED if report.created else status.HTTP_200_OK)


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
    """GET the release streamed as ?fmt=json (default), jsonl or zip (with media).

    (`fmt`, not `format`: DRF reserves ?format= for choosing its renderer.)
    """

    @extend_schema(
        parameters=[OpenApiParameter("fmt", str, enum=list(EXPORT_FORMATS), description="json (default), jsonl or zip")],
        responses={(200, "application/json"): OpenApiTypes.BINARY},
    )
    def get(self, request, slug, version):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        release = get_object_or_404(Release.objects.select_related("project"), project=project, version=version)
        fmt = request.query_params.get("fmt", "json")
        if fmt not in EXPORT_FORMATS:
            return Response({"detail": f"fmt must be one of {', '.join(EXPORT_FORMATS)}"}, status=400)
        return streaming_export(release, fmt)


def streaming_export(release: Release, fmt: str) -> StreamingHttpResponse:
    response = StreamingHttpResponse(release_export(release, fmt), content_type=EXPORT_CONTENT_TYPES[fmt])
    response["Content-Disposition"] = f'attachment; filename="{export_filename(release, fmt)}"'
    response["X-Release-Checksum"] = release.checksum
    return response
