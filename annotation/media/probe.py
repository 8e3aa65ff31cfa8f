"""What a media file on disk holds, read without Django: the one video probe, the one way to find
ffmpeg and the one file hash, used by the import (annotation/media/assets.py) and by inference's frame
sampling (inference.media).

The probe asks ffprobe through ffmpeg-python (``ffmpeg.probe``). The demo has no system ffmpeg:
imageio-ffmpeg bundles an ffmpeg binary but no ffprobe, so without ffprobe the probe reads the
header that ``ffmpeg -i`` prints instead, and counts frames with imageio-ffmpeg's counter (a
stream copy to the null muxer, no decoding) — the two fallbacks the import and inference used
before they shared this module.

Sizes are as shown: a phone video stores its frames sideways with a rotation (a display matrix,
or an older demuxer's ``rotate`` tag) that players and browsers apply, so the probe reports the
width and height after that turn, as the import does for an image's EXIF orientation, and the
rotation itself. Frame sampling scales each decoded frame from its own stored size
(inference.video_frames), so it needs neither.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import ffmpeg

# MediaError, the one error of unreadable media, is defined with the prompts that catch it (a
# prompt fails only its own query when an item's media cannot be prepared).
from protocols.kit.prompting import MediaError

HASH_CHUNK = 1024 * 1024


def sha256_of(path: str | os.PathLike) -> tuple[str, int]:
    """(hex SHA-256, size in bytes) of a file, read in 1 MiB chunks."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while chunk := fh.read(HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def ffmpeg_exe() -> str:
    """The system ffmpeg when installed, else the static build bundled by imageio-ffmpeg."""
    found = shutil.which("ffmpeg")
    if found:
        return found
    import imageio_ffmpeg

    return imageio_ffmpeg.get_ffmpeg_exe()


def ffprobe_exe() -> str | None:
    """The system ffprobe, or None (imageio-ffmpeg bundles none)."""
    return shutil.which("ffprobe")


@dataclass(frozen=True)
class VideoInfo:
    """A video's first real video stream (cover art left out) and its container.

    ``width`` and ``height`` are the displayed size, after ``rotation``: a stream stored 160x120
    with a quarter turn is 120x160. ``rotation`` is the turn players apply, in degrees
    counterclockwise as FFmpeg's display matrix (and PyAV's ``frame.rotation``) states it,
    to the nearest quarter turn: 0, 90, 180 or 270. ``frame_count`` is the counted packets when
    the probe was asked to count, else the container's claim (None when it makes none);
    inference builds one from an imported asset's recorded width, height, frame count and
    duration (assets imported before sizes were displayed ones keep their stored size: harmless,
    nothing scales by it).
    """

    width: int | None
    height: int | None
    frame_count: int | None
    duration: float | None
    fps: float | None = None
    format: str = ""  # ffmpeg's container names, comma-separated ("mov,mp4,m4a,3gp,3g2,mj2")
    codec: str = ""
    rotation: int = 0


class VideoUnreadable(MediaError):
    """ffprobe / ffmpeg cannot read the file: `tool` names which, `detail` is its last word."""

    def __init__(self, path: str | os.PathLike, tool: str, detail: str):
        self.tool = tool
        self.detail = detail
        super().__init__(f"ffmpeg cannot read video {Path(path).name}: {detail}")


class NoVideoStream(VideoUnreadable):
    def __init__(self, path: str | os.PathLike, tool: str):
        super().__init__(path, tool, "no video stream")


def last_line(stderr: bytes | str | None, default: str = "unreadable") -> str:
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else (stderr or "")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else default


def probe_video(path: str | os.PathLike, *, count_frames: bool = True) -> VideoInfo:
    """Container, codec, size, frame rate, duration and frame count of a video file.

    ``count_frames`` (the default: frame sampling needs the exact count) counts the packets of
    the stream, reading the whole file without decoding it, and refuses a video without frames;
    without it (the import) the frame count is what the container claims, if anything. Raises
    VideoUnreadable (NoVideoStream when the file holds no video stream), or MediaError when the
    file does not exist.
    """
    if not Path(path).is_file():
        raise MediaError(f"video {Path(path).name} does not exist")
    ffprobe = ffprobe_exe()
    if ffprobe is None:
        info = _probe_with_ffmpeg(path, count_frames=count_frames)
    else:
        info = _probe_with_ffprobe(ffprobe, path, count_frames=count_frames)
    if count_frames and not info.frame_count:
        raise VideoUnreadable(path, "ffprobe" if ffprobe else "ffmpeg", "no frames")
    return info


def _probe_with_ffprobe(ffprobe: str, path: str | os.PathLike, *, count_frames: bool) -> VideoInfo:
    options = {"v": "error", "select_streams": "v"}
    if count_frames:
        options["count_packets"] = None
    try:
        data = ffmpeg.probe(str(path), cmd=ffprobe, **options)
    except ffmpeg.Error as exc:
        raise VideoUnreadable(path, "ffprobe", last_line(exc.stderr)) from None
    streams = [s for s in data.get("streams", []) if not s.get("disposition", {}).get("attached_pic")]
    if not streams:
        raise NoVideoStream(path, "ffprobe")
    s = streams[0]
    fmt = data.get("format", {})
    duration = None
    for raw in (s.get("duration"), fmt.get("duration")):
        try:
            duration = float(raw)
            break
        except (TypeError, ValueError):
            continue
    frames_raw = (s.get("nb_read_packets") or s.get("nb_frames")) if count_frames else s.get("nb_frames")
    try:
        frames = int(frames_raw)
    except (TypeError, ValueError):
        frames = None
    rotation = _ffprobe_rotation(s)
    width, height = displayed_size(s.get("width"), s.get("height"), rotation)
    return VideoInfo(
        width=width,
        height=height,
        frame_count=frames,
        duration=duration,
        fps=_rate(s.get("avg_frame_rate")) or _rate(s.get("r_frame_rate")),
        format=fmt.get("format_name", ""),
        codec=s.get("codec_name", ""),
        rotation=rotation,
    )


