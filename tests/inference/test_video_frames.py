"""Frame extraction strategies (inference.video_frames through inference.media): the probe's
choice per clip, frame-exact seeking (pixels hashed against decoding every frame), and the
keyframe mode's recorded positions. No database."""
import hashlib

import pytest

from annotation.media_probe import ffprobe_exe
from inference import media, video_frames

SIZE = (80, 60)

pytestmark = pytest.mark.skipif(ffprobe_exe() is None, reason="the keyframe probe needs ffprobe")


def digest(frame) -> str:
    return hashlib.sha256(frame.tobytes()).hexdigest()


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clips")
    return {
        # 3 s, one keyframe: every seek would decode from frame 0.
        "short": media.make_test_video(folder / "short.mp4", seconds=3, size="160x120", rate=10),
        # 40 s at 25 fps with a keyframe every second (B-frames on: x264's defaults).
        "long": media.make_test_video(folder / "long.mp4", seconds=40, size="160x120", rate=25, gop=25, preset="veryfast"),
    }


@pytest.fixture
def spy(monkeypatch):
    """Which decoder ran: the one pass or the seeks."""
    calls = []
    real_select, real_seek = media.decode_frames, video_frames.decode_seeking
    monkeypatch.setattr(media, "decode_frames", lambda *a, **k: calls.append("select") or real_select(*a, **k))
    monkeypatch.setattr(video_frames, "decode_seeking", lambda *a, **k: calls.append("seek") or real_seek(*a, **k))
    return calls


def test_the_probe_reads_the_keyframe_spacing_from_a_prefix(clips):
    long = video_frames.probe_layout(clips["long"])
    assert long.fps == 25 and long.constant_rate and long.gop_seconds == pytest.approx(1.0)
    assert long.keyframes[:3] == pytest.approx((0.0, 1.0, 2.0)) and long.probed <= video_frames.PROBE_PREFIX_SECONDS + 1
    short = video_frames.probe_layout(clips["short"])
    assert short.keyframes == (0.0,) and short.gop_seconds is None


def test_a_short_single_keyframe_clip_is_read_in_one_pass_and_a_long_short_gop_clip_by_seeking(clips, spy, tmp_path):
    short_idx, long_idx = media.uniform_indices(30, 8), media.uniform_indices(1000, 8)
    assert video_frames.choose_strategy(video_frames.probe_layout(clips["short"]), short_idx, 30) == "select"
    assert video_frames.choose_strategy(video_frames.probe_layout(clips["long"]), long_idx, 1000) == "seek"
    # Even a long clip with a single keyframe is one pass: every seek would decode from frame 0.
    single = video_frames.Layout(fps=video_frames.Fraction(25), constant_rate=True, offset=0.0, keyframes=(0.0,), probed=10)
    assert video_frames.choose_strategy(single, long_idx, 1000) == "select"

    media.sample_frames(clips["short"], 8, cache_root=tmp_path)
    assert spy == ["select"]
    spy.clear()
    frames = media.sample_frames(clips["long"], 8, cache_root=tmp_path)
    assert spy == ["seek"] and frames.indices == long_idx and len(frames.paths) == 8


def test_seeking_returns_exactly_the_frames_of_one_pass_and_of_decoding_every_frame(clips):
    layout = video_frames.probe_layout(clips["long"])
    every = media.decode_all_frames(clips["long"], SIZE)
    assert len(every) == 1000
    # Keyframes, the frames just after them (inside ffmpeg's B-frame pre-roll), mid-GOP, the last.
    wanted = [0, 1, 24, 25, 26, 27, 100, 212, 499, 500, 501, 737, 975, 999]
    seeking = video_frames.decode_seeking(clips["long"], wanted, SIZE, layout, threads=2)
    one_pass = media.decode_frames(clips["long"], wanted, SIZE)
    assert [digest(f) for f in seeking] == [digest(f) for f in one_pass] == [digest(every[i]) for i in wanted]
    # The frames differ from their neighbours (so equal hashes do mean the same position).
    assert len({digest(every[i]) for i in range(95, 106)}) == 11


def test_more_frames_than_a_group_keep_their_order_across_threads(clips):
    layout = video_frames.probe_layout(clips["long"])
    wanted = media.uniform_indices(1000, video_frames.GROUP_SIZE * 2 + 3)
    every = media.decode_all_frames(clips["long"], SIZE)
    seeking = video_frames.decode_seeking(clips["long"], wanted, SIZE, layout, threads=3)
    assert [digest(f) for f in seeking] == [digest(every[i]) for i in wanted]


def test_keyframe_mode_takes_the_nearest_keyframes_and_records_where_they_are(clips, tmp_path):
    every = media.decode_all_frames(clips["long"], SIZE)
    wanted = [10, 13, 60, 990]
    frames, used = video_frames.decode_keyframes(clips["long"], wanted, SIZE, 25.0)
    assert used == [0, 25, 50, 975]  # 13 is nearer 25 than 0; 990 nearer 975 than the clip's end
    assert [digest(f) for f in frames] == [digest(every[i]) for i in used]

    sampled = media.sample_frames(clips["long"], 8, cache_root=tmp_path, bound=SIZE, mode="keyframe")
    assert sampled.indices == [50, 175, 300, 425, 550, 675, 800, 925]
    assert all(i % 25 == 0 for i in sampled.indices)
    again = media.sample_frames(clips["long"], 8, cache_root=tmp_path, bound=SIZE, mode="keyframe")
    assert again.indices == sampled.indices and again.paths == sampled.paths  # from the cache
    exact = media.sample_frames(clips["long"], 8, cache_root=tmp_path, bound=SIZE)
    assert exact.indices == media.uniform_indices(1000, 8) and exact.paths[0].parent != sampled.paths[0].parent
