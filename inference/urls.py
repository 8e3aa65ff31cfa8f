from django.urls import path

from . import views

app_name = "inference"

urlpatterns = [
    path("jobs/<int:pk>/", views.job_detail, name="job-detail"),
    path("jobs/<int:pk>/results.json", views.job_results_json, name="job-results"),
    path("jobs/<int:pk>/samples.jsonl", views.job_samples_jsonl, name="job-samples"),
]
