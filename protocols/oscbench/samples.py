"""OSCBench sample items (protocols/kit/samples.py): a generated clip of an object changing state,
and for the demo three external raters' scores of the verified ones (a published human study) and
two judges' scores of a release (imported judge predictions).

Each video has a made-up quality per criterion: its generator's level (three generators, good to
poor) plus the video's own deviation. The raters score that quality with small personal offsets
and noise, so they mostly agree (Krippendorff's α well above 0 on every criterion); the judges
score it with more noise, one more than the other, so both track the humans, unequally.
"""

from __future__ import annotations

from typing import Any

from protocols.kit.samples import DEMO_VERIFIED, SCENES, Clip, Demo, seeded

from .fields import CRITERIA

# The demo project's rubric (replacing the protocol's default wording): what 1 and 5 mean.
RUBRIC = {
    "subject": "Does the subject named in the prompt appear as described? 1 = missing or another subject, "
    "5 = exactly as described. N/A when the prompt names none.",
    "object": "Is the object the prompt names present and recognisable? 1 = missing or another object, "
    "5 = clearly the right object.",
    "action": "Is the action of the prompt carried out? 1 = no such action, 5 = the action as described.",
    "osc_accuracy": "Does the object end in the state the prompt asks for? 1 = no change or the wrong one, "
    "5 = exactly the intended end state.",
    "osc_consistency": "Does the state change progress plausibly, without jumps or reversals? 1 = incoherent, "
    "5 = smooth and stable.",
    "scene": "Does the scene match the prompt? 1 = the wrong place, 5 = as described. N/A when the prompt names none.",
    "realism": "Does the video look physically plausible? 1 = clearly broken, 5 = could pass for real footage.",
    "aesthetics": "Is the video pleasant to look at (composition, colour, sharpness)? 1 = poor, 5 = excellent.",
}
# Ratings are the labels: some videos wait for raters, the rest are verified.
DEMO = Demo(
    title="OSCBench video rating",
    annotations_per_item=3,
    settings={"rubric": RUBRIC},
    files={"raw.jsonl": (range(0, 6), False), "verified.jsonl": (range(6, 6 + DEMO_VERIFIED), True)},
)
# The generators (the board's rows) and how good their videos are on average (1-5).
GENERATOR_LEVEL = {"gen-0": 4.3, "gen-1": 3.5, "gen-2": 2.3}
GENERATORS = tuple(GENERATOR_LEVEL)
# The study's raters: each one's lean (added to every score) and the spread of their judgement.
RATERS = {"study-rater-1": (0.0, 0.35), "study-rater-2": (0.3, 0.35), "study-rater-3": (-0.3, 0.35)}
# The judges whose scores the demo imports: lean and spread, the second much noisier.
JUDGES = {"demo-judge-careful": (0.0, 0.5), "demo-judge-hasty": (0.4, 0.9)}


def generator_of(i: int) -> str:
    """Item i's generator: two alternate in each block of four items and the pair rotates, so the
    first four items come from gen-0 (items 0 and 2) and gen-1 (1 and 3), and every block of
    twelve holds four videos of each."""
    return GENERATORS[(i % 2 + i // 4) % len(GENERATORS)]


def fields(i: int, *, complete: bool = True) -> dict[str, Any]:
    obj, _, change, _ = SCENES[i % len(SCENES)]
    return {
        "prompt": f"A person slowly {change.split(' ', 1)[0]}s the {obj}.",
        "generator": generator_of(i),
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


def quality(item_id: str, generator: str, criterion: str) -> float:
    """The made-up true quality of a video on a criterion, 1 to 5."""
    level = GENERATOR_LEVEL.get(generator, 3.0) + seeded("quality", item_id, criterion).gauss(0, 0.7)
    return min(5.0, max(1.0, level))


def _score(item_id: str, generator: str, criterion: str, who: str, lean: float, spread: float) -> int:
    noise = seeded("score", who, item_id, criterion).gauss(0, spread)
    return min(5, max(1, round(quality(item_id, generator, criterion) + lean + noise)))


def names_a_scene(item_id: str) -> bool:
    """Whether the video's prompt names a place (about half do); where not, scene is N/A for all."""
    return seeded("scene", item_id).random() < 0.5


def _scores(item_id: str, generator: str, who: str, lean: float, spread: float) -> dict[str, Any]:
    scores: dict[str, Any] = {c: _score(item_id, generator, c, who, lean, spread) for c in CRITERIA}
    if not names_a_scene(item_id):
        scores["scene"] = None
    return scores


def demo_annotations(numbers: range) -> list[dict[str, Any]]:
    """The study raters' scores of each of the items `numbers`, as the ratings import reads them."""
    return [
        {
            "item": f"oscbench-{i:05d}",
            "rater": rater,
            "scores": _scores(f"oscbench-{i:05d}", generator_of(i), rater, *how),
        }
        for i in numbers
        for rater, how in RATERS.items()
    ]


def demo_predictions(lines: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The demo judges' scores of every video of a release's lines, as judge prediction lines."""
    out: dict[str, list[dict[str, Any]]] = {}
    for judge, how in JUDGES.items():
        out[judge] = [
            {
                "item": line["id"],
                "query": "judge",
                "answer": _scores(line["id"], line.get("generator", ""), judge, *how),
            }
            for line in lines
        ]
    return out
