"""Frame extraction strategies (inference.video_frames through inference.media): the packet
index and the choice per clip, frame-exact seeking (pixels hashed against decoding every frame,
also for an open-GOP stream and an MPEG-TS file), and the keyframe mode's recorded positions.
No database."""

import hashlib
import subprocess

import pytest

from annotation.media.probe import ffmpeg_exe
from inference import media, video_frames

SIZE = (80, 60)


def digest(frame) -> str:
    return hashlib.sha256(frame.tobytes()).hexdigest()


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clips")

    def x264(name, *args):
        subprocess.run(
            [
                ffmpeg_exe(),
                "-y",
                "-loglevel",
                "error",
                "-f",
                "lavfi",
                "-i",
                "testsrc2=duration=12:size=160x120:rate=25",
                "-pix_fmt",
                "yuv420p",
                "-c:v",
                "libx264",
                "-bf",
                "3",
                *args,
                str(folder / name),
            ],
            check=True,
        )
        return folder / name

    return {
        # Open GOPs: B-frames just before a keyframe in time come after it in decode order and
        # refer back to the previous GOP, so they must be decoded from the keyframe before.
        "open": x264("open.mp4", "-x264-params", "open-gop=1:keyint=25:min-keyint=25:scenecut=0"),
        # MPEG-TS: the demuxer seeks by bytes and lands just past the keyframe asked for.
        "ts": x264("ts.ts", "-g", "25", "-f", "mpegts"),
        # 3 s, one keyframe: every seek would decode from frame 0.
        "short": media.make_test_video(folder / "short.mp4", seconds=3, size="160x120", rate=10),
        # 40 s at 25 fps with a keyframe every second (B-frames on: x264's defaults).
        "long": media.make_test_video(
            folder / "long.mp4", seconds=40, size="160x120", rate=25, gop=25, preset="veryfast"
        ),
    }


@pytest.fixture
def spy(monkeypatch):
    """Which decoder ran: the one pass or the seeks."""
    calls = []
    real_select, real_seek = media.decode_frames, video_frames.decode_seeking
    monkeypatch.setattr(media, "decode_frames", lambda *a, **k: calls.append("select") or real_select(*a, **k))
    monkeypatch.setattr(video_frames, "decode_seeking", lambda *a, **k: calls.append("seek") or real_seek(*a, **k))
    return calls


def test_the_index_lists_every_frame_and_its_keyframes_without_decoding(clips):
    long = video_frames.read_index(clips["long"])
    assert long.frame_count == 1000 and long.rate == 25
    ranks = {p: n for n, p in enumerate(long.presentation())}
    assert [ranks[long.pts[k]] for k in long.keyframe_positions()] == list(range(0, 1000, 25))
    # B-frames: decode order differs from presentation order.
    assert list(long.pts) != long.presentation()
    short = video_frames.read_index(clips["short"])
    assert short.frame_count == 30 and len(short.keyframe_positions()) == 1


def test_a_short_single_keyframe_clip_is_read_in_one_pass_and_a_long_short_gop_clip_by_seeking(clips, spy, tmp_path):
    short_idx, long_idx = media.uniform_indices(30, 8), media.uniform_indices(1000, 8)
    short, long = video_frames.read_index(clips["short"]), video_frames.read_index(clips["long"])
    assert video_frames.choose_strategy(short, short_idx, 30) == "select"
    assert video_frames.choose_strategy(long, long_idx, 1000) == "seek"
    # Even a long clip with a single keyframe is one pass: every seek would decode from frame 0.
    single = video_frames.Index(long.pts, (True,) + (False,) * 999, long.time_base, long.rate)
    assert video_frames.choose_strategy(single, long_idx, 1000) == "select"
    # So is a clip where the wanted frames cover every GOP densely (the spans would decode it all).
    assert video_frames.choose_strategy(long, list(range(0, 1000, 3)), 1000) == "select"

    media.sample_frames(clips["short"], 8, cache_root=tmp_path)
    assert spy == ["select"]
    spy.clear()
    frames = media.sample_frames(clips["long"], 8, cache_root=tmp_path)
    assert spy == ["seek"] and frames.indices == long_idx and len(frames.paths) == 8


def test_spans_start_at_the_keyframe_before_and_share_a_gop(clips):
    index = video_frames.read_index(clips["long"])
    spans = video_frames.plan_spans(index, [3, 10, 30, 999])
    ranks = {p: n for n, p in enumerate(index.presentation())}
    assert [ranks[index.pts[r.start]] for r in spans] == [0, 25, 975]
    assert [len(r.targets) for r in spans] == [2, 1, 1]


