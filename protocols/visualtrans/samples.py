"""VisualTrans sample items (protocols/kit/samples.py): a question of each format on two drawings."""

from __future__ import annotations

from typing import Any

from protocols.kit.samples import SCENES, Demo, Picture

DEMO = Demo(title="VisualTrans blind QA", annotations_per_item=2)


def fields(i: int, *, complete: bool = True) -> dict[str, Any]:
    obj, _, change, distractors = SCENES[i % len(SCENES)]
    # The question defines a QA task, so raw items carry it too; the answer is the label.
    fmt = ("choice", "count", "set")[i % 3]
    out: dict[str, Any] = {"question": f"What happened to the {obj}?", "format": fmt, "scene": "kitchen"}
    if fmt == "choice":
        out["options"] = [change, distractors[0], distractors[1]]
    elif fmt == "count":
        out["question"] = f"How many {obj}s changed state?"
    else:
        out["question"] = "Which objects changed?"
    if complete:
        out.update(
            subtask=("global", "causal", "quantitative")[i % 3], answer={"choice": "A", "count": 1, "set": [obj]}[fmt]
        )
    return out


def media_paths(i: int, *, distinct: int = 4) -> dict[str, Any]:
    k = i % distinct
    return {"images": [f"img/s{k}_a.png", f"img/s{k}_b.png"]}


def media_files(k: int, *, distinct: int = 4) -> dict[str, Picture]:
    scene = k % len(SCENES)
    return {f"img/s{k}_a.png": Picture(scene, 0), f"img/s{k}_b.png": Picture(scene, 2)}
