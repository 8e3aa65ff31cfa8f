"""Imports through the API (researchers): the upload is staged and a worker imports it; 202 with
the run to poll. A refused import ends `refused` with its "line N: field F: reason" list.

Several item files in one request (the field `files`, or several `file` parts) are imported in
the request itself, all or nothing, in one transaction (annotation/importing/batch.py): 201 with
one finished run per file, or 400 naming every refused file with its reasons and nothing written;
413 when the files together are more than one request imports at once. A batch of one file in
`files` is the quick way to import a small file: no queue, no polling."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from ..importing.batch import BatchRefused, BatchTooLarge, items_import_batch
from ..importing.conversion import format_choices, format_refusal
from ..importing.runs import import_run_data, import_run_queue
from ..models import ImportKind, ImportRun, Role
from ..permissions import get_project_for

UPDATE_HELP = (
    "items whose id the project holds with other content take the file's content (a later release of the same "
    "file; counted as updated, with the fields that changed), in the same all-or-nothing import; otherwise such "
    "lines are refused"
)


class UploadSerializer(serializers.Serializer):
    file = serializers.FileField()
    verified = serializers.BooleanField(default=False, required=False)


class ItemUploadSerializer(UploadSerializer):
    format = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=100,
        help_text="read the file in this format: statelab (the project's own item lines) or one of the "
        "protocol's authors' formats (GET /api/projects/<slug>/imports/formats/); empty: detect it",
    )
    strict = serializers.BooleanField(
        default=False, required=False, help_text="refuse fields the protocol does not know instead of keeping them"
    )
    update = serializers.BooleanField(default=False, required=False, help_text=UPDATE_HELP)


class ItemImportOptionsSerializer(serializers.Serializer):
    """What a batch of files is imported with (the same for every file of the request)."""

    verified = serializers.BooleanField(default=False, required=False)
    format = serializers.CharField(required=False, allow_blank=True, max_length=100)
    strict = serializers.BooleanField(default=False, required=False)
    update = serializers.BooleanField(default=False, required=False, help_text=UPDATE_HELP)


class ItemImportRequestSerializer(ItemUploadSerializer):
    """The upload as documented: one `file` (queued, 202), or several files in `files` (or
    several `file` parts) imported in the request, all or nothing (201 / 400)."""

    file = serializers.FileField(required=False, help_text="one file, imported by a worker (202, poll the run)")
    files = serializers.ListField(
        child=serializers.FileField(),
        required=False,
        help_text="several files (or one), imported in this request in one transaction, all or nothing: 201 with "
        "a run per file, or 400 naming each refused file; together at most IMPORT_BATCH_MAX_BYTES",
    )


class ImportFormatSerializer(serializers.Serializer):
    name = serializers.CharField()
    label = serializers.CharField()


class ImportRunSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    project = serializers.CharField()
    kind = serializers.ChoiceField(choices=ImportKind.choices)
    verified = serializers.BooleanField()
    format = serializers.CharField(allow_null=True, help_text="the format the upload named; null: detected")
    strict = serializers.BooleanField()
    update = serializers.BooleanField(help_text="the upload asked existing items with other content to be updated")
    read_as = serializers.CharField(allow_null=True, help_text="the format the file was read as, once known")
    file_name = serializers.CharField()
    file_bytes = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["queued", "running", "finished", "refused", "failed"])
    done = serializers.BooleanField()
    report = serializers.DictField(
        allow_null=True,
        help_text="the importer's counts once finished; for items also the format read, its reader's notes and "
        "the fields kept that the protocol does not know",
    )
    error_count = serializers.IntegerField()
    errors = serializers.ListField(child=serializers.CharField(), help_text='"line N: field F: reason" when refused')
    progress = serializers.FloatField(
        allow_null=True,
        min_value=0,
        max_value=1,
        help_text="how far the worker has read the file: progress_bytes / progress_total; null until it has "
        "opened it; 1 once read through (storing media and committing may still follow)",
    )
    progress_bytes = serializers.IntegerField(help_text="bytes of the items file read so far, over every pass")
    progress_total = serializers.IntegerField(
        help_text="bytes to read in all: the items file's size (uncompressed, in a zip) times the importer's "
        "passes over it (items: 1; annotations: 2, validate then write); 0 until known"
    )
    created_by = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    url = serializers.CharField(help_text="poll this until done")
    page = serializers.CharField()


class FileRefusedSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="the file's place in the request, from 0")
    file_name = serializers.CharField()
    error_count = serializers.IntegerField()
    errors = serializers.ListField(child=serializers.CharField(), help_text='"line N: field F: reason"')
    read_as = serializers.CharField(allow_null=True)


class BatchImportSerializer(serializers.Serializer):
    all_or_nothing = serializers.BooleanField()
    files = serializers.IntegerField(help_text="files imported")
    created = serializers.IntegerField(help_text="items created over all the files")
    runs = ImportRunSerializer(many=True, help_text="one finished run per file, in the request's order")


class BatchRefusedSerializer(serializers.Serializer):
    detail = serializers.CharField()
    all_or_nothing = serializers.BooleanField()
    files = FileRefusedSerializer(many=True, help_text="every refused file of the request")


def queued(run: ImportRun) -> Response:
    response = Response(import_run_data(run), status=status.HTTP_202_ACCEPTED)
    response["Location"] = f"/api/imports/{run.pk}/"
    return response


class ItemImportApi(APIView):
    """POST a file of items (multipart field `file`; `verified`, `format`, `strict`, `update` optional): the
    project's own .jsonl, .json or .zip, or a file (a folder as a .zip) in one of the protocol's
    authors' formats; a worker imports it; 202 with the run to poll. Several files (field `files`,
    or several `file` parts) are imported in the request, all or nothing: 201 with a finished run
    per file, 400 naming each refused file. GET lists the project's recent import runs."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(responses=ImportRunSerializer(many=True))
    def get(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        runs = ImportRun.objects.filter(project=project).select_related("project", "created_by")[:50]
        return Response([import_run_data(run) for run in runs])

    @extend_schema(
        request=ItemImportRequestSerializer,
        responses={202: ImportRunSerializer, 201: BatchImportSerializer, 400: BatchRefusedSerializer},
    )
    def post(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        many, single = request.FILES.getlist("files"), request.FILES.getlist("file")
        if many and single:
            raise ValidationError({"files": ["send the files either in `files` or in `file`, not in both"]})
        if many or len(single) > 1:
            return self.batch(request, project, many or single)
        data = ItemUploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fmt = data.validated_data.get("format") or None
        if fmt is not None and (reason := format_refusal(project.protocol, fmt)):
            raise ValidationError({"format": [reason]})
        return queued(
            import_run_queue(
                project=project,
                user=request.user,
                uploaded=data.validated_data["file"],
                kind=ImportKind.ITEMS,
                verified=data.validated_data["verified"],
                format_name=fmt,
                strict=data.validated_data["strict"],
                update=data.validated_data["update"],
            )
        )

    def batch(self, request, project, uploads: list) -> Response:
        """Several files (or one in `files`): imported here, all or nothing."""
        options = ItemImportOptionsSerializer(data=request.data)
        options.is_valid(raise_exception=True)
        fmt = options.validated_data.get("format") or None
        if fmt is not None and (reason := format_refusal(project.protocol, fmt)):
            raise ValidationError({"format": [reason]})
        try:
            runs = items_import_batch(
                project=project,
                user=request.user,
                uploads=uploads,
                verified=options.validated_data["verified"],
                format_name=fmt,
                strict=options.validated_data["strict"],
                update=options.validated_data["update"],
            )
        except BatchTooLarge as exc:
            code = status.HTTP_400_BAD_REQUEST if exc.too_many else status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
            return Response({"files": [str(exc)]}, status=code)
        except BatchRefused as exc:
            return Response(exc.as_dict(), status=status.HTTP_400_BAD_REQUEST)
        body = {
            "all_or_nothing": True,
            "files": len(runs),
            "created": sum(run.report.get("created", 0) for run in runs),
            "runs": [import_run_data(run) for run in runs],
        }
        return Response(body, status=status.HTTP_201_CREATED)


class ItemImportFormatsApi(APIView):
    """GET the formats an item import of the project reads (the `format` of an upload)."""

    @extend_schema(responses=ImportFormatSerializer(many=True))
    def get(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        return Response([{"name": n, "label": label} for n, label in format_choices(project.protocol)])


class AnnotationImportApi(APIView):
    """POST a .jsonl of ratings (video rating projects) or blind QA answers (QA projects): a
    worker imports it; 202 with the run to poll."""

    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(request=UploadSerializer, responses={202: ImportRunSerializer})
    def post(self, request, slug):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        data = UploadSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        return queued(
            import_run_queue(
                project=project, user=request.user, uploaded=data.validated_data["file"], kind=ImportKind.ANNOTATIONS
            )
        )


class ImportRunApi(APIView):
    """GET one import run: status, then the report or the refusal ("line N: field F: reason")."""

    @extend_schema(responses=ImportRunSerializer)
    def get(self, request, run_id: int):
        run = get_object_or_404(ImportRun.objects.select_related("project", "created_by"), pk=run_id)
        get_project_for(request.user, run.project.slug, Role.RESEARCHER)
        return Response(import_run_data(run))
