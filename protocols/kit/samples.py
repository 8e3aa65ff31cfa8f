"""What every protocol's made-up sample dataset (its ``samples`` module) is drawn from: the scenes
of simple objects whose state changes, and the media files a sample line names, described as
drawings (``Picture``, ``Clip``) that annotation/importing/samples.py renders. Plain Python.

A protocol's ``samples`` module (``Protocol.samples``, protocols/base.py) exposes
``fields(i, *, complete) -> dict`` (item i's fields besides its id, media and tags),
``media_paths(i, *, distinct) -> dict`` (its media fields) and ``media_files(k, *, distinct) ->
{path: Picture | Clip}`` (the files of media set k); optionally ``DEMO`` (a ``Demo``: how the demo
command sets up the protocol's project) and ``demo_annotations(numbers) -> list[dict]``
(annotations made elsewhere to import for the demo's verified items).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class Demo:
    """The demo command's project of a protocol (slug demo-<name>): its title, annotations per
    item, settings, and which sample items each file holds (file -> (item numbers, complete)); a
    file named verified.jsonl is imported as verified."""

    title: str
    annotations_per_item: int = 1
    settings: dict[str, Any] = field(default_factory=dict)
    files: dict[str, tuple[range, bool]] = field(
        default_factory=lambda: {
            "raw.jsonl": (range(0, 4), False),
            "labeled.jsonl": (range(4, 8), True),
            "verified.jsonl": (range(8, 12), True),
        }
    )
