from django.urls import path

from . import api_io

urlpatterns = [
    path("projects/<slug:slug>/overview/", api_io.ProjectOverviewApi.as_view(), name="api-project-overview"),
    path("projects/<slug:slug>/imports/", api_io.ItemImportApi.as_view(), name="api-item-import"),
    path("imports/<int:run_id>/", api_io.ImportRunApi.as_view(), name="api-import-run"),
    path("projects/<slug:slug>/annotation-imports/", api_io.AnnotationImportApi.as_view(), name="api-annotation-import"),
    path("projects/<slug:slug>/releases/", api_io.ReleaseListApi.as_view(), name="api-releases"),
    path("projects/<slug:slug>/releases/<str:version>/export/", api_io.ReleaseExportApi.as_view(), name="api-release-export"),
]
