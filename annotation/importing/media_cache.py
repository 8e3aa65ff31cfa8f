"""What an import learnt about a media file, kept for the next import in this process.

An import inspects each distinct media path once (items.py); without this, every import run
would look each file up again (a hash of the file and a MediaAsset query, or a full decode), a
cost a 1,000-line file sharing a few images notices. The info is keyed by the file's identity
as the operating system reports it — real path, device, inode, size, modification and change
times in nanoseconds — and by the kind and extension it is used as, so a file replaced or
rewritten in place is a new key and inspected again. Only files of a folder source (the server's
import folder, or the folder a command names) are kept: a zip's members are extracted to
temporary files whose names and inodes come back for other content.

The process keeps at most MEDIA_CACHE_SIZE entries (least recently used go first). What is
cached is what the file's bytes say (hash, size, kind, pixel size, duration); refusals are
never cached, and the import still checks every path against the media root first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from annotation.media.assets import MediaInfo

MEDIA_CACHE_SIZE = 4096

_cache: OrderedDict[tuple, MediaInfo] = OrderedDict()
_lock = threading.Lock()


def _key(path: Path, kind: str, name: str) -> tuple | None:
    try:
        real = path.resolve()
        st = real.stat()
    except OSError:
        return None
    identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return (str(real), *identity, kind, Path(name).suffix.lower())


def media_info_cached(path: Path, kind: str, name: str, *, stable: bool, compute: Callable[[], MediaInfo]) -> MediaInfo:
    """The info of the file at `path` used as `kind` under `name`: from the cache when this
    process has seen the same file before, else `compute()` (which may raise MediaRefused, never
    cached). `stable`: the file lives where it stays (a folder source), so it may be cached."""
    key = _key(path, kind, name) if stable else None
    if key is not None:
        with _lock:
            info = _cache.get(key)
            if info is not None:
                _cache.move_to_end(key)
                return info
    info = compute()
    if key is not None and info.kind == kind:
        with _lock:
            _cache[key] = info
            while len(_cache) > MEDIA_CACHE_SIZE:
                _cache.popitem(last=False)
    return info


def media_cache_clear() -> None:
    with _lock:
        _cache.clear()
