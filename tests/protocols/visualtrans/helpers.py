"""Files in the VisualTrans authors' shapes, written by the tests (docs/protocols/visualtrans.md,
"The authors' files"), and the step from converted lines to the project's importer."""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from PIL import Image

from tests.helpers.files import write_lines

CAUSAL_STEM = (
    "Identify which of the following operations is most likely to occur during the transformation "
    "process from the <image1> to the <image2>."
)
INTERM_STEM = (
    "Provide additional <image3>, <image4>, <image5>, and <image6>, which represents a possible "
    "intermediate state during a manipulation task. Which one is a reasonable intermediate state?"
)


def lego(n: int, *names: str) -> list[str]:
    return [f"legos/legos_{n}_{name}.jpg" for name in names]


def rows() -> list[dict[str, Any]]:
    """Nine rows as VisualTrans.json has them: every task type, both option layouts, the glued
    "block.D." option, 2 and 3 options, a mask, a set, a 'none' set, and one exact duplicate."""
    layer = (
        "From the camera's viewpoint, after the transformation, which layer did the object that was "
        "originally above the red block move to?\nA. Layer 1 (from the bottom)\nB. Layer 2 (from the bottom)\n"
        "C. Layer 3 (from the bottom)\nD. Layer 4 (from the bottom)"
    )
    return [
        {
            "task_type": "count",
            "images": lego(1, "start", "end"),
            "scene": "legos",
            "question": "How many blocks changed their layer?",
            "label": "3",
        },
        {
            "task_type": "spatial_fine_grained",
            "scene": "legos",
            "images": lego(2, "start", "end"),
            "question": layer,
            "label": "B",
        },
        {
            "task_type": "procedural_causal",
            "images": lego(3, "end", "start"),
            "scene": "legos",
            "question": CAUSAL_STEM + "\nA. Stack the green block over the white block. B. Place the white block on "
            "the green block. C. Insert the white block under the yellow block.D. Stack the blue block over "
            "the yellow block. ",
            "label": "C",
        },
        {
            "task_type": "procedural_plan",
            "scene": "table",
            "images": ["table/table_4_start.jpg", "table/table_4_end.jpg"],
            "question": "Which object was moved first in the transformation process?\nA. blue plate\nB. red tablecloth",
            "label": "a",
            "mask": "first",
        },
        {
            "task_type": "spatial_global",
            "scene": "books",
            "images": ["books/books_5_start.jpg", "books/books_5_end.jpg"],
            "question": "Where is the book that was at the right now?\n"
            "A. the far left\nB. the middle\nC. the far right",
            "label": "C",
        },
        {
            "task_type": "spatial_fine_grained",
            "scene": "legos",
            "images": lego(6, "end", "start"),
            "question": "List all objects above the object that was left of the blue block. Only select from "
            "the given object list: red block, white block, green block.",
            "label": "white block,  green block",
        },
        {
            "task_type": "procedural_interm",
            "scene": "legos",
            "images": lego(7, "start", "end", "a_medium", "b_medium", "c_medium", "d_medium"),
            "question": INTERM_STEM + "\nA. <image3>\nB. <image4>\nC. <image5>\nD. <image6>",
            "label": "D",
        },
        {
            "task_type": "spatial_fine_grained",
            "scene": "legos",
            "images": lego(2, "start", "end"),
            "question": layer,
            "label": "B",
        },
        {
            "task_type": "spatial_fine_grained",
            "scene": "legos",
            "images": lego(8, "start", "end"),
            "question": "List all objects below the blue block. "
            "Only select from the given object list: red block, blue block.",
            "label": "none",
        },
    ]


def write_release(folder: Path, release: list[Any] | None = None, *, images: bool = True, indent: int = 4) -> Path:
    """VisualTrans.json in `folder` and, unless told not to, an image for every path under
    folder/images (the authors' image folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    release = rows() if release is None else release
    path = folder / "VisualTrans.json"
    path.write_text(json.dumps(release, indent=indent, ensure_ascii=False), encoding="utf-8")
    if images:
        write_images(folder / "images", [p for row in release for p in row["images"]])
    return path


def write_images(folder: Path, paths: list[str]) -> None:
    """A small image per path, its colour drawn from the path: the same path, the same picture."""
    for rel in dict.fromkeys(paths):
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        code = zlib.crc32(rel.encode("utf-8"))
        Image.new("RGB", (8, 6), (code & 255, (code >> 8) & 255, (code >> 16) & 255)).save(target, "JPEG")


def without_extra(line: dict[str, Any]) -> dict[str, Any]:
    """The line the project's own item format takes: keeping the authors' other fields
    ("extra") is the generic importer's job, tested with it."""
    return {k: v for k, v in line.items() if k != "extra"}


def write_items(path: Path, lines: list[dict[str, Any]]) -> Path:
    return write_lines(path, [without_extra(line) for line in lines])
