"""Inference benchmarks (not tests).

1. API judges: N judge calls (JSON schema, one small frame each) through the production
   OpenAIBackend to the local OpenAI-compatible stand-in (its own process, fixed latency per
   request), at concurrency 1 and at concurrency 32. Prints both wall times and the ratio
   (target >= 25x at 100 ms latency). With REDIS_URL set, the backend bounds its requests in
   flight through the shared Redis limiter, as the workers do (inference/backends/limiter.py),
   and the concurrency-32 run is repeated with the local bound only, to show the limiter's cost.
2. Frame sampling: 20 frames of a 5 s 1280x720 24 fps video (ffmpeg testsrc, one keyframe),
   scaled to fit 448x448, with inference.media.sample_frames (one pass, cache emptied each round)
   vs the ffmpeg command decoding and scaling every frame, keeping 20. Median of 3. Prints the ratio.

3. Long videos: a 60 s 1280x720 30 fps testsrc2 clip with a keyframe every 2 s (-g 60) and a
   5-minute one (the same clip five times, stream-copied: same GOP), made once into --clip-dir
   (a temporary folder by default; never committed). For the protocols' frame counts (OSCBench 20,
   M3-Verse 32), fitted into 448x448: the ffmpeg command decoding and scaling every frame (the
   baseline, streamed, keeping the wanted ones; ffmpeg's own frame threads), and
   inference.video_frames (PyAV, in-process): one pass, the seeks on 1 and on N threads
   (N = min(4, CPUs)), and keyframe mode (nearest keyframes, positions recorded). Wall time (median
   of --long-rounds) and CPU seconds (this process plus ffmpeg's); ratios against the baseline
   measured in the same run. Targets: exact >= 4x, keyframe mode >= 20x.

    .venv/bin/python bench/bench_inference.py [--calls 1000] [--latency 0.1] [--rounds 3]
    .venv/bin/python bench/bench_inference.py --skip-judges --skip-frames --long [--long-rounds 3]
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PIL import Image  # noqa: E402

from inference import media, video_frames  # noqa: E402
from inference.backends.base import ModelQuery, Sampling  # noqa: E402
from inference.backends.openai_backend import OpenAIBackend  # noqa: E402
from protocols.oscbench.prompts import JUDGE_SCHEMA  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_standin(latency: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.inference.openai_standin",
            "--port",
            str(port),
            "--latency",
            str(latency),
            "--no-faults",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    base_url = proc.stdout.readline().strip()
    return proc, base_url


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of another process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def judge_queries(n: int) -> list[ModelQuery]:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (90, 120, 200)).save(buf, format="JPEG")
    url = "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()
    return [
        ModelQuery(
            key=f"{i}|judge",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": url}},
                        {"type": "text", "text": f"Rate video {i} on the rubric and reply with JSON."},
                    ],
                }
            ],
            json_schema=JUDGE_SCHEMA,
            max_tokens=400,
        )
        for i in range(n)
    ]


def bench_judges(calls: int, latency: float) -> dict[str, float]:
    proc, base_url = start_standin(latency)
    try:
        queries = judge_queries(calls)
        out = {}
        redis_url = os.environ.get("REDIS_URL") or None
        runs = [(1, redis_url), (32, redis_url)] + ([(32, None)] if redis_url else [])
        for concurrency, limiter_redis in runs:
            backend = OpenAIBackend(
                base_url=base_url,
                api_key=None,
                model="standin",
                concurrency=concurrency,
                options={"timeout": 30, "max_retries": 0},
                limiter_key=f"bench-{uuid.uuid4().hex}",
                redis_url=limiter_redis,
            )
            bound = "Redis-shared bound" if limiter_redis else "local bound only"
            load = os.getloadavg()[0]
            server_cpu, cpu, t0 = process_cpu(proc.pid), time.process_time(), time.perf_counter()
            replies = backend.complete(queries, Sampling())
            out_key = "32-local" if (limiter_redis is None and redis_url) else concurrency
            out[out_key] = time.perf_counter() - t0
            cpu, server_cpu = time.process_time() - cpu, process_cpu(proc.pid) - server_cpu
            errors = sum(1 for r in replies if r.error)
            print(
                f"judges: {calls} calls at concurrency {concurrency:2d} ({bound}): {out[out_key]:7.2f} s "
                f"({calls / out[out_key]:6.1f} calls/s, {errors} errors); CPU client {cpu:.2f} s "
                f"({1000 * cpu / calls:.2f} ms/call), server {server_cpu:.2f} s; load avg at start {load:.1f}",
                flush=True,
            )
        print(
            f"judges: speed-up concurrency 32 vs 1 = {out[1] / out[32]:.1f}x (target >= 25x; "
            f"the latency-bound ceiling is {out[1] / (calls * latency / 32):.1f}x)",
            flush=True,
        )
        if "32-local" in out:
            print(
                f"judges: concurrency 32 with the local bound only {out['32-local']:.2f} s: the Redis limiter "
                f"costs {100 * (out[32] / out['32-local'] - 1):+.1f} % wall time",
                flush=True,
            )
        return out
    finally:
        proc.terminate()
        proc.wait(10)


def bench_frames(rounds: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-frames-"))
    try:
        video = media.make_test_video(tmp / "v720.mp4", seconds=5, size="1280x720", rate=24)
        info = media.probe_video(video)
        size = media.fit_within(info.width, info.height, media.DEFAULT_BOUND)
        select_times, known_times, full_times = [], [], []
        for r in range(rounds):
            cache = tmp / f"cache{r}"
            t0 = time.perf_counter()
            frames = media.sample_frames(video, 20, cache_root=cache)
            select_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()  # as for an imported asset: size and frame count known, no probe
            media.sample_frames(video, 20, cache_root=tmp / f"known{r}", known=info)
            known_times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            picked = decode_every_frame(video, size, media.uniform_indices(info.frame_count, 20))
            full_times.append(time.perf_counter() - t0)
            assert len(frames.paths) == len(picked) == 20
        t0 = time.perf_counter()
        media.sample_frames(video, 20, cache_root=tmp / "cache0")
        cached = time.perf_counter() - t0
        sel, full, known = (
            statistics.median(select_times),
            statistics.median(full_times),
            statistics.median(known_times),
        )
        print(
            f"frames: video {info.width}x{info.height}, {info.frame_count} frames -> 20 frames at {size[0]}x{size[1]}",
            flush=True,
        )
        print(
            f"frames: decode every frame {full:.3f} s, one select pass (+JPEG cache write) {sel:.3f} s, "
            f"cached {cached * 1000:.1f} ms; ratio {full / sel:.2f}x (median of {rounds})",
            flush=True,
        )
        print(
            (
                f"frames: with the asset's known size and frame count (no ffprobe) {known:.3f} s; ratio "
                f"{full / known:.2f}x"
            ),
            flush=True,
        )
        return {"full": full, "select": sel, "known": known, "cached": cached}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def long_clips(folder: Path) -> dict[str, Path]:
    """The 60 s clip (encoded once, reused from the folder) and the 5-minute one (five copies of it,
    stream-copied with the concat demuxer: no re-encoding, the same keyframe every 2 s)."""
    folder.mkdir(parents=True, exist_ok=True)
    short, long = folder / "testsrc2-60s-720p30-gop60.mp4", folder / "testsrc2-300s-720p30-gop60.mp4"
    if not short.is_file():
        print("frames: encoding the 60 s clip (once)...", flush=True)
        media.make_test_video(
            folder / "tmp-60.mp4", seconds=60, size="1280x720", rate=30, gop=60, source="testsrc2", preset="veryfast"
        ).rename(short)
    if not long.is_file():
        listing = folder / "five.txt"
        listing.write_text(f"file '{short.name}'\n" * 5)
        subprocess.run(
            [
                media.ffmpeg_exe(),
                "-y",
                "-loglevel",
                "error",
                "-f",
                "concat",
                "-safe",
                "0",
                "-i",
                str(listing),
                "-c",
                "copy",
                str(folder / "tmp-300.mp4"),
            ],
            check=True,
        )
        (folder / "tmp-300.mp4").rename(long)
    return {"60 s": short, "5 min": long}


def decode_every_frame(path: Path, size: tuple[int, int], keep: list[int]) -> list:
    """The baseline: decode and scale every frame, streamed through a pipe, keeping the wanted ones
    (all of them in memory would be 3 GB for the 5-minute clip)."""
    import numpy as np

    frame_bytes = size[0] * size[1] * 3
    wanted, kept, n = set(keep), [], 0
    proc = subprocess.Popen(
        [
            media.ffmpeg_exe(),
            "-v",
            "error",
            "-i",
            str(path),
            "-vf",
            f"scale={size[0]}:{size[1]}",
            "-f",
            "rawvideo",
            "-pix_fmt",
            "rgb24",
            "pipe:",
        ],
        stdout=subprocess.PIPE,
    )
    while chunk := proc.stdout.read(frame_bytes):
        if n in wanted:
            kept.append(np.frombuffer(chunk, dtype=np.uint8).reshape(size[1], size[0], 3))
        n += 1
    proc.wait()
    return kept


def process_cpu_total() -> float:
    """CPU seconds of this process (PyAV decodes in-process) and of its finished children (ffmpeg)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return total


