"""Decoding the chosen frames of a video fast: probe its keyframe layout, then one pass or a seek
per frame, or the keyframe mode. Plain Python, no Django (inference.media calls it).

- One `select` pass decodes every frame of the clip; only the chosen ones are scaled and copied.
- A seek per frame decodes from the keyframe before each chosen frame only. ffmpeg starts once per
  group of frames (one input per frame, each with its own accurate `-ss`, joined by `concat`), and
  the groups run on up to min(4, CPUs) threads. Exact: ffmpeg's accurate seek drops the frames
  before the asked time, so it returns the same pixels as the one pass (tests compare hashes).
- Which one: a clip with a single keyframe (every seek would decode from frame 0) or few frames is
  read in one pass; otherwise the frames each seek must decode (from the keyframe before it, as
  the probe of a short prefix spaces them) are weighed against the whole clip.
- Keyframe mode (job param ``frames_mode="keyframe"``) decodes keyframes only
  (``-skip_frame nokey``) and takes the keyframe nearest each wanted position: far faster, not the
  exact positions, so it returns the frame numbers it really used (recorded with the prediction).
"""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from annotation.media_probe import MediaError, ffmpeg_exe, ffprobe_exe, last_line

PROBE_PREFIX_SECONDS = 10
GROUP_SIZE = 16  # frames per ffmpeg process: each input keeps a decoder's buffers until the end
OPEN_COST_FRAMES = 12  # opening one more input costs about as much as decoding this many frames
SEEK_PREROLL = 3 / 23  # ffmpeg seeks this much earlier than -ss in streams with B-frames (fftools)
SEEK_SHARE = 1.0  # seek when it decodes less than one pass: separate single-threaded decoders parallelise better than one frame-threaded pass


class FrameCountMismatch(MediaError):
    """ffmpeg returned fewer frames than asked for (the frame count used was wrong)."""


@dataclass(frozen=True)
class Layout:
    """What the seek plan needs: the frame rate (constant or not), where the stream starts relative
    to the container's start (what ffmpeg's -ss counts from), and keyframe spacing in a prefix."""

    fps: Fraction | None
    constant_rate: bool
    offset: float
    keyframes: tuple[float, ...]  # keyframe times in the probed prefix, seconds from the stream's start
    probed: float  # seconds covered by the probe
    start: float = 0.0  # the stream's first timestamp, seconds
    b_frames: bool = False  # ffmpeg then seeks SEEK_PREROLL earlier than asked

    def keyframe_before(self, t: float) -> float:
        """The last keyframe at or before t (seconds from the stream's start), the prefix's
        spacing assumed to go on."""
        known = [k for k in self.keyframes if k <= t]
        gop = self.gop_seconds
        if gop and t > self.probed and known:
            return known[-1] + (t - known[-1]) // gop * gop
        return known[-1] if known else 0.0

    @property
    def gop_seconds(self) -> float | None:
        """Median keyframe interval; None with fewer than two keyframes in the prefix."""
        if len(self.keyframes) < 2:
            return None
        return statistics.median(b - a for a, b in zip(self.keyframes, self.keyframes[1:]))


def worker_threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def _rate(text: str | None) -> Fraction | None:
    try:
        value = Fraction(text)
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    return value if value > 0 else None


def _float(text, default: float = 0.0) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return default


def probe_layout(path: str | os.PathLike, *, prefix: float = PROBE_PREFIX_SECONDS) -> Layout | None:
    """Keyframe spacing from the packet flags of the first `prefix` seconds (ffprobe reads packets,
    decodes nothing); None without ffprobe or when it cannot read the file (then: one pass)."""
    ffprobe = ffprobe_exe()
    if ffprobe is None:
        return None
    proc = subprocess.run(
        [ffprobe, "-v", "error", "-select_streams", "v:0", "-read_intervals", f"%+{prefix}",
         "-show_entries", "packet=pts_time,flags:stream=r_frame_rate,avg_frame_rate,start_time,has_b_frames:format=start_time",
         "-of", "json", str(path)],
        capture_output=True, timeout=60,
    )
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout or b"{}")
    streams = data.get("streams") or [{}]
    stream = streams[0]
    start = _float(stream.get("start_time"))
    fps, avg = _rate(stream.get("r_frame_rate")), _rate(stream.get("avg_frame_rate"))
    times = [_float(p.get("pts_time"), float("nan")) - start for p in data.get("packets", [])]
    keys = sorted(t for t, p in zip(times, data.get("packets", [])) if "K" in p.get("flags", "") and t == t)
    return Layout(
        fps=fps,
        constant_rate=bool(fps and avg and abs(float(fps - avg)) <= 0.01 * float(fps)),
        offset=start - _float((data.get("format") or {}).get("start_time"), start),
        keyframes=tuple(keys),
        probed=max((t for t in times if t == t), default=0.0),
        start=start,
        b_frames=bool(int(_float(stream.get("has_b_frames")))),
    )


