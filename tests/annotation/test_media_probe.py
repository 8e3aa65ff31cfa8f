"""The one video probe (annotation/media/probe.py): with ffprobe, and without it as in the demo, where
imageio-ffmpeg bundles only an ffmpeg binary and the probe reads `ffmpeg -i` instead."""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess

import pytest
from PIL import Image

from annotation.media import probe as media_probe
from inference.media import make_test_video

needs_ffprobe = pytest.mark.skipif(media_probe.ffprobe_exe() is None, reason="no ffprobe on this machine")


@pytest.fixture
def video(tmp_path):
    return make_test_video(tmp_path / "clip.mp4", seconds=2, size="320x240", rate=10)  # 20 frames


@needs_ffprobe
def test_ffprobe_reports_container_stream_and_counts_frames(video):
    info = media_probe.probe_video(video)
    assert (info.width, info.height, info.frame_count, info.fps, info.codec) == (320, 240, 20, 10.0, "h264")
    assert info.duration == pytest.approx(2.0, abs=0.01)
    assert "mp4" in info.format.split(",")
    # Without counting, the frame count is the container's claim (mp4 states it).
    assert media_probe.probe_video(video, count_frames=False).frame_count == 20


@needs_ffprobe
def test_without_ffprobe_the_probe_reads_ffmpeg_and_gives_the_same_answer(video, monkeypatch):
    with_ffprobe = media_probe.probe_video(video)
    monkeypatch.setattr(media_probe, "ffprobe_exe", lambda: None)
    without = media_probe.probe_video(video)
    assert (without.width, without.height, without.frame_count, without.fps, without.codec) == (
        with_ffprobe.width,
        with_ffprobe.height,
        with_ffprobe.frame_count,
        with_ffprobe.fps,
        with_ffprobe.codec,
    )
    assert without.duration == pytest.approx(with_ffprobe.duration, abs=0.01)
    assert set(without.format.split(",")) == set(with_ffprobe.format.split(","))
    # `ffmpeg -i` states no frame count: not counting leaves it unknown (the import then uses fps x duration).
    assert media_probe.probe_video(video, count_frames=False).frame_count is None


@pytest.mark.parametrize("ffprobe", [True, False])
def test_unreadable_files_name_the_file_and_the_tool(tmp_path, monkeypatch, ffprobe):
    if ffprobe and media_probe.ffprobe_exe() is None:
        pytest.skip("no ffprobe on this machine")
    if not ffprobe:
        monkeypatch.setattr(media_probe, "ffprobe_exe", lambda: None)
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"not a video" * 50)
    with pytest.raises(media_probe.VideoUnreadable) as exc:
        media_probe.probe_video(bad)
    assert exc.value.tool == ("ffprobe" if ffprobe else "ffmpeg") and exc.value.detail
    assert str(exc.value) == f"ffmpeg cannot read video broken.mp4: {exc.value.detail}"
    with pytest.raises(media_probe.MediaError, match="^video gone.mp4 does not exist$"):
        media_probe.probe_video(tmp_path / "gone.mp4")


@needs_ffprobe
def test_the_import_records_the_same_video_with_or_without_ffprobe(video, monkeypatch):
    from annotation.media.assets import inspect_media

    with_ffprobe = inspect_media(video, "video")
    monkeypatch.setattr(media_probe, "ffprobe_exe", lambda: None)
    without = inspect_media(video, "video")
    assert without == with_ffprobe
    assert (without.width, without.height, without.frame_count, without.fps, without.duration) == (
        320,
        240,
        20,
        10.0,
        2.0,
    )


# --- phone videos: a stream stored sideways with a rotation players apply -------------------------


@pytest.fixture(scope="module")
def rotated(tmp_path_factory):
    """160x120 as stored, 20 frames, tagged to be shown turned by 90, 180 and 270 degrees
    counterclockwise (the display matrix's sense)."""
    folder = tmp_path_factory.mktemp("rotated")
    return {
        rotation: make_test_video(folder / f"r{rotation}.mp4", seconds=2, size="160x120", rate=10, rotation=rotation)
        for rotation in (90, 180, 270)
    }


