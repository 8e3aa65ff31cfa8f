"""A job's files for download and audit, written by the export's Celery task when the job ends or is re-scored:
under MEDIA_ROOT/exports/jobs/<id>/, or as the objects exports/jobs/<id>/… of the media storage
when that is object storage (config/storage.py), so the web host can serve what any worker wrote."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage

from config.storage import is_local

from ..models import InferenceJob
from ..selectors import job_metrics, job_results, job_samples, metrics_correct

EXPORT_FILES = ("samples.jsonl", "results.json")


def job_export_dir(job: InferenceJob) -> Path:
    return Path(settings.MEDIA_ROOT) / "exports" / "jobs" / str(job.pk)


def job_export_name(job: InferenceJob) -> str:
    """The storage name of the job's export folder (served at MEDIA_URL + this, to superusers)."""
    return f"exports/jobs/{job.pk}"


def job_write_exports(*, job: InferenceJob, folder: Path | None = None) -> Path | str:
    """results.json (metrics, versions, parameters, usage) and samples.jsonl (one line per query);
    the folder written, or the storage name of the folder on object storage. Records how many
    answers the scorer counted correct (InferenceJob.correct_answers) on the way."""
    if folder is None and not is_local(default_storage):
        with tempfile.TemporaryDirectory(prefix="job-export-") as tmp:
            _write(job, Path(tmp))
            for name in EXPORT_FILES:
                target = f"{job_export_name(job)}/{name}"
                default_storage.delete(target)  # replaced whole on a re-score
                with open(Path(tmp) / name, "rb") as fh:
                    default_storage.save(target, File(fh, name=name))
        return job_export_name(job)
    return _write(job, folder or job_export_dir(job))


def _write(job: InferenceJob, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "samples.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for sample in job_samples(job=job):
            fh.write(json.dumps(sample, ensure_ascii=False) + "\n")
    tmp.replace(folder / "samples.jsonl")
    metrics = job_metrics(job)
    # The job's cost per correct answer is shown once it is scored: keep the scorer's count.
    correct = metrics_correct(metrics)
    if correct != job.correct_answers:
        InferenceJob.objects.filter(pk=job.pk).update(correct_answers=correct)
        job.correct_answers = correct
    results = job_results(job=job, metrics=metrics)
    (folder / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False, default=str))
    return folder
