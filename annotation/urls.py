"""Pages of the annotation app (mounted at /)."""
from django.urls import path

from .views import home, imports, releases, work

urlpatterns = [
    path("", home.home, name="home"),
    path("projects/<slug:slug>/", home.project_overview, name="io-project"),
    path("projects/<slug:slug>/import/", imports.project_import, name="io-import"),
    path("projects/<slug:slug>/imports/<int:run_id>/", imports.import_run_page, name="io-import-run"),
    path("projects/<slug:slug>/releases/", releases.project_releases, name="io-releases"),
    path("projects/<slug:slug>/releases/<str:version>/download/", releases.release_download, name="io-release-download"),
    path("projects/<slug:slug>/annotate/", work.annotate, name="work-annotate"),
    path("projects/<slug:slug>/review/", work.review_list, name="work-review-list"),
    path("projects/<slug:slug>/review/<int:item_id>/", work.review_detail, name="work-review-detail"),
    path("projects/<slug:slug>/agreement/", work.agreement, name="work-agreement"),
]
