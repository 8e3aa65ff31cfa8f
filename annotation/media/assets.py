"""Media validation and content-addressed storage.

- Images are opened with Pillow: the header's pixel count is checked against
  ``settings.IMPORT_MAX_IMAGE_PIXELS`` *before* any decoding (a small file can expand to
  gigabytes: a decompression bomb), then the file is verified and fully decoded once so a
  truncated or corrupt image is refused at import, not when an annotator opens it.
- Videos are probed by annotation/media/probe.py (ffprobe, or ``ffmpeg -i`` where only the ffmpeg
  binary bundled by imageio-ffmpeg exists): a file must hold a real video stream in a container
  on the allow-list (VIDEO_CONTAINERS; one that matches its extension when the name claims a
  video extension) and must decode its first frame. Width, height, duration, fps and frame count
  are recorded; width and height as shown, after the stream's rotation (a phone video stored
  1920x1080 with a quarter turn is 1080x1920, as browsers play it), as for an image's EXIF
  orientation. Assets imported before that keep the stored size they recorded: nothing lays
  out or scales a video by it (the player sizes itself from the file, and frames for models are
  fitted from each decoded frame's own size), so they are left as they are rather than re-probed.
- The stored extension comes from what the file *is* (Pillow's format, the probed container), on
  an allow-list, never from its name: a PNG named ``poly.html`` is stored as ``.png`` and an MP4
  named ``v.html`` as ``.mp4`` (media are untrusted bytes; DESIGN, invariants). The name's own
  extension is kept only where it is one of that format's usual ones (``.jpeg`` for a JPEG).
- Every accepted file is stored once under ``MEDIA_ROOT/assets/<sha[:2]>/<sha256><ext>`` and
  recorded as a `MediaAsset` keyed by its SHA-256 (content-hash dedup across projects). The
  project whose import brought the file is recorded as one of its owners (`ProjectAsset`, one row
  per project that brought those bytes): who may fetch the file is decided from those rows
  (annotation/media/access.py), never from an item's media JSON.
"""

from __future__ import annotations

import re
import subprocess
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage

from ..models import MediaAsset, ProjectAsset
from .probe import MediaError, NoVideoStream, VideoUnreadable, ffmpeg_exe, probe_video, sha256_of

IMAGE_FORMATS = {"JPEG", "PNG", "WEBP", "BMP", "GIF", "TIFF"}
# Pillow format -> extensions it is stored under (the first unless the name gives another listed).
IMAGE_EXTENSIONS = {
    "JPEG": (".jpg", ".jpeg", ".jpe"),
    "PNG": (".png",),
    "WEBP": (".webp",),
    "BMP": (".bmp",),
    "GIF": (".gif",),
    "TIFF": (".tiff", ".tif"),
}
# Extension -> container names ffprobe may report for it (a file must be what it claims to be).
VIDEO_CONTAINERS = {
    ".mp4": ("mp4", "mov"),
    ".m4v": ("mp4", "mov"),
    ".mov": ("mov", "mp4"),
    ".webm": ("webm", "matroska"),
    ".mkv": ("matroska", "webm"),
    ".avi": ("avi",),
    ".mpg": ("mpeg",),
    ".mpeg": ("mpeg",),
    ".ogv": ("ogg",),
}
VIDEO_EXTENSIONS = set(VIDEO_CONTAINERS)
# What a file whose name claims no video extension is stored as, by the container ffprobe reports
# (first match in this order; matroska holding VP8/VP9/AV1 is WebM).
CONTAINER_EXTENSIONS = (
    ("mp4", ".mp4"),
    ("mov", ".mp4"),
    ("webm", ".webm"),
    ("matroska", ".mkv"),
    ("avi", ".avi"),
    ("mpeg", ".mpg"),
    ("ogg", ".ogv"),
)
WEBM_CODECS = {"vp8", "vp9", "av1"}


class MediaRefused(Exception):
    """A media file that must not be imported; the message says why."""


@dataclass(frozen=True)
class MediaInfo:
    kind: str  # "image" | "video"
    sha256: str
    size_bytes: int
    ext: str
    mime: str
    width: int | None = None
    height: int | None = None
    duration: float | None = None
    fps: float | None = None
    frame_count: int | None = None


def _ext_of(name: str) -> str:
    suffix = Path(name).suffix.lower()
    return suffix if re.fullmatch(r"\.[a-z0-9]{1,8}", suffix) else ""


