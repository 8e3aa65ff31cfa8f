"""Decoding the chosen frames of a video fast, in-process with PyAV (FFmpeg's libraries). Plain
Python, no Django (inference.media calls it).

- The packet index (`read_index`) lists the video stream's packets without decoding anything:
  their presentation times (frame i is the packet with the i-th smallest one), which are
  keyframes, and the decode order. A 60 s clip takes ~10 ms, a 5-minute one ~40 ms.
- Exact frames, by seeking (`decode_seeking`): the wanted frames are grouped into spans, one per
  keyframe they follow; each run seeks to its keyframe and decodes forward to its last wanted
  frame. On the way, frames no other frame refers to (H.264's non-reference B-frames; the
  decoder's ``skip_frame=NONREF``) are not decoded unless they are wanted, which the ffmpeg
  command line cannot do per frame: for x264's defaults that skips about a third of the work.
  Runs are spread over up to `worker_threads()` threads (min(4, CPUs ÷ the worker's concurrency)),
  each with its own demuxer and single-threaded
  decoder (PyAV releases the GIL while decoding).
- Exact frames, in one pass (`decode_one_pass`): every frame decoded with the decoder's own frame
  threads, only the wanted ones converted. Chosen when the spans would decode more than that
  (`choose_strategy`): one keyframe for the whole clip, or wanted frames dense in every GOP.
- Keyframe mode (`decode_keyframes`, job param ``frames_mode="keyframe"``) decodes only the
  keyframe nearest each wanted frame (a run of one frame: a seek and that keyframe) and returns
  the frame numbers it really used, recorded with the prediction.

Every mode converts with the same scaler (bicubic, to RGB24) and turns frames upright by the
stream's rotation, so a frame is the same pixels whichever mode decoded it (tests hash them
against decoding every frame). Callers give a bound, not a size: each frame is fitted within it
as shown (upright) from its own stored size, so no recorded size (an asset imported before sizes
were the displayed ones records a phone video's stored size) can distort it.
"""

from __future__ import annotations

import bisect
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from pathlib import Path

import numpy as np

from annotation.media.probe import MediaError

SKIP_UNWANTED = "NONREF"  # what a run's decoder skips of the frames it passes (bench: "DEFAULT" skips none)
SEEK_COST_FRAMES = 6  # a seek and a fresh decoder cost about as much as decoding this many frames
INTERPOLATION = "BICUBIC"


av = None  # PyAV, imported on first use: web processes import this module and never decode


def _lib():
    global av
    if av is None:
        import av as module

        av = module
    return av


class FrameCountMismatch(MediaError):
    """The video has fewer frames than asked for (the frame count used was wrong)."""


# Set by a Celery worker before it starts its pool (on_worker_setup): how many Celery tasks it
# runs at once, which share its CPUs.
WORKER_TASKS_ENV = "STATELAB_WORKER_TASKS"


def on_worker_setup(sender=None, instance=None, **_) -> None:
    """Celery's celeryd_after_setup (instance: the worker, its concurrency resolved, "auto"
    included, and its pool not started yet; connected by inference/apps.py): tell worker_threads
    how many Celery tasks this worker runs at once; its pool processes inherit the environment. The solo
    pool runs one Celery task at a time whatever its concurrency says."""
    concurrency = getattr(instance, "concurrency", None)
    if getattr(getattr(instance, "pool_cls", None), "__module__", "") == "celery.concurrency.solo":
        concurrency = 1
    if isinstance(concurrency, int) and concurrency > 0:
        os.environ[WORKER_TASKS_ENV] = str(concurrency)


