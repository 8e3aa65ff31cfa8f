from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from .selectors import project_list_for


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
