"""What every protocol's lmms-eval task builds on (annotation/interchange/lmms_eval.py writes the
task folder). Plain Python, no Django.

A protocol with an lmms-eval task names a module of its package in ``Protocol.lmms_module``
(protocols/base.py) whose ``Task`` subclasses ``LmmsTask`` below: the documents of one release
line (one per query it asks, each with StateLab's own prompt, its options in the release's frozen
order, its visuals as paths inside the task folder, the correct answer and the item fields the
breakdowns need), the metric keys its YAML lists, its generation length, media it derives after an
item's media are written (box crops) and files its scoring reads. Its scoring in the
folder is standalone code: ``utils_source()`` is the generic part (protocols/kit/lmms_utils.py)
with the protocol's part (``<package>/lmms_utils.py``) appended, as one ``utils.py``.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from PIL import Image, ImageOps, UnidentifiedImageError

CROPS = "statelab-crops"  # under media/: the box crops cut at export (a release path may not start with it)
GENERIC_UTILS = Path(__file__).with_name("lmms_utils.py")
_GENERIC_MODULE = "protocols.kit.lmms_utils"
_STANDALONE = sys.stdlib_module_names | {"PIL"}  # what an exported utils.py may import


class LmmsExportError(ValueError):
    """A release that cannot become an lmms-eval task (unsupported protocol, bad media path, …)."""


def media_path(path: Any) -> str:
    """Where a release's media file lies in the task folder (a path inside the release only)."""
    rel = PurePosixPath(str(path))
    if not str(path) or rel.is_absolute() or ".." in rel.parts:
        raise LmmsExportError(f"media path {path!r} is not a relative path inside the release")
    if rel.parts[0] == CROPS:
        raise LmmsExportError(f"media path {path!r}: {CROPS}/ holds the task's box crops")
    return "media/" + str(rel)


def media_paths(value: Any) -> list[str]:
    """The task folder's paths of a media field (one path or a list)."""
    return [media_path(v) for v in (value if isinstance(value, list) else [value]) if v]


def crop_path(item_id: str) -> str:
    """Where an item's box crop lies in the task folder (readable, and unique per item id)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", item_id)[:60]
    return f"media/{CROPS}/{safe}-{hashlib.sha256(item_id.encode('utf-8')).hexdigest()[:8]}.png"


def write_crop(source: Path, bbox: list, target: Path) -> bool:
    """Cut the box `[x, y, w, h]` (image pixels, clipped to the image) out of the upright image, as
    inference.media.load_image does, into a PNG; False (nothing written) when the box lies outside
    the image, where inference fails the query."""
    try:
        with Image.open(source) as img:
            img.load()
            image = ImageOps.exif_transpose(img).convert("RGB")
    except (OSError, UnidentifiedImageError) as exc:
        raise LmmsExportError(f"cannot read image {source.name} to crop its box: {exc}") from None
    x, y, w, h = (float(v) for v in bbox)
    left, top = max(0, int(round(x))), max(0, int(round(y)))
    right, bottom = min(image.width, int(round(x + w))), min(image.height, int(round(y + h)))
    if right <= left or bottom <= top:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    image.crop((left, top, right, bottom)).save(target, format="PNG")
    return True


class LmmsTask:
    """One protocol's part of one lmms-eval task folder; one object per export (it may gather
    release-wide data line by line)."""

    max_new_tokens = 16  # the YAML's generation length
    utils_module = "lmms_utils"  # the package's module appended to the generic utils.py

    def __init__(self, protocol: Any, settings: Mapping[str, Any] | None = None):
        self.protocol = protocol
        self.settings = dict(settings or {})

    @property
    def media_fields(self) -> tuple[str, ...]:
        """The line's fields whose media files the folder holds."""
        return tuple(self.protocol.media_fields)

    def documents(self, line: dict) -> list[dict]:
        """The documents of one release line: one per query, in query order."""
        raise NotImplementedError

    def metrics(self, metas: list[dict]) -> list[str]:
        """The metric keys this release has questions for (metas: the first document's `meta` of
        each item), in the leaderboard's order; `parse_failures` and `item` are added by the writer."""
        raise NotImplementedError

    def add_media(self, out: Path, line: dict, docs: list[dict]) -> tuple[list[dict], int]:
        """After the line's media are written under `out`: media derived from them (how many were
        written) and the documents that remain. Default: none, all."""
        return docs, 0

    def files(self) -> dict[str, str]:
        """Files (name -> text) the protocol's scoring reads in the folder, once every line is in."""
        return {}

    def document(
        self,
        line: dict,
        query: str,
        *,
        prompt: str,
        options: list,
        fmt: str,
        visuals: list[str],
        kind: str,
        target: Any,
        meta: dict,
    ) -> dict:
        return {
            "id": str(line["id"]),
            "query": query,
            "protocol": self.protocol.name,
            "split": line.get("split") or "test",
            "tags": [str(t) for t in line.get("tags") or []],
            "prompt": prompt,
            "options": [str(o) for o in options],
            "format": fmt,
            "visuals": visuals,
            "visual_kind": kind,
            "target": json.dumps(target, ensure_ascii=False),
            "meta": json.dumps(meta, ensure_ascii=False, sort_keys=True),
        }

    def utils_source(self) -> str:
        """The folder's utils.py: the generic part, then the protocol's (its imports of the generic
        module and of __future__ left out: the names are the file's own)."""
        package = type(self.protocol).__module__
        name = f"{package}.{self.utils_module}"
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            raise LmmsExportError(f"protocol {self.protocol.name!r}: no module {name}")
        return assemble_utils(Path(spec.origin), name)


def assemble_utils(part: Path, name: str) -> str:
    """protocols/kit/lmms_utils.py followed by `part`; a part that imports anything but the
    standard library, Pillow and the generic module would not stand alone and is refused."""
    text = part.read_text(encoding="utf-8")
    drop: set[int] = set()
    for node in ast.parse(text, filename=str(part)).body:
        if isinstance(node, ast.ImportFrom) and node.module in ("__future__", _GENERIC_MODULE):
            drop.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    kept = "".join(line for n, line in enumerate(text.splitlines(keepends=True), start=1) if n not in drop)
    for node in ast.walk(ast.parse(kept)):
        modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom):
            modules = [node.module or ""] if node.level == 0 else ["."]
        for module in modules:
            if module.split(".")[0] not in _STANDALONE:
                raise LmmsExportError(f"{name} imports {module}: the task's utils.py must stand alone")
    header = f"\n\n# --- the protocol's part: {name} {'-' * max(3, 80 - len(name))}\n\n"
    return GENERIC_UTILS.read_text(encoding="utf-8") + header + kept.lstrip("\n")
