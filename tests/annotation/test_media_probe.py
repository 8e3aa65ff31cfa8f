"""The one video probe (annotation.media_probe): with ffprobe, and without it as in the demo, where
imageio-ffmpeg bundles only an ffmpeg binary and the probe reads `ffmpeg -i` instead."""
from __future__ import annotations

import hashlib

import pytest

from annotation import media_probe
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
        with_ffprobe.width, with_ffprobe.height, with_ffprobe.frame_count, with_ffprobe.fps, with_ffprobe.codec)
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
    from annotation.media import inspect_media

    with_ffprobe = inspect_media(video, "video")
    monkeypatch.setattr(media_probe, "ffprobe_exe", lambda: None)
    without = inspect_media(video, "video")
    assert without == with_ffprobe
    assert (without.width, without.height, without.frame_count, without.fps, without.duration) == (320, 240, 20, 10.0, 2.0)


def test_sha256_of_returns_the_digest_and_the_size(tmp_path):
    path = tmp_path / "blob.bin"
    data = bytes(range(256)) * 5000  # more than one 1 MiB chunk
    path.write_bytes(data)
    assert media_probe.sha256_of(path) == (hashlib.sha256(data).hexdigest(), len(data))
