"""A box release (a protocol annotated in the box workflow) as COCO object-detection JSON, read by pycocotools and the
tools built on it.

- one COCO image per release item, in release order (`id` = position + 1), `file_name` the
  item's image path, `width` / `height` the stored (upright) size;
- categories: the state labels of the release (the verified `state` of each box), each with its
  object as `supercategory`, ids 1.. in (object, state) order so a re-export numbers them alike;
- one annotation per boxed item: `bbox` `[x, y, w, h]` in pixels as stored, `area` w·h,
  `iscrowd` 0, the box as a four-corner polygon in `segmentation` (tools that draw masks need one);
- an item answered "nothing to label" or "cannot determine" has no annotation: the answer is an
  image-level attribute, `attributes.outcome`, beside the item's id, object and state.

The JSON is streamed in two passes over the release (images, then annotations), so a large
release never sits in memory; only the category table does.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from typing import Any

from protocols import registry

from ..models import MediaAsset, Release
from .frozen import StoredMedia, frozen_project, frozen_rows
from .stream_zip import StreamSink, zip_entry

OUTCOMES = ("nothing_to_label", "cannot_determine")
CHUNK = 2000


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _rows(release: Release) -> Iterator[list[tuple[int, dict, dict]]]:
    """(position, export line, frozen {relative path: sha256}) in release order, in chunks."""
    chunk: list[tuple[int, dict, dict]] = []
    for row in frozen_rows(release):
        chunk.append(row)
        if len(chunk) >= CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _image_sha(line: dict, media: dict) -> str | None:
    image = line.get("image")
    return media.get(image) if isinstance(image, str) else None


def _sizes(chunk: list[tuple[int, dict, dict]]) -> dict[str, tuple[int | None, int | None]]:
    shas = {_image_sha(line, media) for _, line, media in chunk} - {None}
    return {
        sha: (w, h) for sha, w, h in MediaAsset.objects.filter(sha256__in=shas).values_list("sha256", "width", "height")
    }


def category_key(line: dict) -> tuple[str, str]:
    return (str(line.get("object") or ""), str(line.get("state") or ""))


def _image(position: int, line: dict, size: tuple[int | None, int | None]) -> dict:
    bbox = line.get("bbox")
    attributes = {
        "id": line.get("id"),
        "object": line.get("object"),
        "state": line.get("state"),
        "split": line.get("split"),
    }
    if isinstance(bbox, str):
        attributes["outcome"] = bbox
    return {
        "id": position + 1,
        "file_name": line.get("image"),
        "width": size[0],
        "height": size[1],
        "attributes": attributes,
    }


def _annotation(position: int, line: dict, category_id: int) -> dict:
    x, y, w, h = (float(v) for v in line["bbox"])
    return {
        "id": position + 1,
        "image_id": position + 1,
        "category_id": category_id,
        "bbox": [x, y, w, h],
        "area": w * h,
        "iscrowd": 0,
        "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]],
    }


def has_box(line: dict) -> bool:
    bbox = line.get("bbox")
    return isinstance(bbox, list) and len(bbox) == 4


def coco_parts(release: Release) -> Iterator[bytes]:
    """The COCO document as byte pieces (images, annotations, categories, info)."""
    if registry.get(release.project.protocol).workflow != "box":
        raise ValueError("COCO export is for box projects")
    categories: dict[tuple[str, str], int] = {}
    yield b'{"images":['
    first = True
    for chunk in _rows(release):
        sizes = _sizes(chunk)
        for position, line, media in chunk:
            size = sizes.get(_image_sha(line, media), (None, None))
            yield (b"\n" if first else b",\n") + _dumps(_image(position, line, size))
            first = False
            if has_box(line):
                categories.setdefault(category_key(line), 0)
    ids = {key: n for n, key in enumerate(sorted(categories), start=1)}
    yield b'\n],"annotations":['
    first = True
    for chunk in _rows(release):
        for position, line, _ in chunk:
            if has_box(line):
                yield (b"\n" if first else b",\n") + _dumps(_annotation(position, line, ids[category_key(line)]))
                first = False
    cats = [{"id": n, "name": state, "supercategory": obj} for (obj, state), n in ids.items()]
    project = frozen_project(release)
    info = {
        "description": f"{project['name'] or project['slug']} {release.version}",
        "version": release.version,
        "date_created": release.created_at.isoformat(),
        "contributor": "StateLab",
        "statelab": {
            "project": project["slug"],
            "protocol": release.project.protocol,
            "split": release.split,
            "item_count": release.item_count,
            "checksum": release.checksum,
        },
        "image_outcomes": list(OUTCOMES),
    }
    yield b'\n],"categories":' + _dumps(cats) + b',"info":' + _dumps(info) + b',"licenses":[]}\n'


def coco_zip_parts(release: Release, *, flush_bytes: int = 256 * 1024) -> Iterator[bytes]:
    """A zip with `annotations.json` (the COCO document) and each image at its `file_name`, so
    the zip's folder is the COCO image root."""
    sink = StreamSink()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        with zf.open(zip_entry("annotations.json"), "w", force_zip64=True) as out:
            for part in coco_parts(release):
                out.write(part)
                if sink.pending() >= flush_bytes:
                    yield sink.drain()
        yield sink.drain()
        wanted: dict[str, str] = {}  # image path -> sha256 (the first item naming a path wins)
        for chunk in _rows(release):
            for _, line, media in chunk:
                sha = _image_sha(line, media)
                if sha:
                    wanted.setdefault(line["image"], sha)
        files = StoredMedia()
        files.load(wanted.values())
        for path in sorted(wanted):
            with files.open(wanted[path]) as src, zf.open(zip_entry(path, stored=True), "w", force_zip64=True) as dst:
                while data := src.read(flush_bytes):
                    dst.write(data)
                    yield sink.drain()
    yield sink.drain()
