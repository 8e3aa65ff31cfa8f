"""How inference asks a protocol's prompts (the ``prompts`` module of a protocol package, reached
through the registry; what they are made of: protocols/kit/prompting.py), and the media preparer
the jobs hand them. Plain Python, no Django.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from protocols import registry

from . import media as media_lib


def get_protocol(name: str) -> ModuleType:
    """The prompt module of a registered protocol (``Protocol.prompts``: PROMPT_VERSION, build)."""
    return registry.get(name).prompts


def json_queries(name: str, *, suggest: bool = False) -> tuple[str, ...]:
    """The query keys this protocol asks under a JSON schema (PreparedQuery.query.json_schema), as
    its prompt module lists them (``JSON_QUERIES``; ``SUGGEST_JSON_QUERIES`` in suggest mode): a
    judge's scores, a drafted annotation.

    Their replies are a tool's output, not the answer being evaluated: one that does not read is
    repaired (services/chunks.py), and one that stays unreadable is an *unreadable reply*,
    missing from the scores, listed apart from failed requests and asked again by "retry failed"
    (the protocol's spec page: repaired or asked again, else missing). An option reply (a letter,
    a number) that names no option is the evaluated model's own answer: a parse failure, never
    re-asked."""
    module = get_protocol(name)
    return tuple(getattr(module, "SUGGEST_JSON_QUERIES" if suggest else "JSON_QUERIES", ()))


def suggestion_keys(name: str) -> tuple[str, ...]:
    """The queries of an item in suggest mode (``suggestion_queries`` of the prompts; one "qa"
    question by default)."""
    unlabeled = getattr(get_protocol(name), "suggestion_queries", None)
    return tuple(unlabeled({})) if unlabeled is not None else ("qa",)


def strategy(name: str, strategy_name: str) -> ModuleType:
    """The module of one of a protocol's strategies other than the direct one (``run``,
    ``PROMPT_VERSION``); ValueError when the protocol has no such strategy."""
    return registry.get(name).strategy(strategy_name)


def prompt_version(name: str, strategy_name: str | None = None) -> str:
    version = get_protocol(name).PROMPT_VERSION
    if strategy_name and strategy_name != "direct":
        version += "+" + strategy(name, strategy_name).PROMPT_VERSION
    return version


class MediaPreparer:
    """Turns local media into data URLs for chat messages, with the job's bound and frame cache.
    `fetch` gives the local path of an item's media reference (inference.services.inputs.media_file
    copies a file from object storage into this host's cache); by default references are paths."""

    def __init__(
        self,
        *,
        cache_root: str | os.PathLike,
        bound: tuple[int, int] = media_lib.DEFAULT_BOUND,
        fetch: Callable[[str], str] | None = None,
        frames_mode: str = "exact",
        shared=None,
        share_cached: bool = False,
    ):
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
            self._images[key] = media_lib.image_data_url(
                media_lib.load_image(self.fetch(path), bound=self.bound, bbox=bbox)
            )
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
        folder = (
            media_lib.frame_cache_folder(self.cache_root, content_hash, n, self.bound, self.frames_mode)
            if shared
            else None
        )
        cached = local or (shared is not None and shared.pull(folder, n))
        self.videos_decoded += not cached
        frames = media_lib.sample_frames(
            path if cached else self.fetch(path),
            n,
            cache_root=self.cache_root,
            bound=self.bound,
            content_hash=content_hash,
            known=known,
            mode=self.frames_mode,
        )
        if shared is not None and (not cached or (local and self.share_cached)):
            shared.push(folder)
        return [media_lib.file_data_url(p) for p in frames.paths], frames.indices