def test_seeking_returns_exactly_the_frames_of_one_pass_and_of_decoding_every_frame(clips):
    index = video_frames.read_index(clips["long"])
    every = media.decode_all_frames(clips["long"], SIZE)
    assert len(every) == 1000
    # Keyframes, the frames just after and just before them, mid-GOP, the last.
    wanted = [0, 1, 24, 25, 26, 27, 100, 212, 499, 500, 501, 737, 975, 999]
    seeking = video_frames.decode_seeking(clips["long"], wanted, SIZE, index, threads=2)
    one_pass = media.decode_frames(clips["long"], wanted, SIZE)
    assert [digest(f) for f in seeking] == [digest(f) for f in one_pass] == [digest(every[i]) for i in wanted]
    # The frames differ from their neighbours (so equal hashes do mean the same position).
    assert len({digest(every[i]) for i in range(95, 106)}) == 11


@pytest.mark.parametrize("clip", ["open", "ts"])
def test_seeking_is_exact_in_open_gops_and_in_mpeg_ts(clips, clip):
    index = video_frames.read_index(clips[clip])
    every = media.decode_all_frames(clips[clip], SIZE)
    assert len(every) == index.frame_count == 300
    keys = sorted({p: n for n, p in enumerate(index.presentation())}[index.pts[k]] for k in index.keyframe_positions())
    assert len(keys) >= 10
    # Every keyframe and the two frames before and after it.
    wanted = sorted({k + d for k in keys[1:] for d in (-2, -1, 0, 1, 2) if 0 <= k + d < 300})
    seeking = video_frames.decode_seeking(clips[clip], wanted, SIZE, index, threads=2)
    assert [digest(f) for f in seeking] == [digest(every[i]) for i in wanted]
    frames, used = video_frames.decode_keyframes(clips[clip], [k + 1 for k in keys], SIZE, index=index)
    assert used == keys and [digest(f) for f in frames] == [digest(every[i]) for i in keys]


def test_more_frames_than_threads_keep_their_order(clips):
    index = video_frames.read_index(clips["long"])
    wanted = media.uniform_indices(1000, 35)
    every = media.decode_all_frames(clips["long"], SIZE)
    seeking = video_frames.decode_seeking(clips["long"], wanted, SIZE, index, threads=3)
    assert [digest(f) for f in seeking] == [digest(every[i]) for i in wanted]


def test_frames_past_the_end_are_a_frame_count_mismatch(clips):
    index = video_frames.read_index(clips["long"])
    with pytest.raises(video_frames.FrameCountMismatch):
        video_frames.decode_seeking(clips["long"], [10, 1000], SIZE, index)
    with pytest.raises(video_frames.FrameCountMismatch):
        media.decode_frames(clips["long"], [10, 1000], SIZE)


def test_keyframe_mode_takes_the_nearest_keyframes_and_records_where_they_are(clips, tmp_path):
    every = media.decode_all_frames(clips["long"], SIZE)
    wanted = [10, 13, 60, 990]
    frames, used = video_frames.decode_keyframes(clips["long"], wanted, SIZE)
    assert used == [0, 25, 50, 975]  # 13 is nearer 25 than 0; 990 nearer 975 than the clip's end
    assert [digest(f) for f in frames] == [digest(every[i]) for i in used]

    sampled = media.sample_frames(clips["long"], 8, cache_root=tmp_path, bound=SIZE, mode="keyframe")
    assert sampled.indices == [50, 175, 300, 425, 550, 675, 800, 925]
    assert all(i % 25 == 0 for i in sampled.indices)
    again = media.sample_frames(clips["long"], 8, cache_root=tmp_path, bound=SIZE, mode="keyframe")
    assert again.indices == sampled.indices and again.paths == sampled.paths  # from the cache
    exact = media.sample_frames(clips["long"], 8, cache_root=tmp_path, bound=SIZE)
    assert exact.indices == media.uniform_indices(1000, 8) and exact.paths[0].parent != sampled.paths[0].parent


def test_pyav_loads_on_the_first_decode_not_with_the_module():
    """Web processes import inference.media (through the protocols) and never decode: PyAV's
    libraries (~18 MiB resident) load only in the processes that decode."""
    import sys

    probe = (
        "import sys, inference.media as m; before = 'av' in sys.modules; "
        "m.video_frames._lib(); print(before, 'av' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
