"""Exact sub-image search of a released crop in its frame (protocols/changeit/crops.py)."""

from __future__ import annotations

import numpy as np
from PIL import Image

from protocols.changeit.crops import MAX_FULL, locate, locate_files


def noise(h: int, w: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(h, w, 3), dtype=np.uint8)


def test_an_exact_sub_image_is_found_at_its_place():
    frame = noise(40, 60)
    found = locate(frame, frame[5:17, 30:52])
    assert (found.box, found.reason) == ([30, 5, 22, 12], "")


def test_the_whole_frame_is_its_own_crop():
    frame = noise(10, 12)
    assert locate(frame, frame.copy()).box == [0, 0, 12, 10]


def test_one_changed_pixel_is_not_a_match():
    frame = noise(40, 60)
    crop = frame[5:17, 30:52].copy()
    crop[11, 21, 2] ^= 1  # the last pixel, which no anchor looks at before the full comparison
    found = locate(frame, crop)
    assert (found.box, found.reason) == (None, "not an exact sub-image of its frame")


def test_a_crop_larger_than_its_frame_is_not_searched():
    found = locate(noise(10, 10), noise(11, 10))
    assert (found.box, found.reason) == (None, "crop 10×11 larger than its 10×10 frame")


def test_a_uniform_crop_matches_too_many_places_to_be_placed():
    frame = np.zeros((40, 40, 3), dtype=np.uint8)
    found = locate(frame, frame[:4, :4])
    assert found.box is None and found.reason == "too uniform to place (1369 candidate places)"
    assert 37 * 37 > MAX_FULL


def test_a_crop_found_twice_is_not_placed():
    tile = noise(6, 6, seed=3)
    frame = np.zeros((20, 30, 3), dtype=np.uint8)
    frame[2:8, 3:9] = tile
    frame[10:16, 20:26] = tile
    found = locate(frame, tile)
    assert (found.box, found.reason) == (None, "matches 2 places in its frame")


def test_files_are_compared_as_shown_and_a_recompressed_crop_is_not_located(tmp_path):
    frame = noise(36, 48, seed=7)
    Image.fromarray(frame).save(tmp_path / "frame.png")
    Image.fromarray(frame[4:20, 8:40]).save(tmp_path / "exact.png")
    Image.fromarray(frame[4:20, 8:40]).save(tmp_path / "again.jpg", quality=75)
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8\xff not an image")

    assert locate_files(tmp_path / "frame.png", tmp_path / "exact.png").box == [8, 4, 32, 16]
    assert locate_files(tmp_path / "frame.png", tmp_path / "again.jpg").box is None
    broken = locate_files(tmp_path / "frame.png", tmp_path / "broken.jpg")
    assert (broken.box, broken.reason) == (None, "unreadable image (UnidentifiedImageError)")


def test_an_exif_rotated_frame_is_searched_as_shown(tmp_path):
    shown = noise(30, 20, seed=5)  # 20 wide, 30 tall as shown
    stored = Image.fromarray(np.rot90(shown, k=-1).copy())  # stored turned; orientation 8 turns it back
    exif = Image.Exif()
    exif[0x0112] = 8
    stored.save(tmp_path / "frame.png", exif=exif)
    Image.fromarray(shown[3:13, 2:17]).save(tmp_path / "crop.png")
    assert locate_files(tmp_path / "frame.png", tmp_path / "crop.png").box == [2, 3, 15, 10]