def seek_cost(layout: Layout, indices: list[int]) -> float | None:
    """Frames a seek per frame decodes (plus the cost of opening each input), keyframes assumed
    to keep the prefix's spacing; None when seeking cannot be planned (no rate, one keyframe)."""
    gop = layout.gop_seconds
    if gop is None or not layout.fps or not layout.constant_rate or gop <= 0:
        return None
    fps = float(layout.fps)
    return sum((i / fps - layout.keyframe_before(i / fps)) * fps + 1 + OPEN_COST_FRAMES for i in indices)


def choose_strategy(layout: Layout | None, indices: list[int], total_frames: int) -> str:
    """'seek' when seeking per frame decodes clearly less than one pass, else 'select'."""
    if layout is None or not indices:
        return "select"
    cost = seek_cost(layout, indices)
    if cost is None:
        return "select"
    return "seek" if cost < SEEK_SHARE * total_frames else "select"


def _run(args: list[str], path: str | os.PathLike) -> tuple[bytes, bytes]:
    proc = subprocess.run([ffmpeg_exe(), "-hide_banner", "-nostdin", *args], capture_output=True)
    if proc.returncode != 0:
        raise MediaError(f"ffmpeg cannot decode video {Path(path).name}: {last_line(proc.stderr, 'unknown error')}")
    return proc.stdout, proc.stderr


def _frames(out: bytes, want: int, size: tuple[int, int], path) -> list[np.ndarray]:
    width, height = size
    got = len(out) // (width * height * 3)
    if got != want:
        raise FrameCountMismatch(f"ffmpeg returned {got} of {want} frames from video {Path(path).name}")
    array = np.frombuffer(out, dtype=np.uint8).reshape(got, height, width, 3)
    return [array[k] for k in range(got)]


def decode_seeking(
    path: str | os.PathLike, indices: list[int], size: tuple[int, int], layout: Layout, *, threads: int | None = None
) -> list[np.ndarray]:
    """The frames at `indices` (of a constant-rate stream), one accurate seek each."""
    fps = layout.fps
    groups = [indices[i : i + GROUP_SIZE] for i in range(0, len(indices), GROUP_SIZE)]

    def one_group(group: list[int]) -> list[np.ndarray]:
        args: list[str] = []
        picks: list[str] = []
        for i in group:
            t = float(i / fps)
            if layout.b_frames:
                # ffmpeg would seek SEEK_PREROLL before the asked time, a whole GOP early for a frame
                # just after a keyframe: ask for just past that keyframe's pre-roll instead, start
                # decoding there, and pick the frame by its own timestamp (-copyts keeps them).
                at = layout.offset + layout.keyframe_before(t) + SEEK_PREROLL + 0.001
                args += ["-threads", "1", "-noaccurate_seek", "-ss", f"{at:.6f}", "-i", str(path)]
                picks.append(f"select=gte(t\\,{layout.start + (i - 0.5) / float(fps):.6f}),")
            else:
                # Frame i starts at offset + i/fps; ffmpeg rounds -ss to the stream's time base, so
                # the microsecond rounding here lands on that frame's timestamp exactly.
                args += ["-threads", "1", "-ss", f"{layout.offset + t:.6f}", "-i", str(path)]
                picks.append("")
        if layout.b_frames:
            args = ["-copyts", *args]
        chains = ";".join(f"[{k}:v:0]{pick}trim=end_frame=1,setpts=PTS-STARTPTS[f{k}]" for k, pick in enumerate(picks))
        joined = "".join(f"[f{k}]" for k in range(len(group)))
        graph = f"{chains};{joined}concat=n={len(group)}:v=1:a=0,scale={size[0]}:{size[1]}[out]"
        out, _ = _run(args + ["-filter_complex", graph, "-map", "[out]", "-fps_mode", "passthrough",
                              "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:"], path)
        return _frames(out, len(group), size, path)

    workers = max(1, min(threads or worker_threads(), len(groups)))
    if workers == 1:
        results = [one_group(g) for g in groups]
    else:
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(one_group, groups))
    return [frame for result in results for frame in result]


