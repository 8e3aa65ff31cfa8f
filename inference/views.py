"""Server-rendered job pages and the job's downloads (results.json, samples.jsonl)."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render

from annotation.models import Role
from annotation.permissions import require_role

from . import run_status, selectors
from .models import InferenceJob


def _job_for(request, pk: int) -> InferenceJob:
    job = get_object_or_404(InferenceJob.objects.select_related("project", "endpoint", "release"), pk=pk)
    require_role(request.user, job.project, Role.RESEARCHER)
    return job


@login_required
def job_detail(request, pk: int):
    job = _job_for(request, pk)
    progress = selectors.job_progress(job=job)
    return render(
        request,
        "inference/job_detail.html",
        {
            "job": job,
            "progress": progress,
            "cost": selectors.usd(progress["cost_usd"]),
            "cost_per_correct": selectors.usd(progress["cost_per_correct_usd"]),
            "chunks": run_status.job_chunks(job=job),
            "queues": run_status.job_queues(job=job),
            "json_queries": selectors.job_json_queries(job),  # the unreadable replies' table is for these jobs
        },
    )


@login_required
def job_results_json(request, pk: int):
    job = _job_for(request, pk)
    body = json.dumps(selectors.job_results(job=job), indent=2, ensure_ascii=False, default=str)
    response = HttpResponse(body, content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="job-{job.pk}-results.json"'
    return response


@login_required
def job_samples_jsonl(request, pk: int):
    job = _job_for(request, pk)
    lines = (json.dumps(s, ensure_ascii=False, default=str) + "\n" for s in selectors.job_samples(job=job))
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="job-{job.pk}-samples.jsonl"'
    return response