def inspect_media(path: Path, kind: str, *, name: str | None = None) -> MediaInfo:
    """Validate one local file as `kind` ("image" or "video"); raise MediaRefused if it is not."""
    size = path.stat().st_size
    if size > settings.IMPORT_MAX_FILE_BYTES:
        raise MediaRefused(f"file is {size} bytes, above the limit of {settings.IMPORT_MAX_FILE_BYTES}")
    if size == 0:
        raise MediaRefused("file is empty")
    ext = _ext_of(name or path.name)
    if kind == "image":
        return inspect_image(path, ext=ext)
    return inspect_video(path, ext=ext)


def known_media(path: Path, kind: str, *, name: str | None = None) -> MediaInfo | None:
    """The recorded info of a file already validated and stored (same content hash and kind).

    Re-imports and files shared between projects then cost one hash instead of a decode/probe.
    """
    sha, size = sha256_of(path)
    asset = MediaAsset.objects.filter(sha256=sha, kind=kind).first()
    if asset is None:
        return None
    return MediaInfo(
        kind=asset.kind,
        sha256=sha,
        size_bytes=size,
        ext=Path(asset.file.name).suffix,
        mime=asset.mime,
        width=asset.width,
        height=asset.height,
        duration=asset.duration,
        fps=asset.fps,
        frame_count=asset.frame_count,
    )


# --- images -------------------------------------------------------------------------------------


def inspect_image(path: Path, *, ext: str = "", max_pixels: int | None = None) -> MediaInfo:
    from PIL import Image, UnidentifiedImageError

    limit = max_pixels if max_pixels is not None else settings.IMPORT_MAX_IMAGE_PIXELS
    try:
        with warnings.catch_warnings():
            # Pillow's own bomb guard (a warning, then an error at 2x its global limit) must
            # never let a bomb through as a mere warning.
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as im:  # reads the header only
                width, height = im.size
                fmt = im.format
                if width * height > limit:
                    raise MediaRefused(
                        f"image is {width}×{height} = {width * height} pixels, above the limit of {limit} "
                        "(decompression bomb?)"
                    )
                if fmt not in IMAGE_FORMATS:
                    raise MediaRefused(f"unsupported image format {fmt}")
                im.verify()
            with Image.open(path) as im:
                im.load()  # a full decode catches truncated data that verify() misses
                # Sizes as shown: browsers apply the EXIF orientation (naturalWidth), and so do
                # crops for models (inference.media.load_image), so boxes live in these pixels.
                if im.getexif().get(0x0112) in (5, 6, 7, 8):  # rotated a quarter turn
                    width, height = height, width
    except MediaRefused:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise MediaRefused(f"image refused as a decompression bomb ({exc})") from exc
    except UnidentifiedImageError as exc:
        raise MediaRefused("not a readable image") from exc
    except (OSError, SyntaxError, ValueError) as exc:
        raise MediaRefused(f"corrupt image ({exc})") from exc
    sha, size = sha256_of(path)
    allowed = IMAGE_EXTENSIONS[fmt]
    return MediaInfo(
        kind="image",
        sha256=sha,
        size_bytes=size,
        ext=ext if ext in allowed else allowed[0],  # from the format, never from the name alone
        mime=Image.MIME.get(fmt, ""),
        width=width,
        height=height,
    )


# --- videos -------------------------------------------------------------------------------------


def _decodes_first_frame(exe: str, path: Path) -> str | None:
    proc = subprocess.run(
        [exe, "-v", "error", "-i", str(path), "-map", "0:v:0", "-frames:v", "1", "-f", "null", "-"],
        capture_output=True,
        timeout=60,
    )
    if proc.returncode != 0:
        return (proc.stderr.decode("utf-8", "replace").strip().splitlines() or ["decode failed"])[-1][:200]
    return None


def _container_ext(formats: set[str], codec: str) -> str | None:
    """The allow-listed extension of a probed container, or None when it is on no list."""
    if "webm" in formats and "matroska" in formats:
        return ".webm" if codec in WEBM_CODECS else ".mkv"
    return next((ext for name, ext in CONTAINER_EXTENSIONS if name in formats), None)