def bench_long_frames(clip_dir: Path, rounds: int, rounds_5min: int, counts: tuple[int, ...] = (20, 32)) -> dict:
    threads = video_frames.worker_threads()
    results: dict = {}
    for label, path in long_clips(clip_dir).items():
        rounds = rounds_5min if label == "5 min" else rounds
        info = media.probe_video(path)
        size = media.fit_within(info.width, info.height, media.DEFAULT_BOUND)
        index = video_frames.read_index(path)
        keys = index.keyframe_positions()
        print(
            f"frames: {label} clip {info.width}x{info.height}, {info.frame_count} frames at {info.fps:g} fps, "
            f"{len(keys)} keyframes; {threads} decoding threads; load avg {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        times: dict[tuple, list[tuple[float, float]]] = {}

        def timed(key, fn):
            cpu, t0 = process_cpu_total(), time.perf_counter()
            out = fn()
            times.setdefault(key, []).append((time.perf_counter() - t0, process_cpu_total() - cpu))
            return out

        for _ in range(rounds):
            every = timed(
                ("every",), lambda: decode_every_frame(path, size, media.uniform_indices(info.frame_count, max(counts)))
            )
            assert len(every) == max(counts)
            for n in counts:
                idx = media.uniform_indices(info.frame_count, n)
                one = timed(("one pass", n), lambda: media.decode_frames(path, idx, size))
                # As jobs run them: each mode reads the packet index first.
                seek1 = timed(
                    ("seek 1", n),
                    lambda: video_frames.decode_seeking(path, idx, size, video_frames.read_index(path), threads=1),
                )
                seekn = timed(
                    (f"seek {threads}", n),
                    lambda: video_frames.decode_seeking(
                        path, idx, size, video_frames.read_index(path), threads=threads
                    ),
                )
                # The same seeks decoding every frame they pass: what skipping non-reference frames saves.
                video_frames.SKIP_UNWANTED = "DEFAULT"
                try:
                    plain = timed(
                        (f"seek {threads}, no skip", n),
                        lambda: video_frames.decode_seeking(
                            path, idx, size, video_frames.read_index(path), threads=threads
                        ),
                    )
                finally:
                    video_frames.SKIP_UNWANTED = "NONREF"
                key, used = timed(("keyframe", n), lambda: video_frames.decode_keyframes(path, idx, size))
                assert all(
                    (a == b).all() and (a == c).all() and (a == d).all() for a, b, c, d in zip(one, seek1, seekn, plain)
                ), "seeking is not exact"
                assert len(key) == n and all(u % 60 == 0 for u in used)
        base_wall = statistics.median(w for w, _ in times[("every",)])
        base_cpu = statistics.median(c for _, c in times[("every",)])
        print(
            (
                f"frames: {label}: decode every frame (ffmpeg) {base_wall:.2f} s wall, {base_cpu:.2f} s CPU "
                f"(median of {rounds})"
            ),
            flush=True,
        )
        for n in counts:
            idx = media.uniform_indices(info.frame_count, n)
            chosen = video_frames.choose_strategy(index, idx, info.frame_count)
            spans = video_frames.plan_spans(index, idx)
            for mode in ("one pass", "seek 1", f"seek {threads}", f"seek {threads}, no skip", "keyframe"):
                wall = statistics.median(w for w, _ in times[(mode, n)])
                cpu = statistics.median(c for _, c in times[(mode, n)])
                results[(label, n, mode)] = (wall, cpu, base_wall / wall)
                print(
                    f"frames: {label}, {n} frames, {mode:18s}: {wall:6.3f} s wall ({base_wall / wall:5.1f}x), "
                    f"{cpu:6.3f} s CPU ({base_cpu / cpu:5.1f}x)",
                    flush=True,
                )
            print(
                f"frames: {label}, {n} frames: extract_frames chooses {chosen!r} ({len(spans)} spans covering "
                f"{sum(r.targets[-1][0] - r.start + 1 for r in spans)} of {info.frame_count} packets)",
                flush=True,
            )
        results[(label, "every")] = (base_wall, base_cpu)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-judges", action="store_true")
    parser.add_argument("--skip-frames", action="store_true")
    parser.add_argument("--long", action="store_true", help="also the 60 s and 5-minute clips (section 3)")
    parser.add_argument("--long-rounds", type=int, default=3)
    parser.add_argument(
        "--long-rounds-5min", type=int, default=1, help="the 5-minute baseline alone takes ~1 min a round"
    )
    parser.add_argument("--clip-dir", type=Path, default=Path(tempfile.gettempdir()) / "statelab-bench-clips")
    args = parser.parse_args()
    if not args.skip_frames:
        bench_frames(args.rounds)
    if args.long:
        bench_long_frames(args.clip_dir, args.long_rounds, args.long_rounds_5min)
    if not args.skip_judges:
        bench_judges(args.calls, args.latency)


if __name__ == "__main__":
    main()
