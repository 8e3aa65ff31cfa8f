"""What every protocol's made-up sample dataset (its ``samples`` module) is drawn from: the scenes
of simple objects whose state changes, and the media files a sample line names, described as
drawings (``Picture``, ``Clip``) that annotation/importing/samples.py renders. Plain Python.

A protocol's ``samples`` module (``Protocol.samples``, protocols/base.py) exposes
``fields(i, *, complete) -> dict`` (item i's fields besides its id, media and tags),
``media_paths(i, *, distinct) -> dict`` (its media fields) and ``media_files(k, *, distinct) ->
{path: Picture | Clip}`` (the files of media set k); optionally ``DEMO`` (a ``Demo``: how the demo
command sets up the protocol's project), ``demo_annotations(numbers) -> list[dict]``
(annotations made elsewhere to import for the demo's verified items) and
``demo_predictions(lines) -> {model: [prediction line]}`` (what made-up models of different skill
answered about a frozen release's lines, in the prediction-line format of docs/architecture.md).

The demo should look like a real study a newcomer can learn from: enough verified items for a
board, models that differ in skill (``DEMO_MODELS``; each answers right with its own chance, less
on harder items), raters who mostly agree. Everything is drawn from random generators seeded by
names (``seeded``), so every run and every database gets the same data.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from protocols.base import LETTERS

# (object, list of states in order of change, change verb phrase, distractor changes)
SCENES = [
    (
        "door",
        ["a closed door", "a slightly opened door", "a wide open door"],
        "open the door",
        ["close the door", "paint the door", "remove the door"],
    ),
    (
        "cup",
        ["an empty cup", "a half-full cup", "a full cup"],
        "fill the cup",
        ["empty the cup", "break the cup", "wash the cup"],
    ),
    (
        "apple",
        ["a whole apple", "a halved apple", "a sliced apple"],
        "cut the apple",
        ["peel the apple", "wash the apple", "bite the apple"],
    ),
    (
        "box",
        ["a closed box", "a half-open box", "an open box"],
        "open the box",
        ["close the box", "fold the box", "tape the box"],
    ),
]


@dataclass(frozen=True)
class Picture:
    """An image of scene `scene`'s object in state `state` (0 = start)."""

    scene: int
    state: int


@dataclass(frozen=True)
class Clip:
    """A short video of scene `scene`'s object going from state `start` to state `end`."""

    scene: int
    start: int = 0
    end: int = 2


# How many verified items each demo board has: enough for intervals and breakdowns to mean something.
DEMO_VERIFIED = 24


@dataclass(frozen=True)
class Demo:
    """The demo command's project of a protocol (slug demo-<name>): its title, annotations per
    item, settings, and which sample items each file holds (file -> (item numbers, complete)); a
    file named verified.jsonl is imported as verified (the items of release v1 and its boards)."""

    title: str
    annotations_per_item: int = 1
    settings: dict[str, Any] = field(default_factory=dict)
    files: dict[str, tuple[range, bool]] = field(
        default_factory=lambda: {
            "raw.jsonl": (range(0, 4), False),
            "labeled.jsonl": (range(4, 8), True),
            "verified.jsonl": (range(8, 8 + DEMO_VERIFIED), True),
        }
    )


@dataclass(frozen=True)
class DemoModel:
    """A made-up model on the demo's boards: its name and its chance of answering a query of an
    item of middling difficulty right."""

    name: str
    skill: float


# Three models far enough apart that their order holds on a board of DEMO_VERIFIED items.
DEMO_MODELS = (
    DemoModel("demo-vlm-large", 0.9),
    DemoModel("demo-vlm-base", 0.7),
    DemoModel("demo-vlm-small", 0.5),
)


def seeded(*parts: Any) -> random.Random:
    """A random generator seeded by names (the same draws in every run, process and database)."""
    return random.Random("|".join(str(p) for p in parts))


def difficulty(item_id: str) -> float:
    """How much harder than middling an item is, -0.15 to 0.15 (the same for every model)."""
    return seeded("difficulty", item_id).uniform(-0.15, 0.15)


def _other(rng: random.Random, choices: Iterable[Any], right: Any) -> Any:
    wrong = [c for c in choices if c != right]
    return rng.choice(wrong) if wrong else right


def simulated_answer(query: Mapping[str, Any], rng: random.Random, *, right: bool) -> Any:
    """A model's answer to one resolved query ({"options", "answer"}: protocols/base.py
    resolve_queries), right or wrong, in the shape the query's known answer has: an option letter,
    a candidate's number, a count, a list of letters or a list of object names. None when the
    query has no known answer (a judge's query)."""
    truth, options = query.get("answer"), list(query.get("options") or [])
    if truth is None or right:
        return truth
    letters = list(LETTERS[: len(options)])
    if isinstance(truth, str) and options:
        return _other(rng, letters, truth)
    if isinstance(truth, int) and options:  # a candidate's number, from 1
        return _other(rng, range(1, len(options) + 1), truth)
    if isinstance(truth, int):  # a count: off by one or two
        return max(0, truth + rng.choice((-1, 1, 2))) if truth else rng.choice((1, 2))
    if isinstance(truth, list) and options:  # letters: one wrong letter (never a contradiction)
        return [rng.choice([x for x in letters if x not in truth] or letters)]
    if isinstance(truth, list):  # object names: one missed, or one named that did not change
        names = [scene[0] for scene in SCENES if scene[0] not in truth]
        kept = truth[:-1] if len(truth) > 1 and rng.random() < 0.5 else list(truth)
        return [*kept, rng.choice(names)] if names else kept
    return truth


# The people whose blind answers a QA protocol's demo imports (its Human row): their chance of
# answering a question right.
DEMO_ANNOTATORS = {"study-annotator-1": 0.92, "study-annotator-2": 0.85}


def simulated_blind_answers(questions: Iterable[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Blind QA answers of DEMO_ANNOTATORS ({"item", "annotator", "answer", "flags"}, the
    annotation import's lines) to each (item id, {"options", "answer"}) question."""
    lines = []
    for item_id, question in questions:
        for annotator, skill in DEMO_ANNOTATORS.items():
            rng = seeded(annotator, item_id)
            answer = simulated_answer(question, rng, right=rng.random() < skill - difficulty(item_id))
            lines.append({"item": item_id, "annotator": annotator, "answer": answer, "flags": []})
    return lines


def simulated_predictions(
    lines: Iterable[Mapping[str, Any]], models: Iterable[DemoModel] = DEMO_MODELS
) -> dict[str, list[dict[str, Any]]]:
    """Each model's prediction lines ({"item", "query", "answer"}) for a release's lines (each with
    its `resolved` queries): right with the model's skill less the item's difficulty."""
    lines = list(lines)
    out: dict[str, list[dict[str, Any]]] = {}
    for model in models:
        predictions = []
        for line in lines:
            chance = min(0.98, max(0.02, model.skill - difficulty(line["id"])))
            for key, query in sorted((line.get("resolved") or {}).items()):
                rng = seeded(model.name, line["id"], key)
                answer = simulated_answer(query, rng, right=rng.random() < chance)
                predictions.append({"item": line["id"], "query": key, "answer": answer})
        out[model.name] = predictions
    return out
