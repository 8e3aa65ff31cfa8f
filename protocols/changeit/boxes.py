"""Box units of an imported ChangeIt item (docs/protocols/changeit.md, "Box units"). Plain Python.

A line's ``bbox`` is ``[x, y, width, height]`` in image pixels unless the line says
``"box_units": "normalised"``: fractions 0–1 of the image's width and height, turned into pixels
here with the image's size (known once the importer has opened the image). A box given in pixels
whose every number lies within 0–1 is almost surely a normalised box written without its units:
it would be a box of at most one pixel at the image's corner. It is refused, naming the box and
the hint, unless the image itself is tiny (no side longer than ``TINY_SIDE`` pixels), where such a
box can be meant.
"""

from __future__ import annotations

import math
from collections.abc import MutableMapping
from typing import Any

from protocols.fields import Invalid

PIXELS = "pixels"
NORMALISED = "normalised"
BOX_UNITS = (PIXELS, NORMALISED)
# Spellings a line may use for the units; the American one reads as the British.
_SPELLINGS = {PIXELS: PIXELS, NORMALISED: NORMALISED, "normalized": NORMALISED}
# On an image no larger than this on either side a pixel box within [0, 1] may be meant as such.
TINY_SIDE = 4
_EPS = 1e-9


def box_units(value: Any) -> str:
    """The item field check of ``box_units`` (protocols/changeit/fields.py)."""
    units = _SPELLINGS.get(value) if isinstance(value, str) else None
    if units is None:
        raise Invalid(f"must be {PIXELS} (the default) or {NORMALISED} (fractions 0–1 of the image's width and height)")
    return units


def _shown(box: list[Any]) -> str:
    return "[" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in box) + "]"


def box_in_pixels(box: list[Any], width: int, height: int, units: str = PIXELS) -> list[float | int]:
    """``box`` (``[x, y, w, h]`` in ``units``) in pixels of a ``width`` × ``height`` image; raises
    ``Invalid`` with the reason it is refused.

    A normalised box must lie within the unit square; its pixels are rounded to two decimals (as
    the box form stores them) and kept inside the image. A pixel box is returned as given (whether
    it lies inside the image is the importer's check, protocols/fields.py check_box_inside).
    """
    units = box_units(units)
    x, y, w, h = box
    if units == NORMALISED:
        if not all(0 <= v <= 1 for v in box) or x + w > 1 + _EPS or y + h > 1 + _EPS:
            raise Invalid(
                f"box {_shown(box)} is given as normalised (box_units {NORMALISED}) but is not a box of "
                "fractions 0–1 of the image: x + width and y + height must not pass 1"
            )
        px, py = round(x * width, 2), round(y * height, 2)
        pw, ph = min(round(w * width, 2), width - px), min(round(h * height, 2), height - py)
        out = [_whole(px), _whole(py), _whole(pw), _whole(ph)]
        if out[2] <= 0 or out[3] <= 0:
            raise Invalid(f"box {_shown(box)} (normalised) is under 0.01 pixel on the {width}×{height} image")
        return out
    if max(width, height) > TINY_SIDE and all(0 <= v <= 1 for v in box):
        raise Invalid(
            f"box {_shown(box)} lies within 0–1 on a {width}×{height} image: as pixels it would be at most "
            f'one pixel at the corner. If it holds fractions of the width and height, add "box_units": '
            f'"{NORMALISED}" to the line; otherwise give the box in pixels'
        )
    return list(box)


def _whole(v: float) -> float | int:
    """A coordinate as a whole number where it is one, so a box stores as [10, 20, 30, 40]."""
    return int(v) if math.isclose(v, round(v), abs_tol=1e-9) else v


def payload_box_in_pixels(payload: MutableMapping[str, Any], width: int | None, height: int | None) -> str | None:
    """An imported item's box in pixels, in place: ``bbox`` converted by the payload's ``box_units``,
    which is then dropped (a stored box is always in pixels). Returns the reason the box is refused,
    or None. An image of unknown size leaves a pixel box as it is and refuses a normalised one."""
    units = payload.pop("box_units", PIXELS)
    box = payload.get("bbox")
    if not isinstance(box, list):  # raw item, or an outcome ("nothing_to_label") in the box's place
        return None
    if width is None or height is None:
        return f"box units {units}: the image's size is unknown" if units == NORMALISED else None
    if units == PIXELS and (width > TINY_SIDE or height > TINY_SIDE) and not _within_unit(box):
        # What box_in_pixels returns for a pixel box that is not refused, without its checks of
        # the units and the generator over the box: the importer's every line takes this path.
        payload["bbox"] = list(box)
        return None
    try:
        payload["bbox"] = box_in_pixels(box, width, height, units)
    except Invalid as exc:
        return exc.reason
    return None


def _within_unit(box: list[Any]) -> bool:
    """Every number of the box lies within 0–1 (`box_in_pixels`'s test for a normalised box given
    as pixels)."""
    for v in box:
        if not 0 <= v <= 1:
            return False
    return True
