from django.urls import path

from . import apis

urlpatterns = [
    path("projects/<slug:slug>/jobs/", apis.JobCreateApi.as_view(), name="api-jobs"),
    path("jobs/<int:pk>/progress/", apis.JobProgressApi.as_view(), name="api-job-progress"),
    path("jobs/<int:pk>/cancel/", apis.JobCancelApi.as_view(), name="api-job-cancel"),
    path("jobs/<int:pk>/retry-failed/", apis.JobRetryFailedApi.as_view(), name="api-job-retry-failed"),
]
