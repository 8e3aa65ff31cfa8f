"""Frames prepared off the GPU path: a job over videos whose chunks run on the gpu queue (vLLM;
any job with the param ``prepare_frames``) first sends one tracked "prepare frames" run per chunk
to the default queue, where CPU workers decode that chunk's frames into the frame cache
(inference.media: seek per frame or one pass, as the probe says); when a prepare run is done it
sends its chunk, so the GPU worker reads frames from the cache and decodes nothing.

The frame cache is a folder on each host (CACHE_ROOT/frames). With object storage (MEDIA_STORAGE
S3: no folder shared between hosts) a host that decodes a video's frames also copies the cache
entry to the bucket (`cache/frames/...`), and a host that misses one copies it from there before
it would decode (StoredFrameCache): a GPU worker on another host than the CPU workers still
decodes nothing. A chunk that finds frames missing anyway (a cleared cache, a failed preparation)
decodes them itself and logs a warning with the count (chunks.py); a prepare run that failed for
good still sends its chunk (recovery.py), so the job goes on, slower.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from annotation.protocols import MEDIA_FIELDS
from config.storage import is_local, is_missing
from protocols.kit.prompting import frames_param

from ..media import DEFAULT_BOUND, MediaError
from ..models import Backend, BackgroundRun, InferenceJob, JobStatus
from ..prompting import MediaPreparer, get_protocol
from .inputs import item_inputs, media_file
from .runs import runs_enqueue_on_commit

log = logging.getLogger(__name__)

PREPARE_TASK = "inference.tasks.prepare_frames"


def chunk_task(job: InferenceJob) -> str:
    return "inference.tasks.run_gpu_chunk" if job.endpoint.backend == Backend.VLLM else "inference.tasks.run_api_chunk"


def video_fields(protocol: str) -> list[str]:
    return [name for name, kind in MEDIA_FIELDS.get(protocol, {}).items() if kind == "video"]


def job_prepares_frames(job: InferenceJob) -> bool:
    """Video protocols on the gpu queue prepare their frames first; the ``prepare_frames`` param
    turns it on (or off) for any backend."""
    if not video_fields(job.protocol):
        return False
    wanted = job.params.get("prepare_frames")
    if wanted is not None:
        return bool(wanted)
    return job.endpoint is not None and job.endpoint.backend == Backend.VLLM


class StoredFrameCache:
    """Frame-cache entries shared through the media storage (see the module docstring). An entry
    is a folder of JPEG frames and its `frames.json` (which lists them); in the storage it is
    `cache/<the folder's path under CACHE_ROOT>/`, `frames.json` written last, so an entry whose
    `frames.json` is there is whole. The storage is a cache here: an error reading or writing it
    is logged and the frames are decoded (or kept) locally."""

    MARKER = "frames.json"

    def __init__(self, cache_root, storage=None):
        self.cache_root = Path(cache_root)
        self.storage = storage or default_storage

    def _name(self, folder: Path) -> str:
        return "cache/" + folder.relative_to(self.cache_root).as_posix()

    def push(self, folder: Path) -> None:
        """Share the entry unless the storage has it whole already (its frames.json is there)."""
        name = self._name(folder)
        try:
            if self.storage.exists(f"{name}/{self.MARKER}"):
                return
            files = json.loads((folder / self.MARKER).read_text())["files"]
            for file in [*files, self.MARKER]:
                # (No whole entry is there, so nobody reads these: a part left by a failed push
                # is replaced, under its own name whatever the storage's overwrite option.)
                self.storage.delete(f"{name}/{file}")
                self.storage.save(f"{name}/{file}", ContentFile((folder / file).read_bytes()))
        except Exception as exc:  # noqa: BLE001 (a cache: the frames stay on this host)
            log.warning("frames %s not shared through the storage: %s", name, exc)

    def pull(self, folder: Path, n: int) -> bool:
        """Copy the entry of `n` frames into `folder` (renamed into place whole); False when it is
        not stored, or stored unlike an entry of n frames (then the frames are decoded here)."""
        name = self._name(folder)
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
        try:
            with self.storage.open(f"{name}/{self.MARKER}", "rb") as fh:
                marker = fh.read()
            files = _entry_files(json.loads(marker), n)
            for file in files:
                with self.storage.open(f"{name}/{file}", "rb") as src, open(tmp / file, "wb") as out:
                    shutil.copyfileobj(src, out)
            (tmp / self.MARKER).write_bytes(marker)
            tmp.rename(folder)
        except Exception as exc:  # noqa: BLE001 (the storage's errors, a bad entry: a cache, so decode instead)
            shutil.rmtree(tmp, ignore_errors=True)
            if folder.is_dir():  # another worker renamed its copy into place first
                return True
            if not is_missing(exc):
                log.warning("frames %s not read from the storage: %s", name, exc)
            return False
        return True


def _entry_files(meta, n: int) -> list[str]:
    """The frame files a frames.json from the storage lists, checked to be what sample_frames
    writes when asked for n frames (1 to n of them: a short clip, keyframes shared; their names,
    frame numbers, size), else ValueError."""
    count = len(meta.get("files") or []) if isinstance(meta, dict) and isinstance(meta.get("files"), list) else 0
    files = [f"frame_{k:04d}.jpg" for k in range(count)]
    ok = (
        1 <= count <= n
        and meta["files"] == files
        and isinstance(meta.get("indices"), list)
        and len(meta["indices"]) == count
        and all(type(i) is int and i >= 0 for i in meta["indices"])
        and isinstance(meta.get("size"), list)
        and len(meta["size"]) == 2
        and all(type(v) is int and v > 0 for v in meta["size"])
        and type(meta.get("source_frames")) is int
    )
    if not ok:
        raise ValueError(f"not a frame-cache entry of {n} frames")
    return files


def job_media(job: InferenceJob, *, preparing: bool = False) -> MediaPreparer:
    """The media preparer of a job's chunks and of its frame preparation (`preparing`): the same
    bound and frames mode, hence the same frame-cache entries; shared through the storage when it
    is not a folder of this host (the preparation shares what it finds cached here, too)."""
    bound = int(job.params.get("bound", DEFAULT_BOUND[0]))
    shared = None if is_local() else StoredFrameCache(settings.CACHE_ROOT)
    return MediaPreparer(
        cache_root=settings.CACHE_ROOT,
        bound=(bound, bound),
        fetch=media_file,
        frames_mode=job.params.get("frames_mode") or "exact",
        shared=shared,
        share_cached=preparing,
    )


def job_frames_per_video(job: InferenceJob) -> int:
    return frames_param(job.params, get_protocol(job.protocol).DEFAULT_FRAMES)


def chunks_enqueue(*, job: InferenceJob, chunks: list[list[int]]) -> None:
    """Send the job's chunks once the transaction commits: through frame preparation when the
    job prepares frames, else straight to their queue."""
    if job_prepares_frames(job):
        runs_enqueue_on_commit(
            PREPARE_TASK, [(job.pk, chunk) for chunk in chunks], queue="default", job=job, chunks=True
        )
    else:
        runs_enqueue_on_commit(chunk_task(job), [(job.pk, chunk) for chunk in chunks], job=job, chunks=True)


def job_prepare_frames(*, job_id: int, item_ids: list[int]) -> int:
    """Decode the frames of these items' videos into the frame cache, then send their chunk.
    Returns how many videos were decoded (cached ones cost nothing). A video that cannot be read
    is left to the chunk, which fails that item with the reason."""
    job = InferenceJob.objects.select_related("endpoint", "project", "release").get(pk=job_id)
    if job.status != JobStatus.RUNNING:
        return 0  # cancelled or failed meanwhile: nothing to prepare, nothing to send
    media, n = job_media(job, preparing=True), job_frames_per_video(job)
    for item in item_inputs(job, item_ids):
        for field in video_fields(job.protocol):
            try:
                media.frames(
                    item.media_paths.get(field),
                    n,
                    content_hash=item.media_hashes.get(field),
                    known=item.media_info.get(field),
                )
            except MediaError as exc:
                log.info("job %s: frames of item %s %s not prepared: %s", job.pk, item.item_pk, field, exc)
    chunk_after_frames(job_id=job.pk, item_ids=item_ids)
    return media.videos_decoded


@transaction.atomic
def chunk_after_frames(*, job_id: int, item_ids: list[int]) -> bool:
    """Send the chunk of these items, once per preparation: a prepare run repeated after a lost
    worker finds its chunk already sent (a retry's new preparation sends a new one). False when
    the job is no longer running or the chunk exists."""
    job = InferenceJob.objects.select_for_update(of=("self",)).select_related("endpoint").get(pk=job_id)
    if job.status != JobStatus.RUNNING:
        return False
    celery_task, args = chunk_task(job), [job.pk, list(item_ids)]
    prepared = BackgroundRun.objects.filter(job=job, celery_task=PREPARE_TASK, args=args).order_by("-pk").first()
    if BackgroundRun.objects.filter(
        job=job, celery_task=celery_task, args=args, pk__gt=prepared.pk if prepared else 0
    ).exists():
        return False
    runs_enqueue_on_commit(celery_task, [(job.pk, list(item_ids))], job=job, chunks=True)
    return True
