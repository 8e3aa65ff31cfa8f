"""Several item files imported in the request that sent them, all or nothing.

The import API takes small files in one request (the `files` field, or several `file` parts;
annotation/apis/imports.py). They are imported here, in the request, one after the other in one
database transaction on the request's connection: the per-project import lock is taken once,
each file is validated and written with the same importer as a queued run (items.py, its rows
spooled and copied on this connection), and each gets an ImportRun of its own, finished with its
report. A later file sees the items of the earlier ones (an identical line is "unchanged", the
same id with other content is refused).

All or nothing: when any file is refused, every file is still checked (each in a savepoint when
there are several, so the refusals of all of them are reported), then the whole transaction rolls back — no item, no
media row, no run, no audit event of the request stays, and media files stored for the earlier
files are deleted again — and `BatchRefused` names each refused file with its "line N: field F:
reason" messages. The request pays no queue, no worker hand-over and no polling: nothing of this
costs more for a 1,000-line file than the lines themselves.

The request's files together may hold at most IMPORT_BATCH_MAX_BYTES (larger files go one per
request to the queued import) and number at most IMPORT_BATCH_MAX_FILES.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.media.assets import delete_stored
from background.models import RunStatus

from ..models import ImportKind, ImportRun, Project
from .common import ImportRefused
from .conversion import format_refusal
from .items import items_import
from .runs import REQUESTED, import_media_root, safe_upload_name, upload_name

DEFAULT_BATCH_MAX_BYTES = 32 * 1024 * 1024
DEFAULT_BATCH_MAX_FILES = 100


def batch_max_bytes() -> int:
    return int(getattr(settings, "IMPORT_BATCH_MAX_BYTES", DEFAULT_BATCH_MAX_BYTES))


def batch_max_files() -> int:
    return int(getattr(settings, "IMPORT_BATCH_MAX_FILES", DEFAULT_BATCH_MAX_FILES))


@dataclass
class FileRefused:
    """One refused file of a batch: its position (0-based), its name and why."""

    index: int
    file_name: str
    errors: list[str]
    error_count: int
    read_as: str | None = None

    def as_dict(self) -> dict:
        return {
            "index": self.index,
            "file_name": self.file_name,
            "error_count": self.error_count,
            "errors": self.errors,
            "read_as": self.read_as,
        }


class BatchRefused(Exception):
    """The request is refused whole; `refused` names each bad file. Nothing was written."""

    def __init__(self, refused: list[FileRefused], total_files: int):
        self.refused = refused
        self.total_files = total_files
        names = ", ".join(f"{r.file_name} ({r.error_count} error{'s' if r.error_count != 1 else ''})" for r in refused)
        super().__init__(
            f"import refused: {len(refused)} of {total_files} file(s) refused: {names}; "
            "nothing from this request was written"
        )

    def as_dict(self) -> dict:
        return {
            "detail": str(self),
            "all_or_nothing": True,
            "files": [r.as_dict() for r in self.refused],
        }


class BatchTooLarge(Exception):
    """The request's files are more, or larger, than one request imports (a 413 / 400)."""

    def __init__(self, message: str, *, too_many: bool = False):
        self.too_many = too_many
        super().__init__(message)


def batch_check_size(uploads: list) -> None:
    """Refuse a batch over the limits before anything is read."""
    count, limit = len(uploads), batch_max_files()
    if count > limit:
        raise BatchTooLarge(f"the request holds {count} files; one request imports at most {limit}", too_many=True)
    total = sum(int(getattr(u, "size", 0) or 0) for u in uploads)
    if total > batch_max_bytes():
        raise BatchTooLarge(
            f"the request's files hold {total} bytes together; one request imports at most {batch_max_bytes()} "
            "bytes at once. Send larger files one per request in the field `file` (imported by a worker)"
        )


