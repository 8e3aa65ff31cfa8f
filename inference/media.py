"""Media preparation for model queries: video frames and images. Plain Python, no Django.

Frames: N uniformly spaced frames of a video, decoded in-process by `extract_frames` (PyAV: one
pass, or a seek per run of frames where the clip's packet index says that decodes less, or the
nearest keyframes in keyframe mode: video_frames.py), turned upright and resized to fit a bound as
shown (448x448 by default; each frame scaled from its own stored size), cached on disk by (content
hash, N, bound, mode) so a re-run or a second job never decodes the same video
twice, and a job's gpu chunks read frames its CPU workers prepared (services/frames.py).
Images: resized to fit the same bound and optionally cropped to an annotated box
`[x, y, width, height]` in image pixels.

Videos are probed (exact frame count, no decoding) by annotation/media/probe.py, which holds the one
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

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from annotation.media.probe import MediaError, VideoInfo, ffmpeg_exe, probe_video, sha256_of

from . import video_frames
from .video_frames import FrameCountMismatch, fit_within

DEFAULT_BOUND = (448, 448)
JPEG_QUALITY = 90
# Bump when the cached layout or the resizing changes. Not bumped when frames became fitted to
# the bound as shown rather than as stored: for a square bound (every job's: services/frames.py)
# both give the same pixels, rotated or not (tests/inference/test_video_rotation.py); only a
# direct call with a non-square bound gets a rotated video's frames at a new size now.
CACHE_FORMAT = 1


def uniform_indices(total: int, n: int) -> list[int]:
    """N frame indices spaced uniformly over `total` frames: the centre of each of N equal segments."""
    if total <= 0 or n <= 0:
        return []
    if n >= total:
        return list(range(total))
    return [int((i + 0.5) * total / n) for i in range(n)]


def decode_frames(path: str | os.PathLike, indices: list[int], bound: tuple[int, int]) -> list[np.ndarray]:
    """Decode exactly the frames at `indices`, upright and fitted within `bound`, in one pass."""
    return video_frames.decode_one_pass(path, indices, bound)


def decode_all_frames(path: str | os.PathLike, bound: tuple[int, int]) -> np.ndarray:
    """Every frame, upright and fitted within `bound` (the slow reference tests compare the other
    modes against)."""
    return video_frames.decode_every_frame(path, bound)


FRAME_MODES = ("exact", "keyframe")


def extract_frames(
    path: str | os.PathLike, indices: list[int], bound: tuple[int, int], *, total: int, mode: str = "exact"
) -> tuple[list[np.ndarray], list[int]]:
    """The one place frames are decoded: (frames, the frame numbers they really are), each upright
    and fitted within `bound` as shown. Exact mode seeks per run of frames where the packet index
    says that decodes less than one pass (video_frames), else one pass; keyframe mode takes the
    nearest keyframes and says which."""
    index = video_frames.read_index(path)
    if mode == "keyframe":
        return video_frames.decode_keyframes(path, indices, bound, index=index)
    if video_frames.choose_strategy(index, indices, total) == "seek":
        try:
            return video_frames.decode_seeking(path, indices, bound, index), list(indices)
        except FrameCountMismatch:
            raise  # the frame count was wrong: sample_frames probes and asks again
        except MediaError:  # a stream that cannot be decoded from its keyframes as indexed: one pass still reads it
            pass
    return decode_frames(path, indices, bound), list(indices)


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
    try:
        os.utime(meta_path)  # the entry's last use, for the cache's pruning (inference/services/cache.py)
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:  # not cached (or pruned this moment): decode
        meta = None
    if meta is not None:
        return Frames([folder / f for f in meta["files"]], meta["indices"], tuple(meta["size"]), meta["source_frames"])
    # Known metadata (an imported asset's frame count) saves the ffprobe pass; if the container's
    # frame count was wrong, the decode returns fewer frames and we probe. Its width and height
    # play no part: the decoder fits each frame from the frame's own size, so an asset that
    # recorded a phone video's stored size (imported before sizes were the displayed ones) and
    # one that records the displayed size give the same frames.
    try:
        info = known if known and (known.frame_count or 0) > 0 else probe_video(path)
        indices = uniform_indices(info.frame_count, n)
        arrays, indices = extract_frames(path, indices, bound, total=info.frame_count, mode=mode)
    except FrameCountMismatch:
        info = probe_video(path)
        indices = uniform_indices(info.frame_count, n)
        arrays, indices = extract_frames(path, indices, bound, total=info.frame_count, mode=mode)
    size = (arrays[0].shape[1], arrays[0].shape[0])  # as shown (n >= 1 and a probed video has frames)
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
    path: str | os.PathLike,
    *,
    seconds: float = 1,
    size: str = "64x48",
    rate: int = 10,
    gop: int = 10**6,
    source: str = "testsrc",
    preset: str | None = None,
    rotation: int = 0,
) -> Path:
    """A synthetic video (ffmpeg testsrc or testsrc2, H.264) for tests and benchmarks; one keyframe
    unless `gop` (frames between keyframes) says otherwise. `rotation` (degrees counterclockwise,
    as a display matrix states it) tags the stream the way a phone does, frames stored as given."""
    path = Path(path)
    encoded = path.with_name(f".plain-{path.name}") if rotation else path
    subprocess.run(
        [
            ffmpeg_exe(),
            "-y",
            "-loglevel",
            "error",
            "-f",
            "lavfi",
            "-i",
            f"{source}=duration={seconds}:size={size}:rate={rate}",
            "-pix_fmt",
            "yuv420p",
            "-g",
            str(gop),
            *(["-preset", preset] if preset else []),
            str(encoded),
        ],
        check=True,
    )
    if rotation:
        _tag_rotation(encoded, path, rotation)
        encoded.unlink()
    return path


def _tag_rotation(source: Path, dest: Path, rotation: int) -> None:
    """Copy `source` to `dest` with a display matrix turning it `rotation` degrees counterclockwise:
    FFmpeg 6.1 and later take ``-display_rotation``; earlier ones (Debian 12 has 5.1) turn a
    ``rotate`` tag into the same matrix, which later ones ignore. A stream copy: re-encoding
    would let ffmpeg's autorotation turn the pixels instead."""
    quiet = [ffmpeg_exe(), "-y", "-loglevel", "error"]
    proc = subprocess.run(
        [*quiet, "-display_rotation:v:0", str(rotation), "-i", str(source), "-c", "copy", str(dest)],
        capture_output=True,
    )
    if proc.returncode != 0:
        subprocess.run(
            [*quiet, "-i", str(source), "-c", "copy", "-metadata:s:v:0", f"rotate={rotation % 360}", str(dest)],
            check=True,
        )
