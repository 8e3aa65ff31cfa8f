"""Thin DRF views over inference jobs: launch, live progress, cancel, retry failed."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Release, Role
from annotation.permissions import get_project_for, require_role

from . import selectors, services
from .models import InferenceJob, JobMode


def _job(request, pk: int) -> InferenceJob:
    job = get_object_or_404(InferenceJob.objects.select_related("project", "endpoint"), pk=pk)
    require_role(request.user, job.project, Role.RESEARCHER)
    return job


class FailureSerializer(serializers.Serializer):
    item = serializers.CharField()
    query = serializers.CharField()
    error = serializers.CharField()
    attempts = serializers.IntegerField()


class UnreadableReplySerializer(serializers.Serializer):
    item = serializers.CharField()
    query = serializers.CharField()
    reason = serializers.CharField(allow_blank=True)
    attempts = serializers.IntegerField(help_text="requests made for the query, its JSON repair requests included")
    json_repairs = serializers.IntegerField()
    reply = serializers.CharField(allow_blank=True, help_text="the start of the stored reply")


class ProgressSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    error = serializers.CharField(allow_blank=True)
    model = serializers.CharField()
    project = serializers.CharField()
    protocol = serializers.CharField()
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    failed = serializers.IntegerField()
    percent = serializers.FloatField()
    rate_per_s = serializers.FloatField(allow_null=True)
    eta_s = serializers.FloatField(allow_null=True)
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cost_usd = serializers.FloatField(allow_null=True, help_text="at the endpoint's prices; null without one")
    cached_answers = serializers.IntegerField(help_text="answers served from the response cache (no tokens, no cost)")
    correct_answers = serializers.IntegerField(
        allow_null=True, help_text="answers scored correct when the job was last scored; null before, or for ratings"
    )
    cost_per_correct_usd = serializers.FloatField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    failures = FailureSerializer(many=True, help_text="failed queries (no reply came back), the first 50")
    unreadable = serializers.IntegerField(
        help_text="replies that came back but stayed unreadable JSON through their repairs (judges): "
        "counted in done, scored as missing, asked again by retry-failed"
    )
    unreadable_replies = UnreadableReplySerializer(many=True, help_text="the first 50 unreadable replies")


class JobProgressApi(APIView):
    @extend_schema(responses=ProgressSerializer, summary="Live progress of an inference job")
    def get(self, request, pk: int):
        job = _job(request, pk)
        return Response(ProgressSerializer(selectors.job_progress(job=job)).data)


class JobCancelApi(APIView):
    @extend_schema(
        request=None,
        responses={200: OpenApiTypes.OBJECT, 409: OpenApiTypes.OBJECT},
        summary='Cancel a job ({"cancelled": true}; 409 when it had already ended)',
    )
    def post(self, request, pk: int):
        job = _job(request, pk)
        cancelled = services.job_cancel(job=job, actor=request.user)
        return Response({"cancelled": cancelled}, status=200 if cancelled else 409)


class JobRetryFailedApi(APIView):
    @extend_schema(
        request=None,
        responses=OpenApiTypes.OBJECT,
        summary='Re-run every item of a job with a failed query or an unreadable judge reply ({"items": n})',
    )
    def post(self, request, pk: int):
        job = _job(request, pk)
        return Response({"items": services.job_retry_failed(job=job, actor=request.user)})


class JobCreateApi(APIView):
    """POST {endpoint, release?, mode?, params?}: start a job on the project (researchers); 201 with
    its progress and a `Location` to poll. An unknown endpoint or release, or a job the service
    refuses, is a 400 saying why."""

    class JobLaunchSerializer(serializers.Serializer):
        endpoint = serializers.CharField(max_length=100, help_text="the model endpoint's name")
        release = serializers.CharField(
            max_length=50, required=False, allow_blank=True, help_text="release version (default: the live items)"
        )
        mode = serializers.ChoiceField(choices=[JobMode.EVALUATE, JobMode.SUGGEST], default=JobMode.EVALUATE)
        params = serializers.DictField(
            required=False,
            default=dict,
            help_text="temperature, max_tokens, seed, frames, item_limit, strategy, chunk_size, ...",
        )

    @extend_schema(
        request=JobLaunchSerializer,
        responses={201: ProgressSerializer, 400: OpenApiTypes.OBJECT},
        summary="Start an inference job on the project",
    )
    def post(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        data = self.JobLaunchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        given = data.validated_data
        # The project's own endpoint of that name, else the shared one (never another project's).
        endpoint = selectors.endpoint_named(project=project, name=given["endpoint"])
        if endpoint is None or selectors.endpoint_refusal(endpoint):
            return Response(
                {"detail": f"no usable endpoint named {given['endpoint']!r}"}, status=status.HTTP_400_BAD_REQUEST
            )
        release = None
        if given.get("release"):
            release = Release.objects.filter(project=project, version=given["release"]).first()
            if release is None:
                return Response(
                    {"detail": f"project {project.slug} has no release {given['release']!r}"},
                    status=status.HTTP_400_BAD_REQUEST,
                )
        try:
            job = services.job_create(
                endpoint=endpoint,
                project=project,
                release=release,
                mode=given["mode"],
                params=given["params"],
                created_by=request.user,
            )
        except ValidationError as exc:
            return Response({"detail": services.error_message(exc)}, status=status.HTTP_400_BAD_REQUEST)
        response = Response(ProgressSerializer(selectors.job_progress(job=job)).data, status=status.HTTP_201_CREATED)
        response["Location"] = f"/api/jobs/{job.pk}/progress/"
        return response
