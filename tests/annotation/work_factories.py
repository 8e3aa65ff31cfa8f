"""Plain helpers that build work-queue data: assets, items per protocol, valid results."""

from __future__ import annotations

import hashlib
import itertools

from annotation.models import Item, MediaAsset

_counter = itertools.count(1)


def make_asset(
    kind: str = "image", *, width: int | None = 640, height: int | None = 480, name: str | None = None
) -> MediaAsset:
    n = next(_counter)
    sha = hashlib.sha256(f"asset-{n}-{name}".encode()).hexdigest()
    ext = "jpg" if kind == "image" else "mp4"
    return MediaAsset.objects.create(
        sha256=sha,
        kind=kind,
        file=f"assets/{sha[:2]}/{sha}.{ext}",
        width=width,
        height=height,
        duration=4.0 if kind == "video" else None,
    )


# Payloads whose truth/metadata values are unusual strings, so a leak test can search for them.
def status_payload() -> dict:
    return {
        "image_a": "a.jpg",
        "image_b": "b.jpg",
        "state_a": "TRUTH-closed-lid jar",
        "state_b": "TRUTH-open-lid jar",
        "change": "TRUTH-unscrew the lid",
        "change_distractors": ["TRUTH-d1", "TRUTH-d2", "TRUTH-d3"],
        "category": "functional",
        "difference": "significant",
    }


def changeit_payload() -> dict:
    return {
        "image": "apple.jpg",
        "object": "apple",
        "state": "peeled apple",
        "distractors": ["whole apple", "sliced apple"],
    }


def visualtrans_payload() -> dict:
    return {
        "images": ["i0.jpg", "i1.jpg"],
        "question": "Which tool was used?",
        "format": "choice",
        "options": ["knife", "spoon", "fork"],
        "answer": "C",
        "subtask": "TRUTH-causal-subtask",
        "scene": "TRUTH-kitchen-scene",
    }


def m3verse_payload() -> dict:
    return {
        "video_before": "v0.mp4",
        "video_after": "v1.mp4",
        "question": "What moved?",
        "options": ["the cup", "the chair", "the lamp", "none of the listed"],
        "answer": ["A", "C"],
        "context": "TRUTH-inter-context",
        "capabilities": ["TRUTH-spatial-cap"],
        "hallucination": False,
    }


def oscbench_payload() -> dict:
    return {
        "video": "gen.mp4",
        "prompt": "A hand slices a tomato on a board",
        "generator": "TRUTH-gen-model-x",
        "scenario": "TRUTH-novel-scenario",
        "action": "slice",
        "action_category": "TRUTH-cutting-cat",
        "object": "tomato",
        "object_category": "TRUTH-vegetable-cat",
    }


PAYLOADS = {
    "status": status_payload,
    "changeit": changeit_payload,
    "visualtrans": visualtrans_payload,
    "m3verse": m3verse_payload,
    "oscbench": oscbench_payload,
}
MEDIA = {
    "status": {"image_a": "image", "image_b": "image"},
    "changeit": {"image": "image"},
    "visualtrans": {"images": ["image", "image"]},
    "m3verse": {"video_before": "video", "video_after": "video"},
    "oscbench": {"video": "video"},
}


def make_item(
    project,
    external_id: str | None = None,
    *,
    payload: dict | None = None,
    is_gold: bool = False,
    with_media: bool = True,
) -> Item:
    protocol = project.protocol
    media: dict = {}
    if with_media:
        for name, kind in MEDIA[protocol].items():
            if isinstance(kind, list):
                media[name] = [make_asset(k).sha256 for k in kind]
            else:
                media[name] = make_asset(kind).sha256
    return Item.objects.create(
        project=project,
        external_id=external_id or f"it{next(_counter)}",
        payload=payload if payload is not None else PAYLOADS[protocol](),
        media=media,
        is_gold=is_gold,
    )


def make_items_fast(project, n: int) -> list[int]:
    """n items without media (for queue tests that never look at payloads)."""
    objs = [Item(project=project, external_id=f"q{i}", payload=PAYLOADS[project.protocol]()) for i in range(n)]
    return [o.pk for o in Item.objects.bulk_create(objs)]


def valid_result(workflow: str, variant: int = 0) -> dict:
    if workflow == "quintuplet":
        return {
            "state_a": "a closed jar",
            "state_b": "an open jar",
            "change": "open the jar",
            "change_distractors": ["close the jar", "fill the jar", "break the jar"],
            "category": "functional",
            "difference": ["significant", "slight"][variant % 2],
        }
    if workflow == "box":
        return {"bbox": [10 + variant, 20, 100, 80], "state": "peeled apple"}
    if workflow == "qa":
        return {"answer": "C", "flags": []}
    if workflow == "rating":
        return {
            "scores": {
                "subject": 4,
                "object": 5,
                "action": 4,
                "osc_accuracy": 3,
                "osc_consistency": 3,
                "scene": None,
                "realism": 2,
                "aesthetics": 3,
            }
        }
    raise ValueError(workflow)


WORKFLOW = {"status": "quintuplet", "changeit": "box", "visualtrans": "qa", "m3verse": "qa", "oscbench": "rating"}


def make_people(n: int, prefix: str = "ann") -> list:
    """Users without a password hash (hashing costs ~1 s each on a busy machine)."""
    from django.contrib.auth import get_user_model

    User = get_user_model()
    return [User.objects.create_user(f"{prefix}{i}", password=None) for i in range(n)]
