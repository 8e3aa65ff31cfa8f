"""Migration 0020 (annotation/migrations/0020_release_frozen_media_asset_owners.py) on data recorded
before it: each project owns the assets its items name, each release item records the media of
its paths, and an existing release keeps its checksum (method "lines") and exports its header as
before."""

from __future__ import annotations

import hashlib
import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from annotation.interchange.header import release_header
from annotation.models import ProjectAsset, Release, ReleaseItem
from annotation.releases import release_checksum

BEFORE = ("annotation", "0019_project_settings_help_lease")
LEGACY_METHOD = "sha256(canonical {protocol, split, option_seed} + canonical item lines, newline-terminated)"


def canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@pytest.mark.django_db(transaction=True)
def test_existing_releases_and_items_are_backfilled():
    executor = MigrationExecutor(connection)
    executor.migrate([BEFORE])
    old = executor.loader.project_state([BEFORE]).apps
    Project, Asset, Item = (old.get_model("annotation", m) for m in ("Project", "MediaAsset", "Item"))
    Release_, ReleaseItem_ = old.get_model("annotation", "Release"), old.get_model("annotation", "ReleaseItem")
    lab = Project.objects.create(
        slug="lab", name="Lab", protocol="visualtrans", description="d", settings={}, annotations_per_item=3
    )
    other = Project.objects.create(slug="other", name="Other", protocol="changeit", settings={}, annotations_per_item=3)
    a, b, c = (
        Asset.objects.create(sha256=hashlib.sha256(n.encode()).hexdigest(), kind="image", file=f"assets/{n}.png")
        for n in "abc"
    )
    item = Item.objects.create(
        project=lab,
        external_id="q1",
        status="verified",
        payload={"images": ["x.png", "y.png"], "question": "?"},
        media={"images": [a.sha256, b.sha256]},
    )
    Item.objects.create(project=other, external_id="c1", payload={"image": "z.png"}, media={"image": c.sha256})
    line = {"id": "q1", "images": ["x.png", "y.png"], "question": "?", "split": "test", "tags": [], "resolved": {}}
    digest = hashlib.sha256(canonical({"protocol": "visualtrans", "split": "test", "option_seed": 0}) + b"\n")
    digest.update(canonical(line) + b"\n")
    release = Release_.objects.create(project=lab, version="v1", checksum=digest.hexdigest(), item_count=1)
    ReleaseItem_.objects.create(release=release, item=item, position=0, payload=line)

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    owned = sorted(ProjectAsset.objects.values_list("project__slug", "asset__sha256"))
    assert owned == sorted([("lab", a.sha256), ("lab", b.sha256), ("other", c.sha256)])
    assert ReleaseItem.objects.get().media == {"x.png": a.sha256, "y.png": b.sha256}
    frozen = Release.objects.get()
    assert (frozen.checksum_method, frozen.frozen_project) == (
        "lines",
        {"slug": "lab", "name": "Lab", "description": "d", "settings": {}},
    )
    assert release_checksum(frozen) == frozen.checksum == digest.hexdigest()
    assert release_header(frozen)["checksum_method"] == LEGACY_METHOD