def _ffprobe_rotation(stream: dict) -> int:
    """The stream's display-matrix rotation, else its ``rotate`` tag (FFmpeg before 5 exported
    both; the tag counts clockwise, the matrix counterclockwise)."""
    for side in stream.get("side_data_list") or []:
        if side.get("side_data_type") == "Display Matrix" and side.get("rotation") is not None:
            return quarter_turn(side["rotation"])
    try:
        return quarter_turn(-float((stream.get("tags") or {}).get("rotate")))
    except (TypeError, ValueError):  # no tag, or not a number
        return 0


def quarter_turn(degrees_counterclockwise: float | str) -> int:
    """0, 90, 180 or 270: the nearest quarter turn, as the frame decoder turns frames."""
    return int(round(float(degrees_counterclockwise) / 90)) % 4 * 90


def displayed_size(width: int | None, height: int | None, rotation: int) -> tuple[int | None, int | None]:
    """Width and height as shown: a quarter turn either way swaps them."""
    return (height, width) if rotation % 180 == 90 else (width, height)


def _rate(text: str | None) -> float | None:
    if not text or text in ("0/0", "N/A"):
        return None
    try:
        value = float(Fraction(text))
    except (ValueError, ZeroDivisionError):
        return None
    return value if value > 0 else None


# --- without ffprobe: the header `ffmpeg -i` prints ----------------------------------------------

_INPUT_RE = re.compile(r"Input #0, ([^ ]+), from")
_DURATION_RE = re.compile(r"Duration: (\d+):(\d+):(\d+(?:\.\d+)?)")
_VIDEO_RE = re.compile(r"Stream #0:\d+[^:]*: Video: ([a-z0-9_]+)[^\n]*?, (\d{2,5})x(\d{2,5})[^\n]*")
_FPS_RE = re.compile(r"([\d.]+) fps")
# In the stream's block below its line: "displaymatrix: rotation of -90.00 degrees" (FFmpeg 5),
# "Display Matrix: rotation of -90.00 degrees" (7 and later), and before 5 also "rotate : 90".
_MATRIX_RE = re.compile(r"display ?matrix: rotation of (-?[\d.]+) degrees", re.IGNORECASE)
_ROTATE_TAG_RE = re.compile(r"^\s*rotate\s*:\s*(-?[\d.]+)\s*$", re.MULTILINE)


def _header_rotation(block: str) -> int:
    """The rotation in a stream's block of the `ffmpeg -i` header: its display matrix, else its
    ``rotate`` tag (clockwise, as FFmpeg before 5 printed it beside the matrix)."""
    if matrix := _MATRIX_RE.search(block):
        return quarter_turn(matrix.group(1))
    if tag := _ROTATE_TAG_RE.search(block):
        return quarter_turn(-float(tag.group(1)))
    return 0


def _probe_with_ffmpeg(path: str | os.PathLike, *, count_frames: bool) -> VideoInfo:
    proc = subprocess.run([ffmpeg_exe(), "-hide_banner", "-i", str(path)], capture_output=True, timeout=60)
    text = proc.stderr.decode("utf-8", "replace")
    m_input = _INPUT_RE.search(text)
    if not m_input:
        raise VideoUnreadable(path, "ffmpeg", last_line(text))
    video = [m for m in _VIDEO_RE.finditer(text) if "attached pic" not in m.group(0)]
    if not video:
        raise NoVideoStream(path, "ffmpeg")
    m = video[0]
    following = re.search(r"^\s*Stream #", text[m.end() :], re.MULTILINE)
    block = text[m.end() : m.end() + following.start()] if following else text[m.end() :]
    rotation = _header_rotation(block)
    width, height = displayed_size(int(m.group(2)), int(m.group(3)), rotation)
    fps_m = _FPS_RE.search(m.group(0))
    dur_m = _DURATION_RE.search(text)
    duration = None
    if dur_m:
        h, mi, sec = dur_m.groups()
        duration = int(h) * 3600 + int(mi) * 60 + float(sec)
    frames = None
    if count_frames:
        import imageio_ffmpeg

        try:
            frames, _secs = imageio_ffmpeg.count_frames_and_secs(str(path))
        except Exception as exc:  # imageio raises RuntimeError / OSError with ffmpeg's message
            raise VideoUnreadable(path, "ffmpeg", last_line(str(exc))) from None
    return VideoInfo(
        width=width,
        height=height,
        frame_count=frames,
        duration=duration,
        fps=float(fps_m.group(1)) if fps_m else None,
        format=m_input.group(1).rstrip(","),
        codec=m.group(1),
        rotation=rotation,
    )
