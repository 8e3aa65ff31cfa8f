"""What a release froze, as every export reads it: its lines with the media each names, and the
project's fields an export shows. Nothing here reads a live item or the live project's text, so
editing either after the freeze changes no export (annotation/releases.py).

- `frozen_rows(release)`: (position, export line, media) in release order, where media maps each
  relative path the line names to the SHA-256 of the file recorded at the freeze
  (`ReleaseItem.media`);
- `frozen_project(release)`: slug, name, description and settings as at the freeze
  (`Release.frozen_project`; a release row written without them, as some test factories do,
  falls back to the project's current fields);
- `line_media(line, item_media, media_fields)`: the path -> SHA-256 pairs of one line, paired
  field by field with an item's media hashes (used once, at the freeze);
- `StoredMedia`: the stored files by SHA-256, looked up in batches.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from django.core.files.storage import default_storage

from ..models import MediaAsset, Release, ReleaseItem

CHUNK = 2000
PROJECT_FIELDS = ("slug", "name", "description", "settings")


def line_media(line: Mapping[str, Any], item_media: Mapping[str, Any] | None, media_fields: Iterable[str]):
    """(relative path, sha256) for every media file the line names, in field order."""
    media = item_media if isinstance(item_media, Mapping) else {}
    for name in media_fields:
        paths, shas = line.get(name), media.get(name)
        if isinstance(paths, list):
            pairs = zip(paths, shas if isinstance(shas, list) else [])
        else:
            pairs = [(paths, shas)]
        for path, sha in pairs:
            if isinstance(path, str) and path and isinstance(sha, str) and sha:
                yield path, sha


def frozen_rows(release: Release) -> Iterator[tuple[int, dict, dict]]:
    """(position, export line, {relative path: sha256}) in release order, fetched in chunks."""
    rows = (
        ReleaseItem.objects.filter(release=release)
        .order_by("position")
        .values_list("position", "payload", "media")
        .iterator(chunk_size=CHUNK)
    )
    for position, line, media in rows:
        yield position, line, media or {}


def frozen_media_map(release: Release) -> dict[str, str]:
    """Relative path -> sha256 of every media file the release ships (one file per path)."""
    wanted: dict[str, str] = {}
    for _, _, media in frozen_rows(release):
        for path, sha in media.items():
            wanted.setdefault(path, sha)
    return wanted


def frozen_project(release: Release) -> dict[str, Any]:
    """The project's slug, name, description and settings as the release froze them."""
    frozen = release.frozen_project if isinstance(release.frozen_project, dict) else {}
    if all(key in frozen for key in PROJECT_FIELDS):
        return frozen
    project = release.project
    return {key: frozen.get(key, getattr(project, key)) for key in PROJECT_FIELDS}


def project_snapshot(project) -> dict[str, Any]:
    """What `frozen_project` will return for a release frozen from `project` now."""
    return {key: getattr(project, key) for key in PROJECT_FIELDS}


class StoredMedia:
    """The stored files of media hashes, looked up in batches (`load`) and opened by hash."""

    def __init__(self) -> None:
        self.files: dict[str, str] = {}

    def load(self, shas: Iterable[str]) -> None:
        missing = set(shas) - set(self.files)
        if missing:
            self.files.update(MediaAsset.objects.filter(sha256__in=missing).values_list("sha256", "file"))

    def open(self, sha: str) -> BinaryIO:
        self.load([sha])
        name = self.files.get(sha)
        if name is None:
            raise FileNotFoundError(f"no stored media file with sha256 {sha}")
        return default_storage.open(name, "rb")

    def read(self, sha: str) -> bytes:
        with self.open(sha) as fh:
            return fh.read()

    def copy_to(self, sha: str, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        with self.open(sha) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, 1024 * 1024)
