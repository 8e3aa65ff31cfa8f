"""The header every release export carries (JSON, JSONL, zip, dataset card): what the release
is and how to check it, from what the release froze (annotation/interchange/frozen.py)."""

from __future__ import annotations

from typing import Any

from ..models import Release
from .checksum import LINES_ONLY, METHOD_TEXT
from .frozen import frozen_project


def release_header(release: Release) -> dict[str, Any]:
    return {
        "protocol": release.project.protocol,
        "project": frozen_project(release)["slug"],
        "version": release.version,
        "split": release.split,
        "created_at": release.created_at.isoformat(),
        "item_count": release.item_count,
        "checksum": release.checksum,
        "checksum_method": METHOD_TEXT.get(release.checksum_method, METHOD_TEXT[LINES_ONLY]),
        "option_seed": release.option_seed,
    }
