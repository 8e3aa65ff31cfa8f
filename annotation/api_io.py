"""DRF endpoints for imports, releases and exports (researcher role), and a project overview.

Each view parses its input, checks the role through `annotation.permissions`, calls one service
and serializes the answer. Refused imports answer 400 with the "line N: field F: reason" list.
"""
from __future__ import annotations

from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from .importing.runs import import_run_data, import_run_queue
from .models import ImportKind, ImportRun, Release, Role
from .permissions import get_project_for
from .releases import EXPORT_CONTENT_TYPES, EXPORT_FORMATS, ReleaseRefused, export_filename, release_export, release_freeze
from .views_io import project_overview_data, release_list_data


class UploadSerializer(serializers.Serializer):
    file = serializers.FileField()
    verified = serializers.BooleanField(default=False, required=False)


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


class ImportRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.CharField()
    kind = serializers.ChoiceField(choices=ImportKind.choices)
    verified = serializers.BooleanField()
    file_name = serializers.CharField()
    file_bytes = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["queued", "running", "finished", "refused", "failed"])
    done = serializers.BooleanField()
    report = serializers.DictField(allow_null=True, help_text="the importer's counts once finished")
    error_count = serializers.IntegerField()
    errors = serializers.ListField(child=serializers.CharField(), help_text='"line N: field F: reason" when refused')
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    url = serializers.CharField(help_text="poll this until done")
    page = serializers.CharField()


def queued(run: ImportRun) -> Response:
    response = Response(import_run_data(run), status=status.HTTP_202_ACCEPTED)
    response["Location"] = f"/api/imports/{run.pk}/"
    return response


class ItemImportApi(APIView):
    """POST a .jsonl or .zip of items (multipart field `file`; `verified` optional): a worker
    imports it; 202 with the run to poll. GET lists the project's recent import runs."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(responses=ImportRunSerializer(many=True))
    def get(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        runs = ImportRun.objects.filter(project=project).select_related("project", "created_by")[:50]
        return Response([import_run_data(run) for run in runs])

    @extend_schema(request=UploadSerializer, responses={202: ImportRunSerializer})
    def post(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        data = UploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return queued(import_run_queue(project=project, user=request.user, uploaded=data.validated_data["file"],
                                       kind=ImportKind.ITEMS, verified=data.validated_data["verified"]))


class AnnotationImportApi(APIView):
    """POST a .jsonl of ratings (oscbench) or blind QA answers (visualtrans, m3verse): a worker
    imports it; 202 with the run to poll."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request=UploadSerializer, responses={202: ImportRunSerializer})
    def post(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        data = UploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return queued(import_run_queue(project=project, user=request.user, uploaded=data.validated_data["file"],
                                       kind=ImportKind.ANNOTATIONS))


class ImportRunApi(APIView):
    """GET one import run: status, then the report or the refusal ("line N: field F: reason")."""

    @extend_schema(responses=ImportRunSerializer)
    def get(self, request, run_id: int):
        run = get_object_or_404(ImportRun.objects.select_related("project", "created_by"), pk=run_id)
        get_project_for(request.user, run.project.slug, Role.RESEARCHER)
        return Response(import_run_data(run))


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
