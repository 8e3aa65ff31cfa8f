"""Imports from the page and the API: the upload is staged, a Celery worker imports it.

`import_run_queue` writes the upload to CACHE_ROOT/uploads (the web and worker containers share
it), records an ImportRun and sends `annotation.tasks.run_import` once the row is committed
(by name, through config.enqueue: this module never imports tasks); the request returns at once,
however large the file. `import_run_execute` (the task's body) runs the same importers as the
command, all or nothing, and records the report or the refusal. Without Redis (the demo) Celery
runs eagerly, so the run is done when the request returns.
"""
from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from config.enqueue import enqueue_on_commit

from ..models import ImportKind, ImportRun, ImportStatus, Project
from .annotations import annotations_import
from .common import ImportRefused
from .items import items_import
from .sources import copy_upload

log = logging.getLogger(__name__)


def import_media_root() -> Path:
    """Where media paths of an uploaded bare JSONL resolve (a zip carries its own media)."""
    root = Path(getattr(settings, "IMPORT_MEDIA_ROOT", None) or Path(settings.MEDIA_ROOT) / "incoming")
    root.mkdir(parents=True, exist_ok=True)
    return root


def staging_root() -> Path:
    return Path(settings.CACHE_ROOT) / "uploads"


def import_run_queue(*, project: Project, user, uploaded, kind: str = ImportKind.ITEMS,
                     verified: bool = False) -> ImportRun:
    """Stage an uploaded file and queue its import; returns the run (already done when eager)."""
    if kind not in ImportKind.values:
        raise ValueError(f"kind must be one of {', '.join(ImportKind.values)}")
    name = (getattr(uploaded, "name", "") or "upload").rsplit("/", 1)[-1][:255]
    suffix = ".zip" if name.lower().endswith(".zip") else ".jsonl"
    staged = copy_upload(uploaded, staging_root(), suffix=suffix)
    try:
        run = ImportRun.objects.create(
            project=project, created_by=user if getattr(user, "is_authenticated", False) else None,
            kind=kind, verified=bool(verified) and kind == ImportKind.ITEMS, file_name=name,
            file_bytes=staged.stat().st_size, staged_path=str(staged),
        )
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    # Sent when the row is committed: at once here (pages and API run without a request-wide
    # transaction), or when a caller's transaction commits, so the worker always finds the row.
    enqueue_on_commit("annotation.tasks.run_import", run.pk)
    run.refresh_from_db()  # eager (demo): already done
    return run


def import_run_execute(run_id: int) -> str:
    """Import one queued run; returns its final status. A redelivered run that already ended is left alone."""
    now = timezone.now()
    claimed = ImportRun.objects.filter(pk=run_id, status__in=(ImportStatus.QUEUED, ImportStatus.RUNNING)).update(
        status=ImportStatus.RUNNING, started_at=now)
    run = ImportRun.objects.select_related("project").filter(pk=run_id).first()
    if run is None:
        return "missing"
    if not claimed:
        return run.status
    path = Path(run.staged_path)
    try:
        if not path.is_file():
            raise ImportRefused([f"file: field file: {run.file_name}: the uploaded file is no longer on the server; "
                                 "upload it again"])
        if run.kind == ImportKind.ANNOTATIONS:
            report = annotations_import(project=run.project, path=path)
        else:
            report = items_import(project=run.project, path=path, media_root=import_media_root(), verified=run.verified)
    except ImportRefused as exc:
        run.status, run.errors, run.error_count = ImportStatus.REFUSED, exc.errors, exc.total
    except Exception as exc:  # recorded for the researcher; the importers wrote nothing
        log.exception("import run %s failed", run_id)
        run.status, run.errors, run.error_count = ImportStatus.FAILED, [f"{type(exc).__name__}: {exc}"], 1
    else:
        run.status, run.report = ImportStatus.FINISHED, report.as_dict()
    finally:
        path.unlink(missing_ok=True)
    run.finished_at = timezone.now()
    run.staged_path = ""
    run.save(update_fields=["status", "report", "errors", "error_count", "finished_at", "staged_path"])
    return run.status


def import_run_data(run: ImportRun) -> dict:
    """The JSON form of a run (API and page)."""
    return {
        "id": run.pk,
        "project": run.project.slug,
        "kind": run.kind,
        "verified": run.verified,
        "file_name": run.file_name,
        "file_bytes": run.file_bytes,
        "status": run.status,
        "done": run.done,
        "report": run.report or None,
        "error_count": run.error_count,
        "errors": run.errors,
        "created_by": run.created_by.username if run.created_by else None,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "url": f"/api/imports/{run.pk}/",
        "page": f"/projects/{run.project.slug}/imports/{run.pk}/",
    }
