"""The signed-in user, their projects, and a project's overview."""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from ..models import Role
from ..overview import project_overview_data
from ..permissions import get_project_for
from ..selectors import project_list_for


class MeApi(APIView):
    class OutputSerializer(serializers.Serializer):
        username = serializers.CharField()
        is_superuser = serializers.BooleanField()

    @extend_schema(responses=OutputSerializer, summary="The signed-in user")
    def get(self, request):
        return Response(self.OutputSerializer(request.user).data)


class ProjectListApi(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT, summary="Projects the user is a member of, with their role")
    def get(self, request):
        return Response(project_list_for(user=request.user))


class ProjectOverviewApi(APIView):
    """Counts per status and split, the user's role and the project's pages (any member)."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, slug):
        project = get_project_for(request.user, slug, Role.ANNOTATOR)
        return Response(project_overview_data(project=project, user=request.user))
