"""Media preparation for model queries: video frames and images. Plain Python, no Django.

Frames: N uniformly spaced frames of a video, decoded by `extract_frames` (one ffmpeg `select`
pass, or a seek per frame where the clip's keyframe spacing makes that faster, or the nearest
keyframes in keyframe mode: video_frames.py), resized to fit a bound (448x448 by default), cached
on disk by (content hash, N, bound, mode) so a re-run or a second job never decodes the same video
twice, and a job's gpu chunks read frames its CPU workers prepared (services/frames.py).
Images: resized to fit the same bound and optionally cropped to an annotated box
`[x, y, width, height]` in image pixels.

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

from . import video_frames
from .video_frames import FrameCountMismatch

DEFAULT_BOUND = (448, 448)
JPEG_QUALITY = 90
CACHE_FORMAT = 1  # bump when the cached layout or the resizing changes


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


FRAME_MODES = ("exact", "keyframe")


def extract_frames(
    path: str | os.PathLike, indices: list[int], size: tuple[int, int], *, total: int, mode: str = "exact"
) -> tuple[list[np.ndarray], list[int]]:
    """The one place frames are decoded: (frames, the frame numbers they really are). Exact mode
    seeks per frame where the probe says that beats one pass (video_frames), else one pass;
    keyframe mode takes the nearest keyframes and says which."""
    if mode == "keyframe":
        fps = None if video_frames.ffprobe_exe() else probe_video(path, count_frames=False).fps
        return video_frames.decode_keyframes(path, indices, size, fps)
    # A short clip is read in one pass without probing: seeking cannot win there.
    if total > len(indices) * (video_frames.OPEN_COST_FRAMES + 4) + 150:
        layout = video_frames.probe_layout(path)
        if video_frames.choose_strategy(layout, indices, total) == "seek":
            try:
                return video_frames.decode_seeking(path, indices, size, layout), list(indices)
            except FrameCountMismatch:
                raise  # the frame count was wrong: sample_frames probes and asks again
            except MediaError:  # a container ffmpeg cannot seek in as planned: the one pass still reads it
                pass
    return decode_frames(path, indices, size), list(indices)


def frame_cache_folder(
    cache_root: str | os.PathLike, digest: str, n: int, bound: tuple[int, int], mode: str = "exact"
) -> Path:
    suffix = "" if mode == "exact" else f"_{mode}"
    return Path(cache_root) / "frames" / digest[:2] / digest / f"v{CACHE_FORMAT}_{n}_{bound[0]}x{bound[1]}{suffix}"


def frames_cached(
    cache_root: str | os.PathLike, digest: str | None, n: int, bound: tuple[int, int], mode: str = "exact"
) -> bool:
    """Whether sample_frames would answer from the cache (no decoding)."""
    return bool(digest) and (frame_cache_folder(cache_root, digest, n, bound, mode) / "frames.json").is_file()


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
    mode: str = "exact",
) -> Frames:
    """N uniformly spaced frames of a video (the nearest keyframes in keyframe mode), cached under
    cache_root/frames/<hash>/<n>_<w>x<h>[_keyframe]/ with the frame numbers really used."""
    if n < 1:
        raise ValueError("n must be at least 1")
    if mode not in FRAME_MODES:
        raise ValueError(f"frames mode must be one of {', '.join(FRAME_MODES)}")
    digest = content_hash or sha256_of(path)[0]
    folder = frame_cache_folder(cache_root, digest, n, bound, mode)
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
        arrays, indices = extract_frames(path, indices, size, total=info.frame_count, mode=mode)
    except FrameCountMismatch:
        info = probe_video(path)
        size = fit_within(info.width, info.height, bound)
        indices = uniform_indices(info.frame_count, n)
        arrays, indices = extract_frames(path, indices, size, total=info.frame_count, mode=mode)
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


def make_test_video(
    path: str | os.PathLike, *, seconds: float = 1, size: str = "64x48", rate: int = 10, gop: int = 10**6,
    source: str = "testsrc", preset: str | None = None,
) -> Path:
    """A synthetic video (ffmpeg testsrc or testsrc2, H.264) for tests and benchmarks; one keyframe
    unless `gop` (frames between keyframes) says otherwise."""
    subprocess.run(
        [ffmpeg_exe(), "-y", "-loglevel", "error", "-f", "lavfi", "-i", f"{source}=duration={seconds}:size={size}:rate={rate}",
         "-pix_fmt", "yuv420p", "-g", str(gop), *(["-preset", preset] if preset else []), str(path)],
        check=True,
    )
    return Path(path)
