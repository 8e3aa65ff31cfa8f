"""OSCBench sample items (protocols/kit/samples.py): a generated clip of an object changing state,
and for the demo three external raters' scores of the verified ones (a published human study)."""

from __future__ import annotations

from typing import Any

from protocols.kit.samples import SCENES, Clip, Demo

from .fields import CRITERIA

# The demo project's rubric (replacing the protocol's default wording).
RUBRIC = {
    "subject": "Does the subject named in the prompt appear as described? (N/A when the prompt names none)",
    "object": "Is the object the prompt names present and recognisable?",
    "action": "Is the action of the prompt carried out?",
    "osc_accuracy": "Does the object end in the state the prompt asks for?",
    "osc_consistency": "Does the state change progress plausibly, without jumps or reversals?",
    "scene": "Does the scene match the prompt? (N/A when the prompt names none)",
    "realism": "Does the video look physically plausible?",
    "aesthetics": "Is the video pleasant to look at (composition, colour, sharpness)?",
}
# Ratings are the labels: half waits for raters, half is verified.
DEMO = Demo(
    title="OSCBench video rating",
    annotations_per_item=3,
    settings={"rubric": RUBRIC},
    files={"raw.jsonl": (range(0, 6), False), "verified.jsonl": (range(6, 12), True)},
)


def fields(i: int, *, complete: bool = True) -> dict[str, Any]:
    obj, _, change, _ = SCENES[i % len(SCENES)]
    return {
        "prompt": f"A person slowly {change.split(' ', 1)[0]}s the {obj}.",
        "generator": f"gen-{i % 2}",
        "scenario": ("regular", "novel", "compositional")[i % 3],
        "action": change.split(" ", 1)[0],
        "action_category": "manipulation",
        "object": obj,
        "object_category": "household",
    }


def media_paths(i: int, *, distinct: int = 4) -> dict[str, Any]:
    return {"video": f"vid/o{i % distinct}.mp4"}


def media_files(k: int, *, distinct: int = 4) -> dict[str, Clip]:
    return {f"vid/o{k}.mp4": Clip(k % len(SCENES), 0, 2)}


def demo_annotations(numbers: range) -> list[dict[str, Any]]:
    """Three raters' scores of each of the items `numbers`, as the ratings import reads them."""
    lines = []
    for i in numbers:
        for r in range(3):
            scores = {c: 1 + (i * 3 + r * 2 + k) % 5 for k, c in enumerate(CRITERIA)}
            scores["scene"] = None if i % 2 else scores["scene"]
            lines.append({"item": f"oscbench-{i:05d}", "rater": f"study-rater-{r + 1}", "scores": scores})
    return lines
