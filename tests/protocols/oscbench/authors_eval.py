"""The OSCBench authors' loading steps, written here from what their scripts do (not their code):
the prompt split files are read one prompt per line; the taxonomy files are JSON objects (action:
category -> words; object: category -> subcategory -> words); the frame sampler takes every .mp4 of
a folder by its file name without the suffix, and the judge script recovers a video's prompt from
that name by dropping a leading "<digits>_", a trailing "_<two letters>" and turning underscores
into spaces."""

from __future__ import annotations

import json
import re
from pathlib import Path

SPLITS = ("regular", "novel", "compositional")


def prompt_splits(root: Path) -> dict[str, list[str]]:
    return {
        split: (root / "prompt_splits" / f"prompts_{split}.txt").read_text(encoding="utf-8").splitlines()
        for split in SPLITS
    }


def taxonomy(root: Path) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    actions = json.loads((root / "action_object_taxonomy" / "action_category.json").read_text(encoding="utf-8"))
    objects = json.loads((root / "action_object_taxonomy" / "object_category.json").read_text(encoding="utf-8"))
    by_action = {word: category for category, words in actions.items() for word in words}
    by_object = {
        word: (category, sub) for category, subs in objects.items() for sub, words in subs.items() for word in words
    }
    return by_action, by_object


def judged_prompt(video_key: str) -> str:
    name = re.sub(r"^\d+_", "", video_key)
    name = re.sub(r"_[a-zA-Z]{2}$", "", name)
    return name.replace("_", " ").strip()


def videos(folder: Path) -> dict[str, str]:
    """Video key (file name without .mp4) -> the prompt the judge script gives it."""
    return {p.stem: judged_prompt(p.stem) for p in sorted(folder.glob("*.mp4"))}
