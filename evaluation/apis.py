"""Read-only API for leaderboards and human-judge correlation (same JSON as the commands)."""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Role
from annotation.permissions import get_project_for

from . import tables
from .board_access import board_or_404, report_or_404, wants_details


class LeaderboardApi(APIView):
    class InputSerializer(serializers.Serializer):
        release = serializers.CharField(required=False, allow_blank=True)
        judge = serializers.CharField(required=False, allow_blank=True)

    @extend_schema(parameters=[InputSerializer], responses=OpenApiTypes.OBJECT,
                   summary="Leaderboard of a project ({project, release, protocol, rows}; ?details=1 adds ranks and breakdowns)")
    def get(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        board = board_or_404(project, params.validated_data.get("release") or None, params.validated_data.get("judge") or None)
        return Response(board if wants_details(request) else tables.leaderboard_public(board))


class CorrelationApi(APIView):
    class InputSerializer(serializers.Serializer):
        release = serializers.CharField(required=False, allow_blank=True)

    @extend_schema(parameters=[InputSerializer], responses=OpenApiTypes.OBJECT,
                   summary="Human-judge correlation of a video-rating project ({criteria, judges, human})")
    def get(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        report = report_or_404(project, params.validated_data.get("release") or None)
        return Response(report if wants_details(request) else tables.correlation_public(report))
