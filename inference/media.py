"""Media preparation for model queries: video frames and images. Plain Python, no Django.

Frames: N uniformly spaced frames of a video in ONE decode pass (ffmpeg `select` filter), resized
to fit a bound (448x448 by default), cached on disk by (content hash, N, bound) so a re-run or a
second job never decodes the same video twice. Images: resized to fit the same bound and
optionally cropped to an annotated box `[x, y, width, height]` in image pixels.

Videos are probed (exact frame count, no decoding) by annotation.media_probe, which holds the one
probe, ffmpeg_exe, file hash and `MediaError` of both apps. A video ffmpeg cannot read raises
`MediaError` with a message naming the file; callers fail that item only.
"""
from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import ffmpeg
import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from annotation.media_probe import MediaError, VideoInfo, ffmpeg_exe, last_line, probe_video, sha256_of

DEFAULT_BOUND = (448, 448)
JPEG_QUALITY = 90
CACHE_FORMAT = 1  # bump when the cached layout or the resizing changes


class FrameCountMismatch(MediaError):
    """ffmpeg returned fewer frames than asked for (the frame count used was wrong)."""


def fit_within(width: int, height: int, bound: tuple[int, int]) -> tuple[int, int]:
    """Largest size with the same aspect ratio that fits the bound; never upscales."""
    bw, bh = bound
    scale = min(bw / width, bh / height, 1.0)
    return max(1, round(width * scale)), max(1, round(height * scale))


def uniform_indices(total: int, n: int) -> list[int]:
    """N frame indices spaced uniformly over `total` frames: the centre of each of N equal segments."""
    if total <= 0 or n <= 0:
        return []
    if n >= total:
        return list(range(total))
    return [int((i + 0.5) * total / n) for i in range(n)]


def decode_frames(path: str | os.PathLike, indices: list[int], size: tuple[int, int]) -> list[np.ndarray]:
    """Decode exactly the frames at `indices`, scaled to `size`, in one ffmpeg pass."""
    width, height = size
    expr = "+".join(f"eq(n,{i})" for i in indices)  # ffmpeg-python escapes the commas itself
    stream = (
        ffmpeg.input(str(path))
        .video.filter("select", expr)
        .filter("scale", width, height)
        .output("pipe:", format="rawvideo", pix_fmt="rgb24", fps_mode="vfr")
    )
    try:
        out, _ = stream.run(cmd=ffmpeg_exe(), capture_stdout=True, capture_stderr=True)
    except ffmpeg.Error as exc:
        raise MediaError(f"ffmpeg cannot decode video {Path(path).name}: {last_line(exc.stderr, 'unknown error')}") from None
    frame_bytes = width * height * 3
    got = len(out) // frame_bytes
    if got != len(indices):
        raise FrameCountMismatch(f"ffmpeg returned {got} of {len(indices)} frames from video {Path(path).name}")
    array = np.frombuffer(out, dtype=np.uint8).reshape(got, height, width, 3)
    return [array[k] for k in range(got)]


def decode_all_frames(path: str | os.PathLike, size: tuple[int, int]) -> np.ndarray:
    """Every frame, scaled (the slow reference the benchmark compares against)."""
    width, height = size
    out, _ = (
        ffmpeg.input(str(path))
        .video.filter("scale", width, height)
        .output("pipe:", format="rawvideo", pix_fmt="rgb24")
        .run(cmd=ffmpeg_exe(), capture_stdout=True, capture_stderr=True)
    )
    return np.frombuffer(out, dtype=np.uint8).reshape(-1, height, width, 3)


@dataclass(frozen=True)
class Frames:
    """Sampled frames on disk (JPEG) with the indices they came from."""

    paths: list[Path]
    indices: list[int]
    size: tuple[int, int]
    source_frames: int


