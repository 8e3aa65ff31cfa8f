"""STATUS sample items (protocols/kit/samples.py): two drawings of an object, before and after."""

from __future__ import annotations

from typing import Any

from protocols.kit.samples import SCENES, Demo, Picture, simulated_predictions

DEMO = Demo(title="STATUS quintuplets", annotations_per_item=1)


def fields(i: int, *, complete: bool = True) -> dict[str, Any]:
    obj, states, change, distractors = SCENES[i % len(SCENES)]
    if not complete:
        return {}
    return {
        "state_a": states[0],
        "state_b": states[2],
        "change": change,
        "change_distractors": list(distractors),
        "category": "functional" if obj in ("cup", "apple") else "positional",
        "difference": "significant" if i % 2 else "slight",
    }


def media_paths(i: int, *, distinct: int = 4) -> dict[str, Any]:
    k = i % distinct
    return {"image_a": f"img/s{k}_a.png", "image_b": f"img/s{k}_b.png"}


def media_files(k: int, *, distinct: int = 4) -> dict[str, Picture]:
    scene = k % len(SCENES)
    return {f"img/s{k}_a.png": Picture(scene, 0), f"img/s{k}_b.png": Picture(scene, 2)}


def demo_predictions(lines: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The demo models' answers to every query of a release's lines (protocols/kit/samples.py)."""
    return simulated_predictions(lines)
