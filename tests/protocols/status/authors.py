"""The authors' shapes for the STATUS tests: rows of STATUS_Bench.json as mmaiLab/STATUS_Bench
publishes them, and what the authors' own code does with a release folder, written here from
reading their README and extract_frames.py (not copied from them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from PIL import Image

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "authors" / "STATUS_Bench.json"
KEY_ORDER = [
    "id",
    "caption_0",
    "caption_1",
    "dataset",
    "video_id",
    "frame_0",
    "frame_1",
    "diff_cap",
    "image_0",
    "image_1",
]


def author_row(i: int, *, answer: int = 1, captions: list[str] | None = None, **changes: Any) -> dict[str, Any]:
    """One row in the authors' key order; the captions alphabetical, as every row of theirs is."""
    row = {
        "id": i,
        "caption_0": f"a closed box {i}",
        "caption_1": f"an open box {i}",
        "dataset": "Ego4D",
        "video_id": f"0000000{i}-7a7c-41ce-8266-83a9f00cacec",
        "frame_0": 6000 + i,
        "frame_1": 6060 + i,
        "diff_cap": {
            "answer": answer,
            "captions": captions
            or ["lift the lid halfway", "open the box fully", "shake the box", "tape the box shut"],
        },
        "image_0": f"ex_{i:04d}_0",
        "image_1": f"ex_{i:04d}_1",
    }
    row.update(changes)
    return row


def write_release(folder: Path, rows: list[Any], *, images: bool = False) -> Path:
    """STATUS_Bench.json as the authors lay it out (four-space indent), with images/<name>.png
    beside it when ``images`` (what their extract_frames.py --bench leaves there)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "STATUS_Bench.json"
    path.write_text(json.dumps(rows, indent=4), encoding="utf-8")
    if images:
        (folder / "images").mkdir(exist_ok=True)
        for n, row in enumerate(rows):
            for k in (0, 1):
                Image.new("RGB", (8, 6), (40 * k, 10 * (n % 20), 90)).save(
                    folder / "images" / f"{row[f'image_{k}']}.png"
                )
    return path


def authors_read(bench_dir: Path) -> list[dict[str, Any]]:
    """A release folder read the way the authors' code reads theirs.

    Their extractor loads ``STATUS_Bench.json`` with the json module as a list of samples, and for
    each sample opens ``<video_id>.mp4``, seeks to ``frame_0`` / ``frame_1`` and saves the frames
    as ``images/<image_0>.png`` / ``images/<image_1>.png`` next to the file; the README describes
    a sample as two captions and ``diff_cap``, the candidate changes with the index of the right
    one. So a sample is usable when those keys are there with those types and both images are PNG
    files at those names. Returns per sample the two captions, the right change, the candidates and
    the two image files; raises AssertionError where their code would fail.
    """
    samples = json.loads((bench_dir / "STATUS_Bench.json").read_text(encoding="utf-8"))
    assert isinstance(samples, list)
    out = []
    for sample in samples:
        video = sample["video_id"]
        if video is not None:  # a release row: what the extractor would seek
            assert (
                isinstance(video + ".mp4", str)
                and isinstance(sample["frame_0"], int)
                and isinstance(sample["frame_1"], int)
            )
        images = []
        for k in (0, 1):
            image = bench_dir / "images" / (sample[f"image_{k}"] + ".png")
            with Image.open(image) as img:
                assert img.format == "PNG", image
            images.append(image)
        diff = sample["diff_cap"]
        captions = diff["captions"]
        out.append(
            {
                "id": sample["id"],
                "states": (sample["caption_0"], sample["caption_1"]),
                "change": captions[diff["answer"]],
                "captions": captions,
                "images": images,
            }
        )
    return out
