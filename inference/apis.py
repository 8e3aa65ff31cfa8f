"""Thin DRF views over inference jobs: live progress, cancel, retry failed."""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Role
from annotation.permissions import require_role

from . import selectors, services
from .models import InferenceJob


def _job(request, pk: int) -> InferenceJob:
    job = get_object_or_404(InferenceJob.objects.select_related("project", "endpoint"), pk=pk)
    require_role(request.user, job.project, Role.RESEARCHER)
    return job


class FailureSerializer(serializers.Serializer):
    item = serializers.CharField()
    query = serializers.CharField()
    error = serializers.CharField()
    attempts = serializers.IntegerField()


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
    cost_usd = serializers.FloatField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    failures = FailureSerializer(many=True)


class JobProgressApi(APIView):
    @extend_schema(responses=ProgressSerializer, summary="Live progress of an inference job")
    def get(self, request, pk: int):
        job = _job(request, pk)
        return Response(ProgressSerializer(selectors.job_progress(job=job)).data)


class JobCancelApi(APIView):
    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT, 409: OpenApiTypes.OBJECT},
                   summary="Cancel a job ({\"cancelled\": true}; 409 when it had already ended)")
    def post(self, request, pk: int):
        job = _job(request, pk)
        cancelled = services.job_cancel(job=job)
        return Response({"cancelled": cancelled}, status=200 if cancelled else 409)


class JobRetryFailedApi(APIView):
    @extend_schema(request=None, responses=OpenApiTypes.OBJECT,
                   summary="Re-run every item of a job that lacks an OK prediction ({\"items\": n})")
    def post(self, request, pk: int):
        job = _job(request, pk)
        return Response({"items": services.job_retry_failed(job=job)})
