"""Where a released crop sits in its frame, when it is an exact sub-image of it (docs/protocols/
changeit.md, "The authors' files"). Plain Python with numpy and Pillow.

Both images are decoded as shown (EXIF orientation applied, as the importer measures an image)
and compared as RGB, each pixel packed into one number. The search is exact and bounded:

1. every position where the crop's top-left pixel equals the frame's pixel (one vectorised
   comparison over the frame: H·W pixel comparisons);
2. those positions are narrowed with a grid of ``ANCHORS`` × ``ANCHORS`` pixels of the crop, each a
   vectorised comparison over the positions left (at most 16·H·W comparisons, in practice far
   fewer: one pass usually leaves a handful);
3. at most ``MAX_FULL`` positions left are compared in full (each h·w pixels); more than that
   means the crop is too uniform to place (it would match in many places) and it is not located.

A crop is located only where exactly one position matches every pixel. A crop saved again as
JPEG after cutting no longer matches its frame exactly and is reported as not located; nothing
approximate is guessed. Frames larger than ``MAX_FRAME_PIXELS`` are not searched.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

ANCHORS = 4
MAX_FULL = 64
MAX_FRAME_PIXELS = 40_000_000


@dataclass(frozen=True)
class Located:
    """The crop's box in the frame's pixels, ``[x, y, width, height]``, or None with the reason."""

    box: list[int] | None
    reason: str = ""


def load_rgb(path: Path) -> np.ndarray:
    """An image as shown (EXIF orientation applied), RGB, as an H×W×3 uint8 array."""
    with Image.open(path) as im:
        shown = ImageOps.exif_transpose(im)
        return np.asarray(shown.convert("RGB"))


def _packed(image: np.ndarray) -> np.ndarray:
    """An H×W×3 uint8 image as H×W uint32 (one number per pixel), so a pixel compares in one step."""
    rgb = image.astype(np.uint32)
    return (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]


def locate(frame: np.ndarray, crop: np.ndarray) -> Located:
    """Where ``crop`` is an exact sub-image of ``frame`` (both H×W×3 uint8)."""
    fh, fw = frame.shape[:2]
    ch, cw = crop.shape[:2]
    if ch == 0 or cw == 0:
        return Located(None, "empty crop")
    if ch > fh or cw > fw:
        return Located(None, f"crop {cw}×{ch} larger than its {fw}×{fh} frame")
    if fh * fw > MAX_FRAME_PIXELS:
        return Located(None, f"frame {fw}×{fh} too large to search")
    f, c = _packed(frame), _packed(crop)
    # 1. positions whose top-left pixel matches, as offsets into the flattened frame
    ys, xs = np.nonzero(f[: fh - ch + 1, : fw - cw + 1] == c[0, 0])
    at = ys.astype(np.int64) * fw + xs
    flat = f.ravel()
    # 2. narrowed on a grid of anchor pixels spread over the crop
    for ay in np.linspace(0, ch - 1, ANCHORS, dtype=np.int64):
        for ax in np.linspace(0, cw - 1, ANCHORS, dtype=np.int64):
            if not len(at):
                return Located(None, "not an exact sub-image of its frame")
            at = at[flat[at + (ay * fw + ax)] == c[ay, ax]]
    if not len(at):
        return Located(None, "not an exact sub-image of its frame")
    if len(at) > MAX_FULL:
        return Located(None, f"too uniform to place ({len(at)} candidate places)")
    # 3. full comparison of what is left
    found = [divmod(int(o), fw) for o in at if np.array_equal(f[o // fw : o // fw + ch, o % fw : o % fw + cw], c)]
    if not found:
        return Located(None, "not an exact sub-image of its frame")
    if len(found) > 1:
        return Located(None, f"matches {len(found)} places in its frame")
    y, x = found[0]
    return Located([x, y, cw, ch])


def locate_files(frame_path: Path, crop_path: Path) -> Located:
    """``locate`` on two image files; an unreadable file is not located (with the reason)."""
    try:
        frame, crop = load_rgb(frame_path), load_rgb(crop_path)
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        return Located(None, f"unreadable image ({exc.__class__.__name__})")
    return locate(frame, crop)