def sample_frames(
    path: str | os.PathLike,
    n: int,
    *,
    cache_root: str | os.PathLike,
    bound: tuple[int, int] = DEFAULT_BOUND,
    content_hash: str | None = None,
    known: VideoInfo | None = None,
) -> Frames:
    """N uniformly spaced frames of a video, cached under cache_root/frames/<hash>/<n>_<w>x<h>/."""
    if n < 1:
        raise ValueError("n must be at least 1")
    digest = content_hash or sha256_of(path)[0]
    folder = Path(cache_root) / "frames" / digest[:2] / digest / f"v{CACHE_FORMAT}_{n}_{bound[0]}x{bound[1]}"
    meta_path = folder / "frames.json"
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        return Frames([folder / f for f in meta["files"]], meta["indices"], tuple(meta["size"]), meta["source_frames"])
    # Known metadata (an imported asset's width, height and frame count) saves the ffprobe pass;
    # if the container's frame count was wrong, the decode returns fewer frames and we probe.
    try:
        info = known if known and known.frame_count > 0 else probe_video(path)
        size = fit_within(info.width, info.height, bound)
        indices = uniform_indices(info.frame_count, n)
        arrays = decode_frames(path, indices, size)
    except FrameCountMismatch:
        info = probe_video(path)
        size = fit_within(info.width, info.height, bound)
        indices = uniform_indices(info.frame_count, n)
        arrays = decode_frames(path, indices, size)
    # Write into a private folder and rename it into place, so concurrent workers never see half a cache.
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".tmp-"))
    files = []
    for k, arr in enumerate(arrays):
        name = f"frame_{k:04d}.jpg"
        Image.fromarray(arr).save(tmp / name, format="JPEG", quality=JPEG_QUALITY)
        files.append(name)
    (tmp / "frames.json").write_text(
        json.dumps({"files": files, "indices": indices, "size": list(size), "source_frames": info.frame_count})
    )
    try:
        tmp.rename(folder)
    except OSError:  # another worker finished first: use theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return Frames([folder / f for f in files], indices, size, info.frame_count)


def load_image(
    path: str | os.PathLike,
    *,
    bound: tuple[int, int] = DEFAULT_BOUND,
    bbox: list[float] | tuple[float, ...] | None = None,
) -> Image.Image:
    """An RGB image, cropped to bbox [x, y, w, h] (clipped to the image) and resized to fit the bound."""
    name = Path(path).name
    try:
        with Image.open(path) as img:
            img.load()
            # Upright as people see it (the browser applies the EXIF orientation too), so a box drawn
            # on the annotation page crops the same pixels here.
            image = ImageOps.exif_transpose(img).convert("RGB")
    except (OSError, UnidentifiedImageError) as exc:
        raise MediaError(f"cannot read image {name}: {exc}") from None
    if bbox is not None:
        x, y, w, h = (float(v) for v in bbox)
        left, top = max(0, int(round(x))), max(0, int(round(y)))
        right, bottom = min(image.width, int(round(x + w))), min(image.height, int(round(y + h)))
        if right <= left or bottom <= top:
            raise MediaError(f"box {list(bbox)} lies outside image {name} ({image.width}x{image.height})")
        image = image.crop((left, top, right, bottom))
    size = fit_within(image.width, image.height, bound)
    if size != image.size:
        image = image.resize(size, Image.Resampling.BICUBIC)
    return image


def image_data_url(image: Image.Image) -> str:
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=JPEG_QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def file_data_url(path: str | os.PathLike) -> str:
    """A cached JPEG frame as a data URL, without re-encoding."""
    return "data:image/jpeg;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def make_test_video(path: str | os.PathLike, *, seconds: float = 1, size: str = "64x48", rate: int = 10) -> Path:
    """A synthetic video (ffmpeg testsrc) for tests and benchmarks."""
    subprocess.run(
        [ffmpeg_exe(), "-y", "-loglevel", "error", "-f", "lavfi", "-i", f"testsrc=duration={seconds}:size={size}:rate={rate}",
         "-pix_fmt", "yuv420p", "-g", str(10**6), str(path)],
        check=True,
    )
    return Path(path)
