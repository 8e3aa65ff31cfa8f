"""Imports from the page and the API: the upload is staged, a Celery worker imports it.

`import_run_queue` writes the upload to CACHE_ROOT/uploads (the web and worker containers share
it; with object storage as MEDIA_STORAGE it is moved to the storage's uploads/ instead, so a worker
on another host reads it through the storage: `staged_for_workers`), records an ImportRun and
sends `annotation.tasks.run_import` once the row is committed (by name, through config.enqueue:
this module never imports Celery tasks); the request returns at once,
however large the file. `import_run_execute` (the Celery task's body) runs the same importers as the
command, all or nothing, and records the report or the refusal. Without Redis (the demo) Celery
runs eagerly, so the run is done when the request returns.

Crashes: an import is a background run like any other (background/): the worker claims it with
the one claim (background.claim), refreshes its heartbeat while it imports (background.heartbeat),
and Celery beat's watchdog runs `import_runs_watch` (settings.STATELAB_RUN_WATCHERS), which
re-queues a run whose worker died, up to STATELAB_RUN_MAX_ATTEMPTS claims, then fails it with the
reason. The import is one transaction, so a second attempt starts from nothing.

Formats: an item import reads the project's own files or one of its protocol's authors' formats,
detected or named (annotation/importing/conversion.py). What the upload asked for (``format``,
``strict``) is kept with the run, under ``report["requested"]``, until the worker reads it; the
worker imports the staged file under the name it was uploaded with (a format may know its file by
name), from the run's working folder. Media of an upload come from the server's import folder or
from inside the uploaded zip only.

Progress: the importer counts the bytes it reads of the items file (a ReadMeter, one addition per
buffer refill), and a second thread of the worker copies the count to the row at most once a
second (`progress_writer`); bytes, not lines, because the file's size is known before the first
line is read, so the count has a total from the start.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from background.claim import run_claim, run_mine
from background.heartbeat import RowHeartbeat, RowWriter
from background.models import RunStatus
from background.watchdog import lapsed_runs_watch
from config.enqueue import enqueue, enqueue_on_commit
from config.storage import is_local, is_missing, local_copy

from ..models import ImportKind, ImportRun, Project
from .annotations import annotations_import
from .common import ImportRefused
from .conversion import format_refusal, import_workdir
from .items import items_import
from .sources import ReadMeter, copy_upload

log = logging.getLogger(__name__)

# How often, at most, a running import's progress is written to its row.
PROGRESS_SECONDS = 1.0
# The run's report key holding what the upload asked for ({"format": name or None, "strict": bool}).
REQUESTED = "requested"
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def import_media_root() -> Path:
    """Where media paths of an uploaded bare JSONL resolve (a zip carries its own media)."""
    root = Path(getattr(settings, "IMPORT_MEDIA_ROOT", None) or Path(settings.MEDIA_ROOT) / "incoming")
    root.mkdir(parents=True, exist_ok=True)
    return root


def staging_root() -> Path:
    return Path(settings.CACHE_ROOT) / "uploads"


# ImportRun.staged_path of an upload staged in the media storage: this prefix + the object's name.
STORED_UPLOAD = "storage:"


def staged_for_workers(staged: Path) -> str:
    """What the run records as its staged file: the local path, or with object storage the
    object uploads/<name> the file is moved to (any worker host reads it from there)."""
    if is_local(default_storage):
        return str(staged)
    try:
        with open(staged, "rb") as fh:
            name = default_storage.save(f"uploads/{staged.name}", File(fh, name=staged.name))
    finally:
        staged.unlink(missing_ok=True)
    return STORED_UPLOAD + name


def _staged_local(staged_path: str) -> Path:
    """The staged file as a local path (copied from the storage on this worker's host)."""
    if not staged_path.startswith(STORED_UPLOAD):
        return Path(staged_path)
    try:
        return local_copy(staged_path[len(STORED_UPLOAD) :])
    except Exception as exc:  # gone from the bucket: refused as a lost file; unreachable: raised, re-run later
        if not is_missing(exc):
            raise
        return staging_root() / "missing"


def _drop_staged(staged_path: str) -> None:
    if staged_path.startswith(STORED_UPLOAD):
        name = staged_path[len(STORED_UPLOAD) :]
        default_storage.delete(name)
        (Path(settings.CACHE_ROOT) / "storage" / name).unlink(missing_ok=True)
    elif staged_path:
        Path(staged_path).unlink(missing_ok=True)


def import_run_queue(
    *,
    project: Project,
    user,
    uploaded,
    kind: str = ImportKind.ITEMS,
    verified: bool = False,
    format_name: str | None = None,
    strict: bool = False,
    update: bool = False,
) -> ImportRun:
    """Stage an uploaded file and queue its import; returns the run (already done when eager).
    `format_name` (items): one of the protocol's item formats (conversion.format_choices), None to
    detect; ValueError, naming those there are, for another."""
    if kind not in ImportKind.values:
        raise ValueError(f"kind must be one of {', '.join(ImportKind.values)}")
    if format_name and kind == ImportKind.ITEMS and (reason := format_refusal(project.protocol, format_name)):
        raise ValueError(reason)
    requested = None
    if kind == ImportKind.ITEMS:  # `update` recorded only when asked (runs made before it have none)
        requested = {"format": format_name or None, "strict": bool(strict), **({"update": True} if update else {})}
    name = upload_name(uploaded)
    suffix = ".zip" if name.lower().endswith(".zip") else ".jsonl"
    staged = copy_upload(uploaded, staging_root(), suffix=suffix)
    size = staged.stat().st_size
    staged_path = staged_for_workers(staged)
    try:
        run = ImportRun.objects.create(
            project=project,
            created_by=user if getattr(user, "is_authenticated", False) else None,
            kind=kind,
            verified=bool(verified) and kind == ImportKind.ITEMS,
            file_name=name,
            file_bytes=size,
            staged_path=staged_path,
            report={REQUESTED: requested} if requested else {},
        )
    except BaseException:
        _drop_staged(staged_path)
        raise
    # Sent when the row is committed: at once here (pages and API run without a request-wide
    # transaction), or when a caller's transaction commits, so the worker always finds the row.
    enqueue_on_commit("annotation.tasks.run_import", run.pk)
    run.refresh_from_db()  # eager (demo): already done
    return run


def import_run_execute(run_id: int, *, worker: str = "", heartbeat: bool = False) -> str:
    """Import one queued run; returns its final status. A redelivered run that already ended, or
    that a live worker is importing, is left alone. ``heartbeat``: keep the row's heartbeat and
    progress fresh from threads while importing (a worker process; not in eager mode, where the
    request waits for the end and nobody polls)."""
    run = run_claim(
        ImportRun,
        run_id=run_id,
        worker=worker,
        reset={"progress_bytes": 0, "progress_total": 0},
        select_related=("project", "created_by"),
    )
    if run is None:
        return ImportRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"
    meter = ReadMeter()
    if not heartbeat:
        return _import(run, meter)
    mine = run_mine(run)
    with RowHeartbeat(mine), progress_writer(mine, meter):
        return _import(run, meter)


def progress_writer(queryset, meter: ReadMeter) -> RowWriter:
    """The claimed row's progress, written from the meter when it has moved, at most every
    PROGRESS_SECONDS, by a thread of its own (background.heartbeat.RowWriter: the import writes in one
    transaction, its connection's or the COPY writer's, and a count written there would only be
    seen once it commits). One small UPDATE a second, whatever the file's size."""
    written = [(0, 0)]

    def values() -> dict | None:
        now = (min(meter.done, meter.total), meter.total)
        if now == written[0]:
            return None
        written[0] = now
        return {"progress_bytes": now[0], "progress_total": now[1]}

    return RowWriter(queryset, values=values, interval=PROGRESS_SECONDS, name="statelab-import-progress")


def upload_name(uploaded) -> str:
    """The name an upload is recorded under (its run's file_name): the client's, without folders."""
    return (getattr(uploaded, "name", "") or "upload").replace("\x00", "").rsplit("/", 1)[-1][:255] or "upload"


def safe_upload_name(file_name: str) -> str:
    """The upload's name made safe as a file name of a working folder."""
    return _UNSAFE_NAME.sub("_", Path(file_name).name).lstrip(".")[-100:] or "upload"


def _as_uploaded(staged: Path, work: Path, file_name: str) -> Path:
    """The staged file under the name it was uploaded with (made safe), linked into `work`."""
    named = work / safe_upload_name(file_name)
    try:
        os.link(staged, named)
    except OSError:  # another file system: a copy
        shutil.copyfile(staged, named)
    return named


def _import(run: ImportRun, meter: ReadMeter) -> str:
    run_id = run.pk
    requested = (run.report or {}).get(REQUESTED) or {}
    path = _staged_local(run.staged_path)
    try:
        if not path.is_file():
            raise ImportRefused(
                [f"file: field file: {run.file_name}: the uploaded file is no longer on the server; upload it again"]
            )
        if run.kind == ImportKind.ANNOTATIONS:
            report = annotations_import(
                project=run.project, path=path, actor=run.created_by, run_id=run.pk, progress=meter
            )
        else:
            with import_workdir() as work:
                report = items_import(
                    project=run.project,
                    path=_as_uploaded(path, work, run.file_name),
                    media_root=import_media_root(),
                    verified=run.verified,
                    actor=run.created_by,
                    run_id=run.pk,
                    progress=meter,
                    format_name=requested.get("format"),
                    strict=bool(requested.get("strict")),
                    update=bool(requested.get("update")),
                    confined=True,
                )
    except ImportRefused as exc:
        run.status, run.errors, run.error_count = RunStatus.REFUSED, exc.errors, exc.total
        if exc.read_as:
            run.report = {**run.report, "read_as": exc.read_as}
    except Exception as exc:  # recorded for the researcher; the importers wrote nothing
        log.exception("import run %s failed", run_id)
        run.status, run.errors, run.error_count = RunStatus.FAILED, [f"{type(exc).__name__}: {exc}"], 1
    else:
        run.status, run.report = RunStatus.FINISHED, report.as_dict()
        if requested:
            run.report[REQUESTED] = requested
    finally:
        path.unlink(missing_ok=True)
        _drop_staged(run.staged_path)
    run.finished_at = timezone.now()
    run.staged_path = ""
    run.progress_bytes, run.progress_total = min(meter.done, meter.total), meter.total
    # PostgreSQL's jsonb takes no NUL: a message quoting one (a media path) must not keep the run running.
    run.errors = [str(e).replace("\x00", "\\x00") for e in run.errors or []]
    run.save(
        update_fields=[
            "status",
            "report",
            "errors",
            "error_count",
            "finished_at",
            "staged_path",
            "progress_bytes",
            "progress_total",
        ]
    )
    return run.status


def import_runs_watch() -> dict[str, int]:
    """The watchdog's pass over imports (background.watchdog, every few seconds by Celery beat): a
    running import whose heartbeat lapsed goes back to queued and is sent again, or, after
    STATELAB_RUN_MAX_ATTEMPTS claims, fails with the reason (its staged file is removed)."""
    return lapsed_runs_watch(ImportRun, requeue=_import_requeued, failed=_import_lost)


def _import_requeued(run: ImportRun) -> list[str]:
    # Queued again: the next claim starts from nothing, and so does its progress.
    run.progress_bytes, run.progress_total = 0, 0
    transaction.on_commit(lambda pk=run.pk: enqueue("annotation.tasks.run_import", pk))
    return ["progress_bytes", "progress_total"]


def _import_lost(*, run: ImportRun, reason: str) -> None:
    run.errors, run.error_count = [f"{reason}; nothing was imported"], 1
    _drop_staged(run.staged_path)
    run.staged_path = ""
    run.save(update_fields=["errors", "error_count", "staged_path"])


def import_run_data(run: ImportRun) -> dict:
    """The JSON form of a run (API and page)."""
    stored = run.report or {}
    requested = stored.get(REQUESTED) or {}
    report = {k: v for k, v in stored.items() if k not in (REQUESTED, "read_as")}
    return {
        "id": run.pk,
        "project": run.project.slug,
        "kind": run.kind,
        "verified": run.verified,
        "format": requested.get("format"),
        "strict": bool(requested.get("strict")),
        "update": bool(requested.get("update")),
        "read_as": report.get("format_label") or stored.get("read_as"),
        "file_name": run.file_name,
        "file_bytes": run.file_bytes,
        "status": run.status,
        "done": run.done,
        "report": (report or None) if run.status == RunStatus.FINISHED else None,
        "error_count": run.error_count,
        "errors": run.errors,
        "progress": round(run.progress_bytes / run.progress_total, 4) if run.progress_total else None,
        "progress_bytes": run.progress_bytes,
        "progress_total": run.progress_total,
        "attempts": run.attempts,
        "created_by": run.created_by.username if run.created_by else None,
        "created_at": run.created_at.isoformat(),
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "url": f"/api/imports/{run.pk}/",
        "page": f"/projects/{run.project.slug}/imports/{run.pk}/",
    }
