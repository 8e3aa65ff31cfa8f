"""ChangeIt sample items (protocols/kit/samples.py): one drawing, its object's state and a box."""

from __future__ import annotations

from typing import Any

from protocols.kit.samples import SCENES, Demo, Picture

DEMO = Demo(title="ChangeIt boxes and states", annotations_per_item=2)


def fields(i: int, *, complete: bool = True) -> dict[str, Any]:
    obj, states, _, _ = SCENES[i % len(SCENES)]
    out: dict[str, Any] = {
        "object": obj,
        "state": states[i % 3],
        "distractors": [s for s in states if s != states[i % 3]],
    }
    if complete:
        out["bbox"] = [40, 20, 80, 80]
    return out


def media_paths(i: int, *, distinct: int = 4) -> dict[str, Any]:
    return {"image": f"img/c{i % distinct}.png"}


def media_files(k: int, *, distinct: int = 4) -> dict[str, Picture]:
    return {f"img/c{k}.png": Picture(k % len(SCENES), k % 3)}
