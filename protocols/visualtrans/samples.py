"""VisualTrans sample items (protocols/kit/samples.py): a question of each format on two drawings."""

from __future__ import annotations

from typing import Any

from protocols.base import LETTERS
from protocols.kit.samples import SCENES, Demo, Picture, simulated_blind_answers, simulated_predictions

DEMO = Demo(title="VisualTrans blind QA", annotations_per_item=2)


def fields(i: int, *, complete: bool = True) -> dict[str, Any]:
    obj, _, change, distractors = SCENES[i % len(SCENES)]
    # The question defines a QA task, so raw items carry it too; the answer is the label.
    fmt = ("choice", "count", "set")[i % 3]
    # The scene names the pictures (media_paths: one pair per object), as the authors' scenes do.
    out: dict[str, Any] = {"question": f"What happened to the {obj}?", "format": fmt, "scene": f"kitchen_{obj}"}
    right = (i // 3) % 3  # where the right option is listed: not always first
    if fmt == "choice":
        wrong = [distractors[0], distractors[1]]
        out["options"] = wrong[:right] + [change] + wrong[right:]
    elif fmt == "count":
        out["question"] = f"How many {obj}s changed state?"
    else:
        out["question"] = "Which objects changed?"
    if complete:
        out.update(
            subtask={
                "choice": ("causal", "planning", "intermediate")[(i // 6) % 3],
                "count": "quantitative",
                "set": ("fine_grained", "global")[(i // 3) % 2],
            }[fmt],
            answer={"choice": LETTERS[right], "count": 1, "set": [obj]}[fmt],
        )
    return out


def media_paths(i: int, *, distinct: int = 4) -> dict[str, Any]:
    k = i % distinct
    return {"images": [f"img/s{k}_a.png", f"img/s{k}_b.png"]}


def media_files(k: int, *, distinct: int = 4) -> dict[str, Picture]:
    scene = k % len(SCENES)
    return {f"img/s{k}_a.png": Picture(scene, 0), f"img/s{k}_b.png": Picture(scene, 2)}


def demo_predictions(lines: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The demo models' answers to every query of a release's lines (protocols/kit/samples.py)."""
    return simulated_predictions(lines)


def demo_annotations(numbers: range) -> list[dict[str, Any]]:
    """Two study annotators' blind answers to the items `numbers` (the board's Human row)."""
    questions = []
    for i in numbers:
        line = fields(i)
        questions.append((f"visualtrans-{i:05d}", {"options": line.get("options"), "answer": line["answer"]}))
    return simulated_blind_answers(questions)
