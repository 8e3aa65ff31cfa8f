"""The signed-in user, their projects, and a project's overview."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from ..models import Role
from ..overview import project_overview_data
from ..permissions import get_project_for, require_project_creator
from ..project_setup import SetupInvalid, project_create
from ..selectors import project_list_for
from .members import ProjectCreateIn, bad_request, parse


class MeApi(APIView):
    class OutputSerializer(serializers.Serializer):
        username = serializers.CharField()
        is_superuser = serializers.BooleanField()

    @extend_schema(responses=OutputSerializer, summary="The signed-in user")
    def get(self, request):
        return Response(self.OutputSerializer(request.user).data)


class ProjectListApi(APIView):
    @extend_schema(
        responses=inline_serializer(
            "ProjectListEntry",
            {
                "slug": serializers.CharField(),
                "name": serializers.CharField(),
                "protocol": serializers.CharField(),
                "workflow": serializers.CharField(),
                "role": serializers.CharField(),
                "items": serializers.IntegerField(),
                "annotations_per_item": serializers.IntegerField(),
            },
            many=True,
        ),
        summary="Projects the user is a member of, with their role",
    )
    def get(self, request):
        return Response(project_list_for(user=request.user))

    @extend_schema(
        request=ProjectCreateIn,
        summary="Create a project (staff, or a researcher/admin of some project); the creator becomes its admin",
        responses={201: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT, 403: OpenApiTypes.OBJECT},
    )
    def post(self, request):
        require_project_creator(request.user)
        try:
            project = project_create(user=request.user, **parse(ProjectCreateIn, request.data))
        except SetupInvalid as exc:
            return bad_request(exc.errors)
        return Response(project_overview_data(project=project, user=request.user), status=201)


class ProjectOverviewApi(APIView):
    """Counts per status and split, the user's role and the project's pages (any member)."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request, slug):
        project = get_project_for(request.user, slug, Role.ANNOTATOR)
        return Response(project_overview_data(project=project, user=request.user))
