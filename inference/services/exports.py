"""A job's files for download and audit, written by the export task when the job ends or is re-scored."""
from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings

from ..models import InferenceJob
from ..selectors import job_results, job_samples


def job_export_dir(job: InferenceJob) -> Path:
    return Path(settings.MEDIA_ROOT) / "exports" / "jobs" / str(job.pk)


def job_write_exports(*, job: InferenceJob, folder: Path | None = None) -> Path:
    """results.json (metrics, versions, parameters) and samples.jsonl (one line per query)."""
    folder = folder or job_export_dir(job)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "samples.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for sample in job_samples(job=job):
            fh.write(json.dumps(sample, ensure_ascii=False) + "\n")
    tmp.replace(folder / "samples.jsonl")
    (folder / "results.json").write_text(json.dumps(job_results(job=job), indent=2, ensure_ascii=False, default=str))
    return folder
