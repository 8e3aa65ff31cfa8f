"""M3-Verse sample items (protocols/kit/samples.py): a question on two clips of an object."""

from __future__ import annotations

from typing import Any

from protocols.kit.samples import SCENES, Clip, Demo

DEMO = Demo(title="M3-Verse video-pair QA", annotations_per_item=2)


def fields(i: int, *, complete: bool = True) -> dict[str, Any]:
    obj = SCENES[i % len(SCENES)][0]
    out: dict[str, Any] = {
        "question": f"What differs between the two videos of the {obj}?",
        "options": [f"the {obj} changed state", "the light changed", "nothing listed is correct"],
    }
    if complete:
        out.update(answer=["A"], context="intra" if i % 2 else "inter", capabilities=["attribute"], hallucination=False)
    return out


def media_paths(i: int, *, distinct: int = 4) -> dict[str, Any]:
    k = i % distinct
    return {"video_before": f"vid/m{k}_before.mp4", "video_after": f"vid/m{k}_after.mp4"}


def media_files(k: int, *, distinct: int = 4) -> dict[str, Clip]:
    scene = k % len(SCENES)
    return {f"vid/m{k}_before.mp4": Clip(scene, 0, 0), f"vid/m{k}_after.mp4": Clip(scene, 0, 2)}
