"""ChangeIt sample items (protocols/kit/samples.py): one drawing, its object's state and a box."""

from __future__ import annotations

from typing import Any

from protocols.kit.samples import SCENES, Demo, Picture, simulated_predictions

DEMO = Demo(title="ChangeIt boxes and states", annotations_per_item=2)


def fields(i: int, *, complete: bool = True) -> dict[str, Any]:
    obj, states, _, _ = SCENES[i % len(SCENES)]
    state = states[i % 3]
    out: dict[str, Any] = {
        "object": obj,
        "state": state,
        "distractors": [s for s in states if s != state],
    }
    if complete:
        out["bbox"] = [40, 20, 80, 80]
    return out


def media_paths(i: int, *, distinct: int = 4) -> dict[str, Any]:
    return {"image": f"img/c{i % distinct}.png"}


def media_files(k: int, *, distinct: int = 4) -> dict[str, Picture]:
    return {f"img/c{k}.png": Picture(k % len(SCENES), k % 3)}


def demo_predictions(lines: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The demo models' answers to every query of a release's lines (protocols/kit/samples.py)."""
    return simulated_predictions(lines)