_SHOWINFO_PTS = re.compile(r"\bn:\s*(\d+)\s+pts:\s*(-?\d+)\s+pts_time:\s*(-?[\d.e+-]+)")


def keyframe_times(path: str | os.PathLike) -> tuple[list[float], float | None]:
    """Every keyframe's time (seconds, as stored) and the frame rate: one ffprobe pass over the
    packets (no decoding), else one keyframes-only ffmpeg pass that prints each frame's time."""
    ffprobe = ffprobe_exe()
    if ffprobe is not None:
        proc = subprocess.run([ffprobe, "-v", "error", "-select_streams", "v:0", "-show_entries",
                               "stream=r_frame_rate:packet=pts_time,flags", "-of", "csv", str(path)],
                              capture_output=True, timeout=600)
        if proc.returncode == 0:
            times, fps = [], None
            for line in proc.stdout.decode().splitlines():
                section, _, rest = line.partition(",")
                if section == "stream":
                    fps = _rate(rest.split(",")[0])
                elif section == "packet":
                    pts, _, flags = rest.partition(",")
                    if "K" in flags and pts not in ("", "N/A"):
                        times.append(float(pts))
            if times:
                return sorted(times), float(fps) if fps else None
    _, err = _run(["-skip_frame", "nokey", "-i", str(path), "-map", "0:v:0", "-vf", "showinfo",
                   "-f", "null", "-"], path)
    return sorted(float(m.group(3)) for m in _SHOWINFO_PTS.finditer(err.decode("utf-8", "replace"))), None


def decode_keyframes(
    path: str | os.PathLike, indices: list[int], size: tuple[int, int], fps: float | None = None
) -> tuple[list[np.ndarray], list[int]]:
    """For each wanted frame index, the keyframe nearest to it; returns the frames and the frame
    numbers of the keyframes really used (so a duplicate shows when two wants share a keyframe).
    Only keyframes are decoded (-skip_frame nokey; not -discard nokey, with which the mp4 demuxer
    stamps a keyframe one frame early)."""
    times, probed_fps = keyframe_times(path)
    fps = fps or probed_fps
    if not times:
        raise MediaError(f"video {Path(path).name} has no keyframes")
    if not fps:
        raise MediaError(f"video {Path(path).name} has no frame rate to place keyframes by")
    first = times[0]
    key_numbers = [round((t - first) * fps) for t in times]
    chosen = [min(range(len(key_numbers)), key=lambda k: (abs(key_numbers[k] - i), k)) for i in indices]
    ordinals = sorted(set(chosen))
    expr = "+".join(f"eq(n\\,{k})" for k in ordinals)
    out, err = _run(["-skip_frame", "nokey", "-i", str(path), "-map", "0:v:0",
                     "-vf", f"select={expr},showinfo,scale={size[0]}:{size[1]}", "-fps_mode", "passthrough",
                     "-f", "rawvideo", "-pix_fmt", "rgb24", "pipe:"], path)
    frames = _frames(out, len(ordinals), size, path)
    # The positions really decoded, from the decoder's own timestamps (showinfo after select).
    shown = [float(m.group(3)) for m in _SHOWINFO_PTS.finditer(err.decode("utf-8", "replace"))]
    real = [round((t - first) * fps) for t in shown] if len(shown) == len(ordinals) else [key_numbers[k] for k in ordinals]
    by_ordinal = {k: (frame, number) for k, frame, number in zip(ordinals, frames, real)}
    return [by_ordinal[k][0] for k in chosen], [by_ordinal[k][1] for k in chosen]
