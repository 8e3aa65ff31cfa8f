"""Bounding a host's caches: the media copied from object storage (CACHE_ROOT/storage, config.storage:
local_copy) and the sampled frames (CACHE_ROOT/frames, inference.media: sample_frames). Both are
caches of what the storage and the videos hold, so any entry may go; a later read copies or
decodes it again. Nothing else under CACHE_ROOT is touched (staged uploads, import spools).

An entry's last use is its modification time: a cache hit refreshes it (local_copy touches the
copy, sample_frames its frames.json), so the oldest are the least recently used. An entry used
within `keep_recent` is never removed: a worker may be reading it.

Removal cannot be seen half-done: a frame folder is first renamed away (its frames.json is then
missing, which readers take for a miss), a media copy is unlinked (a reader that opened it keeps
its bytes).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Entry:
    path: Path  # a media copy (a file) or a frame folder
    used: float  # its last use (mtime)
    size: int


def cache_entries(cache_root: str | os.PathLike) -> list[Entry]:
    """Every entry of the two caches, least recently used first."""
    root = Path(cache_root)
    entries = []
    for path in (root / "storage").rglob("*"):
        if path.is_file() and not path.name.startswith(".tmp-"):
            stat = path.stat()
            entries.append(Entry(path, stat.st_mtime, stat.st_size))
    for meta in (root / "frames").glob("*/*/*/frames.json"):
        folder = meta.parent
        files = [p for p in folder.iterdir() if p.is_file()]
        entries.append(Entry(folder, meta.stat().st_mtime, sum(p.stat().st_size for p in files)))
    return sorted(entries, key=lambda e: e.used)


def _remove(entry: Entry) -> None:
    if entry.path.is_dir():
        gone = entry.path.with_name(f".gone-{uuid.uuid4().hex}")
        entry.path.rename(gone)
        shutil.rmtree(gone, ignore_errors=True)
    else:
        entry.path.unlink(missing_ok=True)


def cache_prune(
    cache_root: str | os.PathLike,
    *,
    unused_for: float | None = None,
    max_bytes: int | None = None,
    keep_recent: float = 3600.0,
    now: float | None = None,
) -> dict[str, int]:
    """Remove entries unused for over `unused_for` seconds, then the least recently used until the
    caches hold at most `max_bytes`, never one used within `keep_recent` seconds. Returns the
    counts and bytes removed and kept."""
    now = time.time() if now is None else now
    entries = cache_entries(cache_root)
    total = sum(e.size for e in entries)
    removed = freed = 0
    for entry in entries:
        if now - entry.used < keep_recent:
            break  # (sorted: every later entry is more recent still)
        stale = unused_for is not None and now - entry.used > unused_for
        over = max_bytes is not None and total - freed > max_bytes
        if not (stale or over):
            continue
        try:
            marker = entry.path / "frames.json" if entry.path.is_dir() else entry.path
            if now - marker.stat().st_mtime < keep_recent:
                continue  # used since it was listed
            _remove(entry)
        except FileNotFoundError:  # another pruner, or a worker's own replacement
            continue
        removed += 1
        freed += entry.size
    return {"removed": removed, "freed_bytes": freed, "kept": len(entries) - removed, "kept_bytes": total - freed}
