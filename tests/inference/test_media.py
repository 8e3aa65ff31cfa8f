import pytest
from PIL import Image

from annotation.media.probe import sha256_of
from inference import media


def test_uniform_indices_take_segment_centres():
    assert media.uniform_indices(50, 5) == [5, 15, 25, 35, 45]
    assert media.uniform_indices(3, 8) == [0, 1, 2]
    assert media.uniform_indices(0, 4) == []


def test_fit_within_keeps_aspect_and_never_upscales():
    assert media.fit_within(1280, 720, (448, 448)) == (448, 252)
    assert media.fit_within(300, 600, (448, 448)) == (224, 448)
    assert media.fit_within(100, 50, (448, 448)) == (100, 50)


def test_sample_frames_one_pass_exact_frames_and_cache(tmp_path):
    # testsrc draws a frame counter; 4 s at 10 fps = 40 frames, 640x360 -> fits 448x448 as 448x252.
    video = media.make_test_video(tmp_path / "v.mp4", seconds=4, size="640x360", rate=10)
    frames = media.sample_frames(video, 4, cache_root=tmp_path / "cache")
    assert frames.indices == [5, 15, 25, 35]
    assert frames.source_frames == 40
    assert frames.size == (448, 252)
    assert [Image.open(p).size for p in frames.paths] == [(448, 252)] * 4
    # The sampled frames are exactly the frames at those indices (compare with a full decode).
    every = media.decode_all_frames(video, (448, 252))
    assert every.shape == (40, 252, 448, 3)
    picked = media.decode_frames(video, frames.indices, (448, 252))
    for k, index in enumerate(frames.indices):
        assert (picked[k].astype(int) - every[index].astype(int)).__abs__().mean() < 1.0
    # Second call: served from the cache by (content hash, N, bound), without ffmpeg.
    folder = frames.paths[0].parent
    assert folder.name == f"v{media.CACHE_FORMAT}_4_448x448"
    again = media.sample_frames(video, 4, cache_root=tmp_path / "cache", content_hash=sha256_of(video)[0])
    assert again.paths == frames.paths and again.indices == frames.indices


def test_unreadable_video_raises_a_clear_media_error(tmp_path):
    bad = tmp_path / "broken.mp4"
    bad.write_bytes(b"not a video" * 50)
    with pytest.raises(media.MediaError) as exc:
        media.sample_frames(bad, 3, cache_root=tmp_path / "cache")
    assert "broken.mp4" in str(exc.value) and "cannot read" in str(exc.value)
    assert not (tmp_path / "cache" / "frames").exists() or not any((tmp_path / "cache" / "frames").rglob("frames.json"))


def test_load_image_crops_to_box_and_resizes(tmp_path):
    img = Image.new("RGB", (1000, 500), (0, 0, 255))
    img.paste((255, 0, 0), (100, 50, 300, 250))  # a red square at x=100..300, y=50..250
    img.save(tmp_path / "i.png")
    crop = media.load_image(tmp_path / "i.png", bbox=[100, 50, 200, 200])
    assert crop.size == (200, 200)
    assert crop.getpixel((100, 100)) == (255, 0, 0)
    full = media.load_image(tmp_path / "i.png")
    assert full.size == (448, 224)
    clipped = media.load_image(tmp_path / "i.png", bbox=[900, 400, 500, 500])  # clipped to the image
    assert clipped.size == (100, 100)
    with pytest.raises(media.MediaError):
        media.load_image(tmp_path / "i.png", bbox=[2000, 2000, 10, 10])


def test_known_metadata_skips_the_probe_and_a_wrong_frame_count_falls_back_to_it(tmp_path, monkeypatch):
    video = media.make_test_video(tmp_path / "v.mp4", seconds=2, size="320x240", rate=10)  # 20 frames
    real_probe = media.probe_video
    calls = []

    def counting_probe(path):
        calls.append(path)
        return real_probe(path)

    monkeypatch.setattr(media, "probe_video", counting_probe)
    right = media.sample_frames(video, 4, cache_root=tmp_path / "a", known=media.VideoInfo(320, 240, 20, 2.0))
    assert right.indices == [2, 7, 12, 17] and calls == []
    # A container that claims 40 frames: asking for frame 35 returns too few frames, so it probes.
    wrong = media.sample_frames(video, 4, cache_root=tmp_path / "b", known=media.VideoInfo(320, 240, 40, 4.0))
    assert wrong.indices == [2, 7, 12, 17] and wrong.source_frames == 20 and len(calls) == 1


def test_exif_rotated_photos_are_upright_for_sizes_boxes_and_crops(tmp_path):
    # A phone photo stored 40x30 with "rotate 90° clockwise" (orientation 6) is shown 30x40 by the
    # browser; the import records that size and crops use the same upright pixels.
    from annotation.media.assets import inspect_image

    raw = Image.new("RGB", (40, 30), (0, 0, 255))
    raw.paste((255, 0, 0), (0, 0, 10, 30))  # a red band on the stored image's left edge
    exif = Image.Exif()
    exif[0x0112] = 6
    path = tmp_path / "phone.jpg"
    raw.save(path, "JPEG", exif=exif.tobytes(), quality=95)

    info = inspect_image(path, max_pixels=10**6)
    assert (info.width, info.height) == (30, 40)
    upright = media.load_image(path, bound=(1000, 1000))
    assert upright.size == (30, 40)
    # Rotated clockwise, the stored left edge is now the top: the box [0, 0, 30, 8] is red.
    top = media.load_image(path, bound=(1000, 1000), bbox=[0, 0, 30, 8])
    r, g, b = top.resize((1, 1)).getpixel((0, 0))
    assert r > 200 and b < 60
