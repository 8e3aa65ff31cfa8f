"""The header every release export carries (JSON, JSONL, zip, dataset card): what the release
is and how to check it."""

from __future__ import annotations

from typing import Any

from ..models import Release


def release_header(release: Release) -> dict[str, Any]:
    return {
        "protocol": release.project.protocol,
        "project": release.project.slug,
        "version": release.version,
        "split": release.split,
        "created_at": release.created_at.isoformat(),
        "item_count": release.item_count,
        "checksum": release.checksum,
        "checksum_method": (
            "sha256(canonical {protocol, split, option_seed} + canonical item lines, newline-terminated)"
        ),
        "option_seed": release.option_seed,
    }
