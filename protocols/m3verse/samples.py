"""M3-Verse sample items (protocols/kit/samples.py): a question on two clips of an object."""

from __future__ import annotations

from typing import Any

from protocols.kit.samples import SCENES, Clip, Demo, simulated_blind_answers, simulated_predictions

from .fields import CAPABILITIES, NONE_OPTION_TEXTS

DEMO = Demo(title="M3-Verse video-pair QA", annotations_per_item=2)


def fields(i: int, *, complete: bool = True) -> dict[str, Any]:
    obj = SCENES[i % len(SCENES)][0]
    # One question in four lists no right option: its answer is the authors' "none" option.
    hallucination = i % 4 == 3
    listed = [f"a second {obj} appeared" if hallucination else f"the {obj} changed state", "the light changed"]
    out: dict[str, Any] = {
        "question": f"What differs between the two videos of the {obj}?",
        "options": [*listed, NONE_OPTION_TEXTS[0]],
    }
    if complete:
        out.update(
            answer=["C"] if hallucination else ["A"],
            context="intra" if i % 2 else "inter",
            capabilities=[CAPABILITIES[(i // 2) % len(CAPABILITIES)]],
            hallucination=hallucination,
        )
    return out


def media_paths(i: int, *, distinct: int = 4) -> dict[str, Any]:
    k = i % distinct
    return {"video_before": f"vid/m{k}_before.mp4", "video_after": f"vid/m{k}_after.mp4"}


def media_files(k: int, *, distinct: int = 4) -> dict[str, Clip]:
    scene = k % len(SCENES)
    return {f"vid/m{k}_before.mp4": Clip(scene, 0, 0), f"vid/m{k}_after.mp4": Clip(scene, 0, 2)}


def demo_predictions(lines: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The demo models' answers to every query of a release's lines (protocols/kit/samples.py)."""
    return simulated_predictions(lines)


def demo_annotations(numbers: range) -> list[dict[str, Any]]:
    """Two study annotators' blind answers to the items `numbers` (the board's Human row)."""
    questions = []
    for i in numbers:
        line = fields(i)
        questions.append((f"m3verse-{i:05d}", {"options": line.get("options"), "answer": line["answer"]}))
    return simulated_blind_answers(questions)
