"""A tiny ChangeIt-Frames release in the authors' layout (protocols/changeit/formats.py), written by
the tests: noise frames (so a crop can sit in exactly one place), an exact crop, a re-encoded one,
the state names as Python dicts and ChangeIt's per-second label files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

W, H = 48, 36
# The crop of candle/vid_A frame 4 cut from the frame's decoded pixels at this box (x, y, w, h).
EXACT_BOX = [11, 7, 20, 14]

# If the reader ran this file it would stop: the dicts below are read as literals only.
STATES = """raise SystemExit("classification_states.py was executed")

q = {
  "candle": ["unlit candle", "lighted candle"],
  "apple": ["whole apple", "peeled apple", "cut apple"],
  "beer": ["empty glass", "cup full of beer"],
}

a = {
    "candle": {"initial": ["unlit candle"], "terminal": ["lighted candle"]},
    "apple": {"initial": ["whole apple"], "terminal": ["peeled apple", "cut apple"]},
    "beer": {"initial": ["empty glass"], "terminal": ["a glass full of beer"]},
}
"""

# second,label rows (ChangeIt: no header; 0 background, 1 initial, 2 action, 3 end state).
LABELS = {
    ("candle", "vid_A"): [0, 1, 1, 2, 3, 3, 0],  # seconds 0..6
    ("apple", "-vid_B"): [1, 2, 3],
    ("beer", "vid_C"): [3, 1],
    ("tea", "vid_D"): [1, 3],  # no frames are released for vid_D (and a has no tea)
}


def noise(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(H, W, 3), dtype=np.uint8)


def write_frame(path: Path, seed: int) -> np.ndarray:
    """A JPEG frame; returns its pixels as decoded (what a crop cut from it holds)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(noise(seed)).save(path, quality=90)
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def write_release(base: Path) -> Path:
    """The authors' repository checkout at ``base``; returns the release folder (object-states/)."""
    root = base / "object-states"
    full, subset, crops = root / "ChangeIT-Frames-Full", root / "ChangeIT-Subset-Images", root / "ChangeIT-Subset-Crop"
    # vid_A (candle): frames 1..7 are seconds 0..6; frame 5 is in the golden subset.
    shown = {}
    for n in (1, 2, 3, 4, 6, 7, 9):  # frame 9 is second 8, which the labels do not reach
        shown[n] = write_frame(full / "vid_A" / f"frame_{n:04d}.jpg", n)
    shown[5] = write_frame(subset / "vid_A" / f"frame_{5:04d}.jpg", 5)
    (full / "vid_A" / "notes.txt").write_text("not a frame")
    x, y, w, h = EXACT_BOX
    crops.joinpath("vid_A").mkdir(parents=True)
    # An exact sub-image of frame 5 (lossless), and a crop of frame 6 saved again as JPEG.
    Image.fromarray(shown[5][y : y + h, x : x + w]).save(crops / "vid_A" / "cropped_frame_0005.png")
    Image.fromarray(shown[6][y : y + h, x : x + w]).save(crops / "vid_A" / "cropped_frame_0006.jpg", quality=60)
    # A crop of the action frame 4: not an item, so its crop is not used.
    Image.fromarray(shown[4][y : y + h, x : x + w]).save(crops / "vid_A" / "cropped_frame_0004.png")
    # -vid_B (apple): frame 3 is second 2, an end state, which apple has two names for.
    for n in (1, 2, 3):
        write_frame(full / "-vid_B" / f"frame_{n:04d}.jpg", 10 + n)
    for n in (1, 2):
        write_frame(full / "vid_C" / f"frame_{n:04d}.jpg", 20 + n)
    # A frame folder whose video has no label file.
    write_frame(full / "vid_Z" / "frame_0001.jpg", 99)
    (root / "utils").mkdir()
    (root / "utils" / "classification_states.py").write_text(STATES, encoding="utf-8")
    for (category, video), labels in LABELS.items():
        write_labels(root / "annotations" / category / f"{video}.fps1.csv", labels)
    (base / "README.md").write_text("the authors' readme")
    return root


def write_labels(path: Path, labels: list[int]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{second},{label}\n" for second, label in enumerate(labels)), encoding="utf-8")
    return path
