"""REST API of the annotation app (mounted at /api/)."""
from django.urls import path

from .apis import imports, projects, releases, work

urlpatterns = [
    path("me/", projects.MeApi.as_view(), name="api-me"),
    path("projects/", projects.ProjectListApi.as_view(), name="api-projects"),
    path("projects/<slug:slug>/overview/", projects.ProjectOverviewApi.as_view(), name="api-project-overview"),
    path("projects/<slug:slug>/imports/", imports.ItemImportApi.as_view(), name="api-item-import"),
    path("imports/<int:run_id>/", imports.ImportRunApi.as_view(), name="api-import-run"),
    path("projects/<slug:slug>/annotation-imports/", imports.AnnotationImportApi.as_view(), name="api-annotation-import"),
    path("projects/<slug:slug>/releases/", releases.ReleaseListApi.as_view(), name="api-releases"),
    path("projects/<slug:slug>/releases/<str:version>/export/", releases.ReleaseExportApi.as_view(), name="api-release-export"),
    path("projects/<slug:slug>/tasks/next/", work.TaskNextApi.as_view(), name="api-task-next"),
    path("tasks/<int:task_id>/draft/", work.TaskDraftApi.as_view(), name="api-task-draft"),
    path("tasks/<int:task_id>/renew/", work.TaskRenewApi.as_view(), name="api-task-renew"),
    path("tasks/<int:task_id>/submit/", work.TaskSubmitApi.as_view(), name="api-task-submit"),
    path("tasks/<int:task_id>/skip/", work.TaskSkipApi.as_view(), name="api-task-skip"),
    path("projects/<slug:slug>/review/", work.ReviewQueueApi.as_view(), name="api-review-queue"),
    path("items/<int:item_id>/review/", work.ItemReviewApi.as_view(), name="api-item-review"),
    path("projects/<slug:slug>/agreement/", work.AgreementApi.as_view(), name="api-agreement"),
]
