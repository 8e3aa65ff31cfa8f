"""Plain helpers that create releases and annotations directly through the ORM."""

from __future__ import annotations

from annotation.models import Annotation, Item, ItemStatus, Release, ReleaseItem
from annotation.protocols import resolve_queries
from protocols.changeit import vocabulary as changeit_vocabulary


def make_release(project, payloads: dict[str, dict], *, version: str = "v1", seed: int = 11) -> Release:
    release = Release.objects.create(
        project=project, version=version, option_seed=seed, checksum="0" * 64, item_count=len(payloads)
    )
    vocab = changeit_vocabulary(payloads.values()) if project.protocol == "changeit" else None
    for pos, (ext, payload) in enumerate(payloads.items()):
        item = Item.objects.create(project=project, external_id=ext, payload=payload, status=ItemStatus.VERIFIED)
        resolved = resolve_queries(project.protocol, ext, payload, seed=seed, vocabulary=vocab)
        ReleaseItem.objects.create(
            release=release, item=item, position=pos, payload={"id": ext, **payload, "resolved": resolved}
        )
    return release


def rate(item_ext: str, project, rater: str, scores: dict) -> Annotation:
    item = Item.objects.get(project=project, external_id=item_ext)
    return Annotation.objects.create(item=item, external_rater=rater, result={"scores": scores}, source="import")
