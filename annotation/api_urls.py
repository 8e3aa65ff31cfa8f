from django.urls import include, path

from . import apis

urlpatterns = [
    path("me/", apis.MeApi.as_view(), name="api-me"),
    path("projects/", apis.ProjectListApi.as_view(), name="api-projects"),
    path("", include("annotation.api_urls_io")),
    path("", include("annotation.api_urls_work")),
]
