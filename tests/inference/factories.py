"""Plain helpers that make items with real media files, releases and endpoints for inference tests."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from django.conf import settings
from PIL import Image

from annotation.interchange.frozen import line_media
from annotation.models import Item, ItemStatus, MediaAsset, Release, ReleaseItem
from annotation.protocols import MEDIA_FIELDS
from inference import media as media_lib


def image_file(path: Path, color: tuple[int, int, int], size: tuple[int, int] = (40, 30)) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.new("RGB", size, color)
    img.putpixel((0, 0), (color[0] ^ 255, 0, 0))
    img.save(path, format="PNG")
    return path


def asset(path: Path, kind: str) -> MediaAsset:
    """Store a file as a MediaAsset under MEDIA_ROOT/assets/ (what the importer does)."""
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    found = MediaAsset.objects.filter(sha256=sha).first()
    if found:
        return found
    rel = f"assets/{sha[:2]}/{sha}{path.suffix}"
    dest = Path(settings.MEDIA_ROOT) / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, dest)
    meta = {}
    if kind == "video":  # what the importer records (frame count from the container)
        try:
            info = media_lib.probe_video(dest)
            meta = {
                "width": info.width,
                "height": info.height,
                "frame_count": info.frame_count,
                "duration": info.duration,
            }
        except media_lib.MediaError:
            pass
    return MediaAsset.objects.create(sha256=sha, kind=kind, file=rel, size_bytes=dest.stat().st_size, **meta)


def colour(i: int) -> tuple[int, int, int]:
    return ((i * 37) % 256, (i * 91) % 256, (i * 53) % 256)


def status_items(project, n: int, tmp: Path, *, status: str = ItemStatus.VERIFIED, start: int = 0) -> list[Item]:
    items = []
    for i in range(start, start + n):
        a = asset(image_file(tmp / f"s{i}a.png", colour(2 * i)), "image")
        b = asset(image_file(tmp / f"s{i}b.png", colour(2 * i + 1)), "image")
        payload = {
            "image_a": f"s{i}a.png",
            "image_b": f"s{i}b.png",
            "state_a": f"a closed box number {i}",
            "state_b": f"an open box number {i}",
            "change": f"open box {i}",
            "change_distractors": [f"paint box {i}", f"drop box {i}", f"fold box {i}"],
            "category": "functional",
            "difference": "significant",
        }
        items.append(
            Item.objects.create(
                project=project,
                external_id=f"s{i:04d}",
                payload=payload,
                media={"image_a": a.sha256, "image_b": b.sha256},
                status=status,
            )
        )
    return items


def visualtrans_items(project, n: int, tmp: Path) -> list[Item]:
    items = []
    for i in range(n):
        a = asset(image_file(tmp / f"v{i}a.png", colour(3 * i)), "image")
        b = asset(image_file(tmp / f"v{i}b.png", colour(3 * i + 1)), "image")
        payload = {
            "images": [f"v{i}a.png", f"v{i}b.png"],
            "question": f"What happened to object {i}?",
            "format": "choice",
            "options": [f"it melted ({i})", f"it broke ({i})", f"it grew ({i})", f"nothing ({i})"],
            "answer": "B",
            "subtask": "causal",
            "scene": "kitchen",
        }
        items.append(
            Item.objects.create(
                project=project,
                external_id=f"v{i:04d}",
                payload=payload,
                media={"images": [a.sha256, b.sha256]},
                status=ItemStatus.VERIFIED,
            )
        )
    return items


def video_asset(tmp: Path, name: str = "clip.mp4", seconds: float = 1, size: str = "64x48") -> MediaAsset:
    return asset(media_lib.make_test_video(tmp / name, seconds=seconds, size=size, rate=10), "video")


def oscbench_items(project, n: int, tmp: Path) -> list[Item]:
    video = video_asset(tmp)
    items = []
    for i in range(n):
        payload = {
            "video": "clip.mp4",
            "prompt": f"A hand slices loaf number {i} on a wooden board",
            "generator": f"gen{i % 3}",
            "scenario": "regular",
            "action": "slice",
            "action_category": "cutting",
            "object": "bread",
            "object_category": "food",
        }
        items.append(
            Item.objects.create(
                project=project,
                external_id=f"o{i:04d}",
                payload=payload,
                media={"video": video.sha256},
                status=ItemStatus.VERIFIED,
            )
        )
    return items


def release_of(project, items, version: str = "v1", option_seed: int = 7) -> Release:
    release = Release.objects.create(
        project=project, version=version, item_count=len(items), checksum="0" * 64, option_seed=option_seed
    )
    # Each line's media as the freeze records them (annotation/releases.py): path -> sha256.
    fields = MEDIA_FIELDS[project.protocol]
    ReleaseItem.objects.bulk_create(
        [
            ReleaseItem(
                release=release,
                item=item,
                position=i,
                payload=item.payload,
                media=dict(line_media(item.payload, item.media, fields)),
            )
            for i, item in enumerate(items)
        ]
    )
    return release


def m3verse_items(project, n: int, tmp: Path) -> list[Item]:
    before = video_asset(tmp, "before.mp4", seconds=2)
    after = asset(media_lib.make_test_video(tmp / "after.mp4", seconds=3, size="64x48", rate=10), "video")
    items = []
    for i in range(n):
        payload = {
            "video_before": "before.mp4",
            "video_after": "after.mp4",
            "question": f"Which object moved ({i})?",
            "options": ["the cup", "the chair", "the lamp", "none of the listed objects"],
            "answer": ["B"] if i % 2 == 0 else ["A", "C"],
            "multiple": i % 2 == 1,
            "context": "intra",
            "capabilities": ["spatial"],
            "hallucination": False,
        }
        items.append(
            Item.objects.create(
                project=project,
                external_id=f"m{i:04d}",
                payload=payload,
                media={"video_before": before.sha256, "video_after": after.sha256},
                status=ItemStatus.VERIFIED,
            )
        )
    return items