def worker_threads() -> int:
    """Decoding threads of one Celery task: the CPUs this worker may run on (its affinity, which a
    container's cpuset narrows) shared by the Celery tasks it runs at once (its concurrency: four
    processes on four CPUs decode on one thread each, not four), at least 1, at most 4."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        celery_tasks = max(1, int(os.environ.get(WORKER_TASKS_ENV, "1")))
    except ValueError:
        celery_tasks = 1
    return max(1, min(4, cpus // celery_tasks))


def _open(path: str | os.PathLike):
    _lib()
    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError) as exc:
        raise MediaError(f"cannot decode video {Path(path).name}: {exc}") from None
    if not container.streams.video:
        container.close()
        raise MediaError(f"video {Path(path).name} has no video stream")
    return container


def _failed(path, exc) -> MediaError:
    return MediaError(f"cannot decode video {Path(path).name}: {exc}")


@dataclass(frozen=True)
class Index:
    """A video stream's packets in decode order, read without decoding."""

    pts: tuple[int, ...]  # presentation time of each packet, in decode order
    keyframe: tuple[bool, ...]  # whether each packet is a keyframe
    time_base: Fraction
    rate: Fraction | None  # the stream's average frame rate, if the container gives one

    @property
    def frame_count(self) -> int:
        return len(self.pts)

    # Derived once per index (an extraction asks for them per wanted frame and per run).
    @cached_property
    def _presentation(self) -> list[int]:
        return sorted(self.pts)

    @cached_property
    def _positions(self) -> dict[int, int]:
        return {p: k for k, p in enumerate(self.pts)}

    @cached_property
    def _keyframe_positions(self) -> list[int]:
        return [k for k, key in enumerate(self.keyframe) if key]

    def presentation(self) -> list[int]:
        """pts of frame 0, 1, 2, ... (presentation order)."""
        return self._presentation

    def positions(self) -> dict[int, int]:
        """pts → decode position."""
        return self._positions

    def keyframe_positions(self) -> list[int]:
        return self._keyframe_positions

    def start_of(self, position: int) -> int:
        """The decode position to start from to decode the packet at `position`: the last keyframe
        before it whose own frame comes no later (a closed GOP's keyframe; an open GOP's leading
        frames need the keyframe before)."""
        keys = self.keyframe_positions()
        k = bisect.bisect_right(keys, position) - 1
        while k > 0 and self.pts[keys[k]] > self.pts[position]:
            k -= 1
        return keys[k] if k >= 0 else 0


def read_index(path: str | os.PathLike) -> Index | None:
    """The packet index of the first video stream; None when the container gives packets without
    presentation times (then only the one pass can number the frames)."""
    container = _open(path)
    try:
        stream = container.streams.video[0]
        pts, keys = [], []
        for packet in container.demux(stream):
            if packet.size == 0 or packet.is_discard:
                continue  # the demuxer's end-of-stream packet, and frames an edit list drops
            if packet.pts is None:
                return None
            pts.append(packet.pts)
            keys.append(packet.is_keyframe)
        if len(set(pts)) != len(pts) or not any(keys):
            return None
        return Index(
            tuple(pts),
            tuple(keys),
            Fraction(stream.time_base),
            Fraction(stream.average_rate) if stream.average_rate else None,
        )
    except av.FFmpegError as exc:
        raise _failed(path, exc) from None
    finally:
        container.close()


def fit_within(width: int, height: int, bound: tuple[int, int]) -> tuple[int, int]:
    """Largest size with the same aspect ratio that fits the bound; never upscales."""
    bw, bh = bound
    scale = min(bw / width, bh / height, 1.0)
    return max(1, round(width * scale)), max(1, round(height * scale))


def _convert(frame, bound: tuple[int, int]) -> np.ndarray:
    """The frame turned upright as players show it when the stream carries a rotation (phone
    videos; a quarter turn swaps width and height) and fitted within `bound` as shown. The scale
    comes from the frame's own stored size, then the scaled frame is turned."""
    turns = round((frame.rotation or 0) / 90) % 4
    sideways = turns % 2 == 1
    shown = fit_within(frame.height, frame.width, bound) if sideways else fit_within(frame.width, frame.height, bound)
    width, height = (shown[1], shown[0]) if sideways else shown
    array = frame.to_ndarray(width=width, height=height, format="rgb24", interpolation=INTERPOLATION)
    return np.ascontiguousarray(np.rot90(array, turns)) if turns else array


def _need(indices: list[int], total: int, path) -> None:
    if indices and (max(indices) >= total or min(indices) < 0):
        raise FrameCountMismatch(f"video {Path(path).name} has {total} frames, not the {max(indices) + 1} asked for")


@dataclass(frozen=True)
class Span:
    """Decode from the keyframe at `start` to the last target; targets are (decode position, pts)."""

    start: int
    targets: tuple[tuple[int, int], ...]

    @property
    def cost(self) -> int:
        return self.targets[-1][0] - self.start + 1 + SEEK_COST_FRAMES


