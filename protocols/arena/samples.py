"""Arena sample items (protocols/kit/samples.py): two generated clips of one prompt, from two of
three made-up generators, and for the demo three external raters' votes on the verified ones.

Each generator has a made-up strength; a rater prefers the stronger one's clip with the
Bradley–Terry chance, says "tie" now and then and, rarely, that both are bad, so the demo board
orders the generators as their strengths do, with intervals that overlap where they are close.
"""

from __future__ import annotations

import math
from typing import Any

from protocols.kit.samples import DEMO_VERIFIED, SCENES, Clip, Demo, seeded

DEMO = Demo(
    title="Arena (pairwise video votes)",
    annotations_per_item=3,
    files={"raw.jsonl": (range(0, 6), False), "verified.jsonl": (range(6, 6 + DEMO_VERIFIED), True)},
)
# The generators compared and their made-up log-strengths (Elo-scale differences of about 200).
STRENGTH = {"gen-0": 0.8, "gen-1": 0.0, "gen-2": -0.8}
GENERATORS = tuple(STRENGTH)
PAIRS = (("gen-0", "gen-1"), ("gen-1", "gen-2"), ("gen-2", "gen-0"))
RATERS = ("arena-rater-1", "arena-rater-2", "arena-rater-3")
TIE_SHARE = 0.15  # of votes between equals
BOTH_BAD_SHARE = 0.05


def pair_of(i: int) -> tuple[str, str]:
    """Item i's (model_a, model_b): the three pairs in turn, the sides swapped every other round."""
    a, b = PAIRS[i % len(PAIRS)]
    return (b, a) if (i // len(PAIRS)) % 2 else (a, b)


def fields(i: int, *, complete: bool = True) -> dict[str, Any]:
    obj, _, change, _ = SCENES[i % len(SCENES)]
    model_a, model_b = pair_of(i)
    return {"prompt": f"A person slowly {change.split(' ', 1)[0]}s the {obj}.", "model_a": model_a, "model_b": model_b}


def media_paths(i: int, *, distinct: int = 4) -> dict[str, Any]:
    k = i % distinct
    return {"video_a": f"vid/arena{k}-a.mp4", "video_b": f"vid/arena{k}-b.mp4"}


def media_files(k: int, *, distinct: int = 4) -> dict[str, Clip]:
    scene = k % len(SCENES)
    return {f"vid/arena{k}-a.mp4": Clip(scene, 0, 2), f"vid/arena{k}-b.mp4": Clip(scene, 1, 2)}


def vote(item_id: str, model_a: str, model_b: str, rater: str, criterion: str = "overall") -> str:
    """One rater's made-up vote: both bad now and then, else Davidson's chances of a, tie, b."""
    rng = seeded("vote", item_id, rater, criterion)
    if rng.random() < BOTH_BAD_SHARE:
        return "both_bad"
    half = (STRENGTH[model_a] - STRENGTH[model_b]) / 2
    nu = 2 * TIE_SHARE / (1 - TIE_SHARE)
    win, lose = math.exp(half), math.exp(-half)
    draw = rng.random() * (win + lose + nu)
    return "a" if draw < win else ("b" if draw < win + lose else "tie")


def demo_annotations(numbers: range) -> list[dict[str, Any]]:
    """The raters' votes on each of the items `numbers`, as the arena's vote lines (formats.py):
    a vote on the whole, and on every other item one on the state change too."""
    lines: list[dict[str, Any]] = []
    for i in numbers:
        item = f"arena-{i:05d}"
        a, b = pair_of(i)
        for rater in RATERS:
            lines.append({"item": item, "rater": rater, "winner": vote(item, a, b, rater)})
            if i % 2 == 0:
                lines.append(
                    {
                        "item": item,
                        "rater": rater,
                        "winner": vote(item, a, b, rater, "state_change"),
                        "criterion": "state_change",
                    }
                )
    return lines
