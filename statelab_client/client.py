"""A typed HTTP client for StateLab's REST API (token auth). It speaks HTTP only: nothing here
imports Django or a StateLab app, so it installs and runs anywhere httpx does."""

from __future__ import annotations

import os
import re
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Literal, TypedDict

import httpx

from .analysis import Analysis
from .media import media_named, zip_with_media

ImportStatus = Literal["queued", "running", "finished", "refused", "failed"]
JobStatus = Literal["queued", "running", "finished", "failed", "cancelled"]
ExportFormat = Literal["json", "jsonl", "zip", "hf", "coco", "coco_zip"]
IMPORT_DONE = ("finished", "refused", "failed")
JOB_ACTIVE = ("queued", "running")


class Me(TypedDict):
    username: str
    is_superuser: bool


class Project(TypedDict):
    slug: str
    name: str
    protocol: str
    workflow: str
    role: str
    items: int
    annotations_per_item: int


class ImportRun(TypedDict):
    id: int
    project: str
    kind: str
    verified: bool
    format: str | None  # the format the upload named; None: detected (servers before formats: absent)
    strict: bool
    update: bool  # existing items with other content were to be updated (servers before it: absent)
    read_as: str | None  # the format the file was read as, once known
    file_name: str
    file_bytes: int
    status: ImportStatus
    done: bool
    report: dict[str, Any] | None
    error_count: int
    errors: list[str]
    progress: float | None  # progress_bytes / progress_total; None until the worker has opened the file
    progress_bytes: int
    progress_total: int  # the file's size times the importer's passes over it
    created_by: str | None
    created_at: str
    started_at: str | None
    finished_at: str | None
    url: str
    page: str


class Release(TypedDict):
    version: str
    split: str
    item_count: int
    checksum: str
    created_at: str


class JobFailure(TypedDict):
    item: str
    query: str
    error: str
    attempts: int


class UnreadableReply(TypedDict):
    item: str
    query: str
    reason: str
    attempts: int
    json_repairs: int
    reply: str


class JobProgress(TypedDict):
    id: int
    status: JobStatus
    error: str
    model: str
    project: str
    protocol: str
    total: int
    done: int
    failed: int
    percent: float
    rate_per_s: float | None
    eta_s: float | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    started_at: str | None
    finished_at: str | None
    failures: list[JobFailure]
    unreadable: int  # judge replies that stayed unreadable after repairs (scored as missing)
    unreadable_replies: list[UnreadableReply]


class StateLabError(Exception):
    """Anything that kept a request from getting an answer it could use."""


class ConnectionFailed(StateLabError):
    """The server could not be reached (refused, DNS, timeout)."""


class ApiError(StateLabError):
    """The server answered with an error status; `message` is its explanation in one line and
    `errors` the detail lines it gave (field errors, import refusals)."""

    def __init__(
        self,
        status: int,
        message: str,
        errors: list[str] | None = None,
        body: Any = None,
        method: str = "",
        path: str = "",
    ):
        self.status = status
        self.message = message
        self.errors = errors or []
        self.body = body
        self.method = method
        self.path = path
        super().__init__(f"HTTP {status}: {message}")


def error_from_response(response: httpx.Response) -> ApiError:
    """One clear message from an error body: DRF's {"detail"}, ours ({"detail", "errors"}), a
    serializer's {field: [messages]}, or plain text (trimmed; an HTML page gives its status)."""
    body: Any
    try:
        body = response.json()
    except ValueError:
        body = response.text
    message, errors = "", []
    if isinstance(body, dict):
        if isinstance(body.get("detail"), str):
            message = body["detail"]
            extra = body.get("errors")
        else:
            extra = body  # a serializer's field errors
        if isinstance(extra, dict):
            errors = [f"{key}: {_text(value)}" for key, value in extra.items()]
        elif isinstance(extra, list):
            errors = [_text(value) for value in extra]
    elif isinstance(body, list):
        errors = [_text(value) for value in body]
    elif isinstance(body, str) and body.strip() and not body.lstrip().startswith("<"):
        message = " ".join(body.split())[:300]
    if not message:
        if len(errors) == 1:
            message, errors = errors[0], []
        else:
            message = "the request was refused" if errors else (response.reason_phrase or "error")
    request = response.request
    return ApiError(response.status_code, message, errors, body, method=request.method, path=request.url.path)