def inspect_video(path: Path, *, ext: str = "") -> MediaInfo:
    """Validate one local video (see the module docstring); raise MediaRefused if it is not one."""
    try:
        probed = probe_video(path, count_frames=False)  # the container's frame count will do
    except NoVideoStream:
        raise MediaRefused("holds no video stream") from None
    except VideoUnreadable as exc:
        raise MediaRefused(f"not a readable video ({exc.tool}: {exc.detail[:200]})") from None
    except MediaError as exc:
        raise MediaRefused(str(exc)) from None
    container = probed.format
    formats = set(container.split(","))
    if any(f == "image2" or f.endswith("_pipe") for f in formats) or container in ("gif", "apng"):
        raise MediaRefused(f"is a still image ({container}), not a video")
    claimed = VIDEO_CONTAINERS.get(ext)
    if claimed and not formats & set(claimed):
        raise MediaRefused(f"claims to be {ext} but its container is {container}")
    if not claimed:  # the name claims no video type (v.html): the container alone decides
        ext = _container_ext(formats, probed.codec)
        if ext is None:
            raise MediaRefused(
                f"container {container} is not an allowed video format ({', '.join(sorted(VIDEO_EXTENSIONS))})"
            )
    if not probed.width or not probed.height:
        raise MediaRefused("video stream without a frame size")
    if not probed.duration or probed.duration <= 0:
        raise MediaRefused("video has no duration")
    failure = _decodes_first_frame(ffmpeg_exe(), path)
    if failure:
        raise MediaRefused(f"video does not decode ({failure})")
    fps = probed.fps
    frames = probed.frame_count or (round(probed.duration * fps) if fps else None)
    sha, size = sha256_of(path)
    mime = {".webm": "video/webm", ".mkv": "video/x-matroska", ".avi": "video/x-msvideo", ".mov": "video/quicktime"}
    return MediaInfo(
        kind="video",
        sha256=sha,
        size_bytes=size,
        ext=ext,
        mime=mime.get(ext, "video/mp4"),
        width=int(probed.width),  # as shown: the probe has applied the rotation
        height=int(probed.height),
        duration=round(float(probed.duration), 4),
        fps=round(fps, 4) if fps else None,
        frame_count=frames,
    )


# --- storage ------------------------------------------------------------------------------------


def asset_name(info: MediaInfo) -> str:
    return f"assets/{info.sha256[:2]}/{info.sha256}{info.ext}"


def assets_store(
    *,
    media: Iterable[tuple[MediaInfo, str]],
    open_file: Callable[[str], BinaryIO],
    written: list[str],
    project=None,
) -> dict[str, int]:
    """Make sure every (info, source path) has a MediaAsset and a stored file, owned by `project`
    (the project importing them; see assets_own).

    Existing assets (same sha256) are reused, so the same file is stored once however many
    items or projects use it. Files this call writes are appended to `written` so that the
    caller can delete them when its transaction rolls back. Returns sha256 -> asset id.
    """
    by_sha: dict[str, tuple[MediaInfo, str]] = {}
    for info, source in media:
        by_sha.setdefault(info.sha256, (info, source))
    ids: dict[str, int] = {}
    shas = list(by_sha)
    for start in range(0, len(shas), 1000):
        chunk = shas[start : start + 1000]
        ids.update(MediaAsset.objects.filter(sha256__in=chunk).values_list("sha256", "id"))
    new_assets = []
    for sha, (info, source) in by_sha.items():
        if sha in ids:
            continue
        name = asset_name(info)
        if not default_storage.exists(name):
            with open_file(source) as fh:
                stored = default_storage.save(name, File(fh, name=Path(name).name))
            written.append(stored)
            name = stored
        new_assets.append(
            MediaAsset(
                sha256=sha,
                kind=info.kind,
                file=name,
                original_name=source[-500:],
                mime=info.mime,
                size_bytes=info.size_bytes,
                width=info.width,
                height=info.height,
                duration=info.duration,
                fps=info.fps,
                frame_count=info.frame_count,
            )
        )
    if new_assets:
        MediaAsset.objects.bulk_create(new_assets, batch_size=500, ignore_conflicts=True)
        for start in range(0, len(new_assets), 1000):
            chunk = [a.sha256 for a in new_assets[start : start + 1000]]
            ids.update(MediaAsset.objects.filter(sha256__in=chunk).values_list("sha256", "id"))
    if project is not None:
        assets_own(project, ids.values())
    return ids


def assets_own(project, asset_ids: Iterable[int]) -> None:
    """Record `project` as an owner of the assets (its import brought their bytes); its members
    may then fetch them. In the caller's transaction, so a rolled back import owns nothing."""
    rows = [ProjectAsset(project=project, asset_id=pk) for pk in set(asset_ids)]
    ProjectAsset.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)


def delete_stored(names: Iterable[str]) -> None:
    """Remove files written by an import that was rolled back."""
    for name in names:
        try:
            default_storage.delete(name)
        except OSError:
            pass
