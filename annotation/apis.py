from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from .selectors import project_list_for


class MeApi(APIView):
    class OutputSerializer(serializers.Serializer):
        username = serializers.CharField()
        is_superuser = serializers.BooleanField()

    def get(self, request):
        return Response(self.OutputSerializer(request.user).data)


class ProjectListApi(APIView):
    def get(self, request):
        return Response(project_list_for(user=request.user))
