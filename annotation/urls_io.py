from django.urls import path

from . import views_io

urlpatterns = [
    path("projects/<slug:slug>/", views_io.project_overview, name="io-project"),
    path("projects/<slug:slug>/import/", views_io.project_import, name="io-import"),
    path("projects/<slug:slug>/imports/<int:run_id>/", views_io.import_run_page, name="io-import-run"),
    path("projects/<slug:slug>/releases/", views_io.project_releases, name="io-releases"),
    path("projects/<slug:slug>/releases/<str:version>/download/", views_io.release_download, name="io-release-download"),
]
