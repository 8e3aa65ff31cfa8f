"""What every protocol module shares. Plain Python, no Django.

A protocol module exposes `PROMPT_VERSION` and `build(item, *, media, params) -> list[PreparedQuery]`.
It turns one item (payload + local media paths + resolved option orders) into the chat queries a
backend answers; a query whose media cannot be prepared comes back with `error` set and no
messages, so only that query (or item) fails.
"""
from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from annotation.protocols import LETTERS
from inference import media as media_lib
from inference.backends.base import ModelQuery


@dataclass
class ItemInput:
    item_pk: int
    external_id: str
    payload: dict[str, Any]
    # media field -> absolute local path, or a stored file's name that MediaPreparer's `fetch`
    # turns into one (object storage), or a list of these for list fields; None when missing.
    media_paths: dict[str, Any]
    # media field -> content sha256 (or list), used as frame-cache keys.
    media_hashes: dict[str, Any]
    # annotation.protocols.resolve_queries(...) for this item: key -> {"options", "answer", ...}
    resolved: dict[str, dict[str, Any]]
    # video field -> metadata known from import (saves a probe before sampling frames)
    media_info: dict[str, media_lib.VideoInfo] = field(default_factory=dict)
    # the project's settings (defaults an item's own fields may leave to the project, e.g. M3-Verse's multiple)
    project_settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class PreparedQuery:
    key: str  # the protocol's query key, e.g. "osi_a"
    query: ModelQuery | None
    options: list[Any]
    prompt: str = ""  # the rendered prompt as stored with the prediction
    frame_indices: dict[str, list[int]] | None = None
    fmt: str | None = None  # visualtrans format, for parse_answer
    error: str | None = None  # preparation failed: the prediction is stored as failed with this


class MediaPreparer:
    """Turns local media into data URLs for chat messages, with the job's bound and frame cache.
    `fetch` gives the local path of an item's media reference (inference.services.inputs.media_file
    copies a file from object storage into this host's cache); by default references are paths."""

    def __init__(self, *, cache_root: str | os.PathLike, bound: tuple[int, int] = media_lib.DEFAULT_BOUND,
                 fetch: Callable[[str], str] | None = None, frames_mode: str = "exact", shared=None,
                 share_cached: bool = False):
        self.cache_root = Path(cache_root)
        self.bound = bound
        self.fetch = fetch or (lambda ref: ref)
        # Where frame-cache entries are shared between hosts (services.frames.StoredFrameCache, with
        # object storage): `pull(folder, n) -> bool` fills a missing entry, `push(folder)` shares
        # one (once). Entries this preparer decodes are shared; with `share_cached` (the frame
        # preparation) so are the ones it finds in this host's cache, made before they were shared.
        self.shared = shared
        self.share_cached = share_cached
        self.frames_mode = frames_mode  # "exact", or "keyframe": the nearest keyframes (media.extract_frames)
        self.videos_decoded = 0  # frame-cache misses: videos this preparer had to decode itself
        self._images: dict[tuple, str] = {}

    def image(self, path: str | None, *, bbox=None) -> str:
        if not path:
            raise media_lib.MediaError("the item has no such image")
        key = (path, tuple(bbox) if bbox else None)
        if key not in self._images:
            self._images[key] = media_lib.image_data_url(media_lib.load_image(self.fetch(path), bound=self.bound, bbox=bbox))
        return self._images[key]

    def frames(
        self, path: str | None, n: int, *, content_hash: str | None = None, known: media_lib.VideoInfo | None = None
    ) -> tuple[list[str], list[int]]:
        if not path:
            raise media_lib.MediaError("the item has no such video")
        # Frames prepared ahead (services.frames) are read from the cache: no fetch, no decoding.
        # On another host than the preparation's, they come from the shared copy first.
        local = media_lib.frames_cached(self.cache_root, content_hash, n, self.bound, self.frames_mode)
        shared = self.shared if content_hash else None
        folder = media_lib.frame_cache_folder(self.cache_root, content_hash, n, self.bound, self.frames_mode) if shared else None
        cached = local or (shared is not None and shared.pull(folder, n))
        self.videos_decoded += not cached
        frames = media_lib.sample_frames(
            path if cached else self.fetch(path), n, cache_root=self.cache_root, bound=self.bound,
            content_hash=content_hash, known=known, mode=self.frames_mode,
        )
        if shared is not None and (not cached or (local and self.share_cached)):
            shared.push(folder)
        return [media_lib.file_data_url(p) for p in frames.paths], frames.indices


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def user(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": parts}]


def lettered(options: list[Any]) -> str:
    return "\n".join(f"{LETTERS[i]}. {opt}" for i, opt in enumerate(options))


def numbered(options: list[Any]) -> str:
    return "\n".join(f"{i + 1}. {opt}" for i, opt in enumerate(options))


def render_prompt(messages: list[dict[str, Any]]) -> str:
    """The exact prompt as text, images shown as numbered placeholders (stored per prediction)."""
    out: list[str] = []
    n_image = 0
    for message in messages:
        content = message["content"]
        parts = [text(content)] if isinstance(content, str) else content
        chunk: list[str] = []
        for part in parts:
            if part["type"] == "text":
                chunk.append(part["text"])
            else:
                n_image += 1
                chunk.append(f"<image {n_image}>")
        out.append(f"[{message['role']}]\n" + "\n".join(chunk))
    return "\n\n".join(out)


def letter_subsets(n: int, *, min_size: int = 1) -> list[str]:
    """Every set of option letters as "A,C" strings, for constrained multi-answer replies."""
    letters = LETTERS[:n]
    return [",".join(combo) for size in range(min_size, n + 1) for combo in itertools.combinations(letters, size)]


def query_for(key: str, item: ItemInput, messages, *, choices=None, json_schema=None, max_tokens=16) -> ModelQuery:
    return ModelQuery(
        key=f"{item.item_pk}|{key}", messages=messages, choices=choices, json_schema=json_schema, max_tokens=max_tokens
    )


def failed(key: str, options: list[Any], error: str) -> PreparedQuery:
    return PreparedQuery(key=key, query=None, options=options, error=error)


def frames_param(params: dict[str, Any], default: int, maximum: int = 200) -> int:
    n = int(params.get("frames") or default)
    if not 1 <= n <= maximum:
        raise ValueError(f"frames must be between 1 and {maximum}, got {n}")
    return n