def plan_spans(index: Index, indices: list[int]) -> list[Span]:
    """The wanted frames grouped by the keyframe their decoding starts from, in decode order; a
    span goes on through the next keyframe instead of seeking when its targets overlap."""
    order = index.presentation()
    if indices and max(indices) >= len(order):
        raise FrameCountMismatch(f"the video has {len(order)} frames, not the {max(indices) + 1} asked for")
    where = index.positions()
    wanted = sorted({where[order[i]] for i in indices})
    spans: list[Span] = []
    for position in wanted:
        start = index.start_of(position)
        if spans and start <= spans[-1].targets[-1][0]:
            # Within reach of the span: decode on (an open GOP's leading frame moves its start back).
            last = spans[-1]
            spans[-1] = Span(min(start, last.start), last.targets + ((position, index.pts[position]),))
        else:
            spans.append(Span(start, ((position, index.pts[position]),)))
    return spans


def choose_strategy(
    index: Index | None, indices: list[int], total: int | None = None, threads: int | None = None
) -> str:
    """'seek' when the spans decode fewer frames per thread than one frame-threaded pass, else
    'select' (the one pass)."""
    if index is None or not indices:
        return "select"
    threads = threads or worker_threads()
    total = total or index.frame_count
    spans = plan_spans(index, indices)
    costs = sorted((span.cost for span in spans), reverse=True)
    per_thread = max(costs[0], sum(costs) / min(threads, len(spans)))
    return "seek" if per_thread < total / threads else "select"


def _split(spans: list[Span], parts: int) -> list[list[Span]]:
    """Consecutive spans in `parts` groups of about equal cost (each thread decodes forward)."""
    parts = max(1, min(parts, len(spans)))
    total = sum(r.cost for r in spans)
    groups: list[list[Span]] = [[]]
    done = 0
    for span in spans:
        if groups[-1] and len(groups) < parts and done >= total * len(groups) / parts:
            groups.append([])
        groups[-1].append(span)
        done += span.cost
    return groups


SEEK_BACK_SECONDS = (0, 1, 4, 16)  # seek this much before the keyframe when a seek lands past it


def _packets_from(container, stream, index: Index, position: int, where: dict[int, int]):
    """The stream's packets from decode position `position` (a keyframe) on. A seek by time lands
    on that keyframe in an indexed container (MP4, MKV) but can land a little past it where the
    demuxer seeks by bytes (MPEG-TS): then it seeks further back and reads on, decoding nothing,
    to the keyframe."""
    target = index.pts[position]
    for back in SEEK_BACK_SECONDS:
        container.seek(target - int(back / index.time_base), stream=stream, backward=True, any_frame=False)
        stream.codec_context.flush_buffers()
        packets = container.demux(stream)
        for packet in packets:
            if packet.size == 0:
                break
            here = where.get(packet.pts)
            if here is None or here < position:
                continue
            if here > position:
                break  # landed past the keyframe: seek further back
            yield packet
            for packet in packets:
                if packet.size == 0:
                    return
                yield packet
            return
    raise MediaError(f"cannot seek to frame at {float(target * index.time_base):.3f} s")


def _decode_spans(path, spans: list[Span], bound: tuple[int, int], index: Index) -> dict[int, np.ndarray]:
    """pts → converted frame, for every target of the spans (one demuxer, one decoder)."""
    container = _open(path)
    out: dict[int, np.ndarray] = {}
    try:
        stream = container.streams.video[0]
        stream.thread_type = "NONE"  # skip_frame must apply to the very packet it is set for
        codec = stream.codec_context
        where = index.positions()
        for span in spans:
            wanted = {pts for _, pts in span.targets}
            last_pts = span.targets[-1][1]
            for packet in _packets_from(container, stream, index, span.start, where):
                codec.skip_frame = "DEFAULT" if packet.pts in wanted else SKIP_UNWANTED
                for frame in codec.decode(packet):
                    if frame.pts in wanted:
                        out[frame.pts] = _convert(frame, bound)
                if packet.pts == last_pts:
                    break
            codec.skip_frame = "DEFAULT"
            for frame in codec.decode(None):  # drain the frames the decoder holds for reordering
                if frame.pts in wanted:
                    out[frame.pts] = _convert(frame, bound)
            codec.flush_buffers()
    except av.FFmpegError as exc:
        raise _failed(path, exc) from None
    finally:
        container.close()
    return out


