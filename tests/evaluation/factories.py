"""Plain helpers that create releases and annotations directly through the ORM."""

from __future__ import annotations

import json

from annotation.models import Annotation, Item, ItemStatus, Release, ReleaseItem
from annotation.protocols import resolve_queries
from inference.services import predictions_import
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


COUNTING_ITEMS = 16
COUNTING_RIGHT = {"bad": 2, "mid": 4, "good": COUNTING_ITEMS}  # each model is right on the first k questions


def counting_board(project) -> Release:
    """16 VisualTrans counting questions, two per scene, answered by three models right on the first k
    (COUNTING_RIGHT): the board whose clustered errors, paired comparisons and power plans the tests
    compute by hand."""
    payloads = {
        f"q{i}": {
            "images": [f"s{i // 2}/a.png", f"s{i // 2}/b.png"],
            "question": f"How many cups in scene {i // 2}?",
            "format": "count",
            "answer": i,
            "subtask": "quantitative",
            "scene": f"scene{i // 2}",
        }
        for i in range(COUNTING_ITEMS)
    }
    release = make_release(project, payloads)
    for model, k in COUNTING_RIGHT.items():
        lines = [
            json.dumps({"item": f"q{i}", "query": "qa", "answer": str(i if i < k else i + 100)})
            for i in range(COUNTING_ITEMS)
        ]
        predictions_import(project=project, lines=lines, model_name=model, release=release)
    return release