def played_size(path) -> tuple[int, int]:
    """The size of the first frame as the ffmpeg binary plays it (it applies the rotation as
    browsers do)."""
    png = subprocess.run(
        [
            media_probe.ffmpeg_exe(),
            "-v",
            "error",
            "-i",
            str(path),
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
    return Image.open(io.BytesIO(png)).size


def decoder_rotation(path) -> int:
    """The rotation PyAV's decoder reports on the first frame (degrees counterclockwise), 0..359."""
    import av

    with av.open(str(path)) as container:
        return round(next(container.decode(video=0)).rotation or 0) % 360


@needs_ffprobe
@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_ffprobe_reports_a_rotated_video_as_shown(rotated, rotation):
    info = media_probe.probe_video(rotated[rotation])
    assert (
        (info.width, info.height) == played_size(rotated[rotation]) == ((160, 120) if rotation == 180 else (120, 160))
    )
    assert info.rotation == decoder_rotation(rotated[rotation]) == rotation
    assert info.frame_count == 20


@pytest.fixture(params=["system ffmpeg", "bundled ffmpeg"])
def without_ffprobe(request, monkeypatch):
    """No ffprobe, as in the demo: the probe reads `ffmpeg -i`, from Debian's ffmpeg (5.1 prints
    "displaymatrix: rotation of ...") or imageio-ffmpeg's static build (9: "Display Matrix: ...")."""
    if request.param == "system ffmpeg":
        if shutil.which("ffmpeg") is None:
            pytest.skip("no system ffmpeg on this machine")
        monkeypatch.setattr(media_probe, "ffprobe_exe", lambda: None)
    else:
        monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None)  # no ffmpeg on the PATH at all
        assert "imageio_ffmpeg" in media_probe.ffmpeg_exe()
    return request.param


@pytest.mark.parametrize("rotation", [90, 180, 270])
def test_without_ffprobe_a_rotated_video_is_read_as_shown_from_ffmpeg(rotated, rotation, without_ffprobe):
    info = media_probe.probe_video(rotated[rotation])
    assert media_probe.ffprobe_exe() is None
    assert (info.width, info.height, info.rotation, info.frame_count) == (
        (160, 120, 180, 20) if rotation == 180 else (120, 160, rotation, 20)
    )


def test_an_unrotated_video_reports_no_rotation_with_or_without_ffprobe(video, monkeypatch):
    probed = [media_probe.probe_video(video)]
    monkeypatch.setattr(media_probe, "ffprobe_exe", lambda: None)
    probed.append(media_probe.probe_video(video))
    assert [(i.width, i.height, i.rotation) for i in probed] == [(320, 240, 0)] * 2


@pytest.mark.parametrize(
    "degrees,turn",
    [
        (0, 0),
        (90, 90),
        (-90, 270),
        (-180, 180),
        (180.0, 180),
        ("-90.00", 270),
        (270, 270),
        (360, 0),
        (89.5, 90),
        (10, 0),
    ],
)
def test_a_rotation_is_taken_to_the_nearest_quarter_turn_as_the_decoder_turns_frames(degrees, turn):
    assert media_probe.quarter_turn(degrees) == turn


def test_the_rotate_tag_of_ffmpeg_before_5_counts_clockwise_and_the_matrix_wins():
    """FFmpeg 4 (not installed here) printed a phone video's turn twice: a clockwise ``rotate``
    tag and the counterclockwise display matrix, as for an iPhone portrait clip (its header, abridged)."""
    header = (
        "\n    Metadata:\n      rotate          : 90\n      creation_time   : 2020-01-01T00:00:00.000000Z\n"
        "    Side data:\n      displaymatrix: rotation of -90.00 degrees\n"
    )
    assert media_probe._header_rotation(header) == 270
    assert media_probe._header_rotation(header.split("    Side data")[0]) == 270  # the tag alone says the same
    assert media_probe._header_rotation("\n    Metadata:\n      handler_name    : VideoHandler\n") == 0
    stream = {
        "width": 1920,
        "height": 1080,
        "tags": {"rotate": "90"},
        "side_data_list": [{"side_data_type": "Display Matrix", "rotation": -90}],
    }
    assert media_probe._ffprobe_rotation(stream) == 270
    assert media_probe._ffprobe_rotation({"tags": {"rotate": "90"}}) == 270
    assert media_probe._ffprobe_rotation({"tags": {"rotate": "x"}, "side_data_list": [{"side_data_type": "CPB"}]}) == 0


def test_sha256_of_returns_the_digest_and_the_size(tmp_path):
    path = tmp_path / "blob.bin"
    data = bytes(range(256)) * 5000  # more than one 1 MiB chunk
    path.write_bytes(data)
    assert media_probe.sha256_of(path) == (hashlib.sha256(data).hexdigest(), len(data))