def _scratch_folder() -> Path:
    """This process's and thread's folder for the uploads of a request, under CACHE_ROOT: made on
    first use and kept (a request's files are written, imported and deleted one at a time, so
    the folder holds at most the file being imported). Making and removing a folder per file
    cost a few milliseconds each on this disk, what a 1,000-line file notices."""
    # The host name too: CACHE_ROOT may be a volume that several containers share, and process ids
    # repeat across containers.
    name = f"{socket.gethostname()}-{os.getpid()}-{threading.get_ident()}"
    return Path(settings.CACHE_ROOT) / "request-uploads" / name


def _write_upload(uploaded, folder: Path, name: str) -> Path:
    """The upload as a file named as it was sent (made safe), alone in `folder`."""
    path = folder / safe_upload_name(name)
    try:
        out = open(path, "wb")
    except FileNotFoundError:  # first use of the folder (or a cache folder emptied since)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        out = open(path, "wb")
    with out:
        for chunk in uploaded.chunks():
            out.write(chunk)
    return path


def items_import_batch(
    *,
    project: Project,
    user,
    uploads: list,
    verified: bool = False,
    format_name: str | None = None,
    strict: bool = False,
    update: bool = False,
) -> list[ImportRun]:
    """Import the uploaded files (Django UploadedFile) into `project` in one transaction, in the
    order given; returns one finished ImportRun per file. Raises BatchRefused, having written
    nothing, when any file is refused; BatchTooLarge over the limits; ValueError for a format the
    protocol does not read."""
    if format_name and (reason := format_refusal(project.protocol, format_name)):
        raise ValueError(reason)
    batch_check_size(uploads)
    requested = {"format": format_name or None, "strict": bool(strict), **({"update": True} if update else {})}
    actor = user if getattr(user, "is_authenticated", False) else None
    media_root = import_media_root()
    stored: list[str] = []  # media files written; deleted again if the transaction rolls back
    refused: list[FileRefused] = []
    runs: list[ImportRun] = []
    folder = _scratch_folder()
    # A refused file of several leaves the others checkable: each is imported in a savepoint. A
    # single file needs none, its refusal rolls the whole transaction back.
    savepoint = len(uploads) > 1
    try:
        with transaction.atomic():
            now = timezone.now()
            for index, uploaded in enumerate(uploads):
                name = upload_name(uploaded)
                path = folder / safe_upload_name(name)
                try:  # the upload is deleted again whatever happens (finally, below)
                    _write_upload(uploaded, folder, name)
                    run = ImportRun.objects.create(
                        project=project,
                        created_by=actor,
                        kind=ImportKind.ITEMS,
                        verified=bool(verified),
                        file_name=name,
                        file_bytes=path.stat().st_size,
                        status=RunStatus.RUNNING,
                        attempts=1,
                        worker="request",
                        started_at=now,
                        heartbeat_at=now,
                    )
                    with transaction.atomic() if savepoint else contextlib.nullcontext():
                        report = items_import(
                            project=project,
                            path=path,
                            media_root=media_root,
                            verified=bool(verified),
                            actor=actor,
                            run_id=run.pk,
                            format_name=format_name or None,
                            strict=bool(strict),
                            update=bool(update),
                            confined=True,
                            stored=stored,
                            savepoint=False,  # the batch's savepoint, or its transaction, covers it
                        )
                except ImportRefused as exc:
                    refused.append(FileRefused(index, name, list(exc.errors), exc.total, exc.read_as))
                    continue
                finally:
                    path.unlink(missing_ok=True)
                run.status = RunStatus.FINISHED
                run.report = {**report.as_dict(), REQUESTED: requested}
                run.finished_at = timezone.now()
                size = run.file_bytes
                run.progress_bytes = run.progress_total = size
                run.save(update_fields=["status", "report", "finished_at", "progress_bytes", "progress_total"])
                runs.append(run)
            if refused:
                raise BatchRefused(refused, len(uploads))
    except BaseException:
        delete_stored(stored)
        raise
    return runs


__all__ = ["BatchRefused", "BatchTooLarge", "FileRefused", "items_import_batch", "batch_check_size"]