def _text(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(_text(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_text(v)}" for k, v in value.items())
    return str(value)


class _CountingFile:
    """A file handed to httpx's multipart encoder that reports how many bytes were read (the
    upload's progress). fileno() keeps the size known, so the body has a Content-Length."""

    def __init__(self, file: IO[bytes], on_bytes: Callable[[int, int], None] | None, total: int):
        self._file, self._on_bytes, self._total, self._sent = file, on_bytes, total, 0

    def fileno(self) -> int:
        return self._file.fileno()

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        position = self._file.seek(offset, whence)
        self._sent = position
        return position

    def tell(self) -> int:
        return self._file.tell()

    def read(self, size: int = -1) -> bytes:
        chunk = self._file.read(size)
        self._sent += len(chunk)
        if self._on_bytes is not None:
            self._on_bytes(self._sent, self._total)
        return chunk


def zip_folder(folder: Path, target: Path) -> Path:
    """A zip of the folder's contents (paths relative to it), for an upload. Symbolic links are
    left out: the server refuses them, and what they point to is not the folder's."""
    root = folder.resolve()
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for entry in sorted(folder.rglob("*")):
            if entry.is_symlink() or not entry.is_file() or not entry.resolve().is_relative_to(root):
                continue
            zf.write(entry, entry.relative_to(folder).as_posix())
    return target


def download_name(response: httpx.Response, fallback: str) -> str:
    """The file name of Content-Disposition, reduced to a safe base name."""
    match = re.search(r'filename="?([^";]+)"?', response.headers.get("content-disposition", ""))
    name = Path(match.group(1)).name if match else ""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    return name or fallback


class StateLabClient(Analysis):
    """client = StateLabClient("https://statelab.example.org", token="...")

    Every method raises ApiError for an error status and ConnectionFailed when the server cannot
    be reached. Waiting methods poll every `poll` seconds and call `on_poll` with each answer."""

    def __init__(self, url: str, token: str, *, timeout: float = 60.0, transport: httpx.BaseTransport | None = None):
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Token {token}", "Accept": "application/json", "User-Agent": "statelab-client"},
            timeout=timeout,
            transport=transport,
        )

    def __enter__(self) -> StateLabClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # --- plumbing -------------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"cannot reach {self.url}: {exc}") from exc
        if response.status_code >= 400:
            raise error_from_response(response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, **kwargs).json()

    # --- account and projects -------------------------------------------------------------

    def me(self) -> Me:
        return self._json("GET", "/api/me/")

    def projects(self) -> list[Project]:
        return self._json("GET", "/api/projects/")

    # --- imports --------------------------------------------------------------------------

    def import_upload(
        self,
        slug: str,
        path: str | Path,
        *,
        verified: bool = False,
        annotations: bool = False,
        format: str | None = None,
        strict: bool = False,
        update: bool = False,
        on_bytes: Callable[[int, int], None] | None = None,
        on_zip: Callable[[int, int], None] | None = None,
    ) -> ImportRun:
        """Upload items (.jsonl, .json or .zip, or a file in one of the protocol's authors' formats;
        or, with annotations=True, ratings/answers) and return the queued run (the server imports
        it in the background). A folder (an authors' release laid out in folders) is sent as a zip
        of its contents. `format` names the items' format (None: the server detects it); `strict`
        refuses fields the protocol does not know; `update` lets items whose id the project holds
        with other content take the file's content (a later release of the file). A .jsonl file
        of items whose lines name files beside it (relative paths inside its folder) is sent as a
        zip of the file and those files (statelab_client/media.py); `on_zip(done, total)` counts the files zipped."""
        path = Path(path)
        media = media_named(path) if path.is_file() and path.suffix == ".jsonl" and not annotations else []
        if media or path.is_dir():
            with tempfile.TemporaryDirectory(prefix="statelab-upload-") as work:
                target = Path(work) / f"{(path.stem if media else path.name) or 'upload'}.zip"
                zipped = zip_with_media(path, media, target, on_file=on_zip) if media else zip_folder(path, target)
                return self.import_upload(
                    slug,
                    zipped,
                    verified=verified,
                    annotations=annotations,
                    format=format,
                    strict=strict,
                    update=update,
                    on_bytes=on_bytes,
                )
        endpoint = "annotation-imports" if annotations else "imports"
        total = path.stat().st_size
        with path.open("rb") as file:
            upload = _CountingFile(file, on_bytes, total)
            data: dict[str, str] = {}
            if not annotations:
                data = {"verified": "true" if verified else "false", "strict": "true" if strict else "false"}
                if format:
                    data["format"] = format
                if update:
                    data["update"] = "true"
            return self._json(
                "POST",
                f"/api/projects/{slug}/{endpoint}/",
                data=data,
                files={"file": (path.name, upload, "application/octet-stream")},
            )  # type: ignore[dict-item]

    def import_run(self, run_id: int) -> ImportRun:
        return self._json("GET", f"/api/imports/{run_id}/")

    def import_runs(self, slug: str) -> list[ImportRun]:
        return self._json("GET", f"/api/projects/{slug}/imports/")

    def wait_import(
        self,
        run: ImportRun | int,
        *,
        poll: float = 1.0,
        timeout: float | None = None,
        on_poll: Callable[[ImportRun], None] | None = None,
    ) -> ImportRun:
        """Poll the run until it is finished, refused or failed (TimeoutError past `timeout`);
        `on_poll` gets each answer (its `progress`: how far the worker has read the file)."""
        run_id = run if isinstance(run, int) else run["id"]
        started = time.monotonic()
        while True:
            current = self.import_run(run_id)
            if on_poll is not None:
                on_poll(current)
            if current["status"] in IMPORT_DONE:
                return current
            if timeout is not None and time.monotonic() - started > timeout:
                raise TimeoutError(f"import run {run_id} still {current['status']} after {timeout:g} s")
            time.sleep(poll)

    # --- releases -------------------------------------------------------------------------

    def releases(self, slug: str) -> list[Release]:
        return self._json("GET", f"/api/projects/{slug}/releases/")

    def freeze(self, slug: str, version: str, *, split: str = "test") -> Release:
        return self._json("POST", f"/api/projects/{slug}/releases/", json={"version": version, "split": split})

    def export(
        self,
        slug: str,
        version: str,
        dest: str | Path | None = None,
        *,
        fmt: ExportFormat | str = "json",
        on_bytes: Callable[[int, int | None], None] | None = None,
        chunk_size: int = 1 << 16,
    ) -> Path:
        """Stream the release to `dest` (a file, or a folder to put the server's file name in;
        default: that name in the working directory) in chunks; returns the path written. The
        file appears only once complete (written to a .part file, then renamed). `fmt` is one of the
        project's own formats or the name of an authors' format its protocol writes (a zip of the
        paper's own files); the server refuses one the project does not export to, naming those it does."""
        path = f"/api/projects/{slug}/releases/{version}/export/"
        try:
            with self._http.stream("GET", path, params={"fmt": fmt}) as response:
                if response.status_code >= 400:
                    response.read()
                    raise error_from_response(response)
                name = download_name(response, f"{slug}-{version}.{fmt}")
                target = Path(dest) if dest is not None else Path(name)
                if dest is not None and str(dest).endswith(("/", os.sep)):
                    target.mkdir(parents=True, exist_ok=True)
                if target.is_dir():
                    target = target / name
                length = response.headers.get("content-length")
                total = int(length) if length and length.isdigit() else None
                partial = target.with_name(target.name + ".part")
                written = 0
                try:
                    with partial.open("wb") as out:
                        for chunk in response.iter_bytes(chunk_size):
                            out.write(chunk)
                            written += len(chunk)
                            if on_bytes is not None:
                                on_bytes(written, total)
                    partial.replace(target)
                finally:
                    partial.unlink(missing_ok=True)
        except httpx.TransportError as exc:
            raise ConnectionFailed(f"cannot reach {self.url}: {exc}") from exc
        return target

    # --- inference jobs -------------------------------------------------------------------

    def launch_job(
        self,
        slug: str,
        endpoint: str,
        *,
        release: str | None = None,
        mode: str = "evaluate",
        params: dict[str, Any] | None = None,
    ) -> JobProgress:
        body: dict[str, Any] = {"endpoint": endpoint, "mode": mode, "params": params or {}}
        if release:
            body["release"] = release
        return self._json("POST", f"/api/projects/{slug}/jobs/", json=body)

    def job_progress(self, job_id: int) -> JobProgress:
        return self._json("GET", f"/api/jobs/{job_id}/progress/")

    def cancel_job(self, job_id: int) -> bool:
        """True when the job was cancelled; False when it had already ended (the server's 409)."""
        try:
            return bool(self._json("POST", f"/api/jobs/{job_id}/cancel/")["cancelled"])
        except ApiError as exc:
            if exc.status == 409:
                return False
            raise

    def wait_job(
        self,
        job_id: int,
        *,
        poll: float = 2.0,
        timeout: float | None = None,
        on_poll: Callable[[JobProgress], None] | None = None,
    ) -> JobProgress:
        """Poll the job's progress until it is no longer queued or running."""
        started = time.monotonic()
        while True:
            progress = self.job_progress(job_id)
            if on_poll is not None:
                on_poll(progress)
            if progress["status"] not in JOB_ACTIVE:
                return progress
            if timeout is not None and time.monotonic() - started > timeout:
                raise TimeoutError(f"job {job_id} still {progress['status']} after {timeout:g} s")
            time.sleep(poll)
