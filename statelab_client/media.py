"""The media an items file names, sent with it: `statelab import PROJECT items.jsonl` with the
images beside the file uploads one zip of the file (as items.jsonl) and the files its lines name,
so the server finds them inside the upload (annotation/importing/sources.py reads such a zip).

Only paths that are relative, inside the items file's folder and reached without a symbolic
link are taken; nothing else in the folder is sent."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

MAX_PATH_CHARS = 1000


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for inner in value.values():
            yield from _strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _strings(inner)


def _inside(folder: Path, text: str) -> str | None:
    """`text` as a relative POSIX path of a regular file under `folder`, reached without a
    symbolic link; None for anything else (a URL, an absolute path, "..", a missing file)."""
    if not text or len(text) > MAX_PATH_CHARS or "://" in text or "\\" in text or "\x00" in text:
        return None
    relative = PurePosixPath(text)
    if relative.is_absolute() or ".." in relative.parts or relative.parts in ((), (".",)):
        return None
    current = folder
    for part in relative.parts:
        if part == ".":
            continue
        current = current / part
        if current.is_symlink():
            return None
    if not current.is_file():
        return None
    return current.relative_to(folder).as_posix()


def media_named(items_file: Path) -> list[str]:
    """The files beside `items_file` that its JSON lines name (sorted, each once); a line that is
    not JSON names nothing (the server reports it)."""
    folder = items_file.parent
    found: set[str] = set()
    with items_file.open("r", encoding="utf-8", errors="replace") as lines:
        for line in lines:
            try:
                item = json.loads(line)
            except ValueError:
                continue
            for text in _strings(item):
                relative = _inside(folder, text)
                if relative is not None and relative != items_file.name:
                    found.add(relative)
    return sorted(found)


def zip_with_media(
    items_file: Path, media: list[str], target: Path, *, on_file: Callable[[int, int], None] | None = None
) -> Path:
    """A zip of `items_file` (as items.jsonl) and the `media` paths (relative to its folder);
    `on_file(done, total)` after each file."""
    folder, total = items_file.parent, len(media) + 1
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.write(items_file, "items.jsonl")
        if on_file is not None:
            on_file(1, total)
        for done, relative in enumerate(media, start=2):
            zf.write(folder / relative, relative)
            if on_file is not None:
                on_file(done, total)
    return target
