from django.urls import path

from . import apis_work

urlpatterns = [
    path("projects/<slug:slug>/tasks/next/", apis_work.TaskNextApi.as_view(), name="api-task-next"),
    path("tasks/<int:task_id>/draft/", apis_work.TaskDraftApi.as_view(), name="api-task-draft"),
    path("tasks/<int:task_id>/renew/", apis_work.TaskRenewApi.as_view(), name="api-task-renew"),
    path("tasks/<int:task_id>/submit/", apis_work.TaskSubmitApi.as_view(), name="api-task-submit"),
    path("tasks/<int:task_id>/skip/", apis_work.TaskSkipApi.as_view(), name="api-task-skip"),
    path("projects/<slug:slug>/review/", apis_work.ReviewQueueApi.as_view(), name="api-review-queue"),
    path("items/<int:item_id>/review/", apis_work.ItemReviewApi.as_view(), name="api-item-review"),
    path("projects/<slug:slug>/agreement/", apis_work.AgreementApi.as_view(), name="api-agreement"),
]