def _map(fn, groups: list, threads: int) -> list:
    if len(groups) <= 1 or threads <= 1:
        return [fn(g) for g in groups]
    with ThreadPoolExecutor(min(threads, len(groups))) as pool:
        return list(pool.map(fn, groups))


def decode_seeking(
    path: str | os.PathLike, indices: list[int], bound: tuple[int, int], index: Index, *, threads: int | None = None
) -> list[np.ndarray]:
    """The frames at `indices` (presentation order), each decoded from the keyframe its span starts at."""
    _need(indices, index.frame_count, path)
    threads = threads or worker_threads()
    spans = plan_spans(index, indices)
    found: dict[int, np.ndarray] = {}
    for part in _map(lambda group: _decode_spans(path, group, bound, index), _split(spans, threads), threads):
        found.update(part)
    order = index.presentation()
    missing = [i for i in indices if order[i] not in found]
    if missing:
        raise MediaError(f"cannot decode frame {missing[0]} of video {Path(path).name} by seeking")
    return [found[order[i]] for i in indices]


def decode_one_pass(
    path: str | os.PathLike, indices: list[int], bound: tuple[int, int], *, threads: int | None = None
) -> list[np.ndarray]:
    """The frames at `indices` (the n-th frame the decoder puts out), decoding every frame once with
    the decoder's frame threads and converting only the wanted ones."""
    wanted = set(indices)
    last = max(indices, default=-1)
    found: dict[int, np.ndarray] = {}
    container = _open(path)
    try:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        stream.codec_context.thread_count = threads or worker_threads()
        for n, frame in enumerate(container.decode(stream)):
            if n in wanted:
                found[n] = _convert(frame, bound)
            if n >= last:
                break
    except av.FFmpegError as exc:
        raise _failed(path, exc) from None
    finally:
        container.close()
    if len(found) != len(wanted):
        raise FrameCountMismatch(f"video {Path(path).name} gave {len(found)} of {len(wanted)} frames asked for")
    return [found[i] for i in indices]


def decode_every_frame(path: str | os.PathLike, bound: tuple[int, int]) -> np.ndarray:
    """Every frame, converted (the reference tests compare the other modes against)."""
    container = _open(path)
    try:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        return np.stack([_convert(frame, bound) for frame in container.decode(stream)])
    except av.FFmpegError as exc:
        raise _failed(path, exc) from None
    finally:
        container.close()


def nearest_keyframes(index: Index, indices: list[int]) -> list[int]:
    """For each wanted frame number, the frame number of the nearest keyframe (the earlier on a tie)."""
    rank = {p: n for n, p in enumerate(index.presentation())}
    numbers = sorted(rank[index.pts[k]] for k in index.keyframe_positions())
    chosen = []
    for i in indices:
        k = bisect.bisect_left(numbers, i)
        near = [numbers[j] for j in (k - 1, k) if 0 <= j < len(numbers)]
        chosen.append(min(near, key=lambda n: (abs(n - i), n)))
    return chosen


def decode_keyframes(
    path: str | os.PathLike,
    indices: list[int],
    bound: tuple[int, int],
    *,
    index: Index | None = None,
    threads: int | None = None,
) -> tuple[list[np.ndarray], list[int]]:
    """For each wanted frame, the keyframe nearest to it; returns the frames and the frame numbers
    of the keyframes really used (so a duplicate shows when two wants share a keyframe)."""
    index = index or read_index(path)
    if index is None:
        raise MediaError(f"video {Path(path).name} has no timestamps to find its keyframes by")
    _need(indices, index.frame_count, path)
    used = nearest_keyframes(index, indices)
    order = index.presentation()
    # A span of one target that starts at it: a seek to the keyframe and one frame decoded.
    where = index.positions()
    spans = [Span(where[pts], ((where[pts], pts),)) for pts in sorted({order[n] for n in used}, key=where.get)]
    threads = threads or worker_threads()
    found: dict[int, np.ndarray] = {}
    for part in _map(lambda group: _decode_spans(path, group, bound, index), _split(spans, threads), threads):
        found.update(part)
    missing = [n for n in used if order[n] not in found]
    if missing:
        raise MediaError(f"cannot decode keyframe {missing[0]} of video {Path(path).name}")
    return [found[order[n]] for n in used], used
