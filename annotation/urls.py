"""Pages of the annotation app (mounted at /)."""
from django.urls import path

from . import views_work
from .views import home, imports, releases

urlpatterns = [
    path("", home.home, name="home"),
    path("projects/<slug:slug>/", home.project_overview, name="io-project"),
    path("projects/<slug:slug>/import/", imports.project_import, name="io-import"),
    path("projects/<slug:slug>/imports/<int:run_id>/", imports.import_run_page, name="io-import-run"),
    path("projects/<slug:slug>/releases/", releases.project_releases, name="io-releases"),
    path("projects/<slug:slug>/releases/<str:version>/download/", releases.release_download, name="io-release-download"),
    path("projects/<slug:slug>/annotate/", views_work.annotate, name="work-annotate"),
    path("projects/<slug:slug>/review/", views_work.review_list, name="work-review-list"),
    path("projects/<slug:slug>/review/<int:item_id>/", views_work.review_detail, name="work-review-detail"),
    path("projects/<slug:slug>/agreement/", views_work.agreement, name="work-agreement"),
]
