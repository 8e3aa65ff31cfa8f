"""Phone videos (a stream stored sideways with a display-matrix rotation) through frame sampling:
frames come out upright, fitted within the bound as shown, undistorted, the same whether the
asset recorded the stored size (imported before sizes were the displayed ones) or the displayed
one, and in every decoding mode. The reference is the ffmpeg binary itself. No database."""

from __future__ import annotations

import hashlib
import io
import subprocess

import numpy as np
import pytest
from PIL import Image

from annotation.media.probe import VideoInfo, ffmpeg_exe
from inference import media, video_frames

# Counterclockwise degrees (the display matrix's sense) -> the filter that turns stored pixels so.
TURN_FILTER = {90: "transpose=cclock", 270: "transpose=clock", 180: "hflip,vflip"}


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """160x120 as stored, 20 frames at 10 fps, with a keyframe every 5 frames (so seeking is real)."""
    folder = tmp_path_factory.mktemp("rotated")
    return {
        rotation: media.make_test_video(
            folder / f"r{rotation}.mp4", seconds=2, size="160x120", rate=10, gop=5, rotation=rotation
        )
        for rotation in (0, 90, 180, 270)
    }


def ffmpeg_frame(path, n: int, *filters: str, autorotate: bool = True) -> np.ndarray:
    """Frame `n` as the ffmpeg binary gives it through `filters`: turned as players turn it, or as
    stored (``autorotate=False``)."""
    chain = ",".join([f"select=eq(n\\,{n})", *filters])
    png = subprocess.run(
        [
            ffmpeg_exe(),
            "-v",
            "error",
            *([] if autorotate else ["-noautorotate"]),
            "-i",
            str(path),
            "-vf",
            chain,
            "-frames:v",
            "1",
            "-f",
            "image2pipe",
            "-c:v",
            "png",
            "-",
        ],
        capture_output=True,
        check=True,
    ).stdout
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


def mean_difference(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape
    return float(np.abs(a.astype(int) - b.astype(int)).mean())


@pytest.mark.parametrize("rotation", [90, 270, 180])
def test_frames_at_full_size_are_upright_as_ffmpeg_plays_them(clips, rotation):
    shown = ffmpeg_frame(clips[rotation], 7)
    ours = media.decode_frames(clips[rotation], [7], (1000, 1000))[0]
    assert ours.shape == ((120, 160, 3) if rotation == 180 else (160, 120, 3))
    assert mean_difference(ours, shown) < 1
    assert mean_difference(np.rot90(ours, 2), shown) > 40  # the test can tell a wrong turn


@pytest.mark.parametrize("rotation", [90, 270])
def test_sampled_frames_fit_the_bound_as_shown_whatever_size_the_asset_recorded(clips, tmp_path, rotation):
    video = clips[rotation]
    bound = (80, 60)  # not square: shown 120x160 fits as 45x60; stored 160x120 would give 80x60 turned to 60x80
    stored_size = VideoInfo(160, 120, 20, 2.0)  # an asset imported before this change
    displayed = VideoInfo(120, 160, 20, 2.0, rotation=rotation)  # one imported since
    sampled = {
        name: media.sample_frames(video, 4, cache_root=tmp_path / name, bound=bound, known=known)
        for name, known in (("probed", None), ("stored", stored_size), ("displayed", displayed))
    }

    for frames in sampled.values():
        assert frames.size == (45, 60) and frames.indices == [2, 7, 12, 17] and frames.source_frames == 20
        assert [Image.open(p).size for p in frames.paths] == [(45, 60)] * 4
    # The same JPEG bytes however the size was recorded (and were it probed).
    digests = {name: [hashlib.sha256(p.read_bytes()).hexdigest() for p in f.paths] for name, f in sampled.items()}
    assert digests["stored"] == digests["displayed"] == digests["probed"]
    # Upright and undistorted: ffmpeg scaling the stored frame to 60x45 and turning it the same way.
    expected = ffmpeg_frame(video, 7, "scale=60:45:flags=bicubic", TURN_FILTER[rotation], autorotate=False)
    ours = media.decode_frames(video, [7], bound)[0]
    assert mean_difference(ours, expected) < 6  # measured 3.0 (ffmpeg's scaler rounds differently)
    assert mean_difference(np.rot90(ours, 2), expected) > 40


def test_every_decoding_mode_turns_a_rotated_stream_the_same_way(clips):
    video, bound = clips[90], (60, 60)
    every = media.decode_all_frames(video, bound)
    assert every.shape == (20, 60, 45, 3)
    index = video_frames.read_index(video)
    wanted = [1, 6, 13, 19]
    seeking = video_frames.decode_seeking(video, wanted, bound, index, threads=2)
    one_pass = media.decode_frames(video, wanted, bound)
    keyframes, used = video_frames.decode_keyframes(video, wanted, bound, index=index)
    assert used == [0, 5, 15, 15]  # keyframes every 5 frames; 19 is nearest 15
    for frames, numbers in ((seeking, wanted), (one_pass, wanted), (keyframes, used)):
        assert [f.tobytes() for f in frames] == [every[i].tobytes() for i in numbers]


@pytest.mark.parametrize("rotation", [0, 90, 180, 270])
def test_a_square_bound_gives_the_pixels_frames_had_before_so_the_cache_format_stays(clips, rotation):
    """Before, frames were scaled to the stored size fitted within the bound and then turned; now
    they are fitted as shown. Every job's bound is square (inference/services/frames.py), where
    both give the same pixels, so frames cached before the change (CACHE_FORMAT 1) stay right."""
    video, bound = clips[rotation], (100, 100)
    av = video_frames._lib()
    with av.open(str(video)) as container:
        before = []
        for frame in container.decode(video=0):
            stored = media.fit_within(frame.width, frame.height, bound)  # 100x75, from the stored 160x120
            array = frame.to_ndarray(width=stored[0], height=stored[1], format="rgb24", interpolation="BICUBIC")
            before.append(np.ascontiguousarray(np.rot90(array, round((frame.rotation or 0) / 90) % 4)))
    now = media.decode_all_frames(video, bound)
    assert now.shape == ((20, 75, 100, 3) if rotation in (0, 180) else (20, 100, 75, 3))
    assert [f.tobytes() for f in now] == [f.tobytes() for f in before]
    assert media.frame_cache_folder("/c", "ab" * 32, 4, bound).name == "v1_4_100x100"
