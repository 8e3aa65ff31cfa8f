"""Small OSCBench releases in the authors' shapes, written by the tests (docs/protocols/oscbench.md,
"The authors' files"): prompt split files (one prompt a line), the two taxonomy JSON files, one
folder of videos per generator named as the authors' judge script reads them, the mean-of-three
rating files and the judge script's JSON lines."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

SPLITS = {
    "regular": [
        "A man is chopping kale in the kitchen.",
        "A robot is peeling peach in the kitchen.",
        "A robot is peeling peach in the kitchen.",  # the same prompt on two lines
        "A woman is coating the bread with butter in the bakery.",  # two objects: butter is coated on
        "A robot with metallic arms is slicing cabbain the.",  # a typo: no object of the taxonomy
        "Grating carrots.",  # a plural of a taxonomy word
    ],
    "novel": ["A chef is zesting grapefruit in the kitchen."],
    "compositional": ["A chef is peeling and slicing pear in a home kitchen."],
}
ACTIONS = {
    "Cutting": ["chopping", "slicing"],
    "Grating": ["grating", "zesting"],
    "Peeling": ["peeling"],
    "Coating": ["coating"],
}
OBJECTS = {
    "Vegetables": {"Leafy": ["kale"], "Root": ["carrot"], "Cruciferous": ["cabbage"]},
    "Fruits": {"Citrus": ["grapefruit"], "Pome": ["pear"], "Stone": ["peach"]},
    "Grains_Carbs": {"Carb_Foods": ["bread"]},
    "Dairy_Fats": {"Fats_Oils": ["butter"]},
}
CODES = ("1a", "1b", "2a", "3a", "3b", "4a", "5a", "5b")


def prompt_lines() -> list[tuple[str, int, int, str]]:
    """(split, line in its file, line in prompts.txt, text) of every prompt."""
    out = []
    for split, texts in SPLITS.items():
        for line, text in enumerate(texts, start=1):
            out.append((split, line, len(out) + 1, text))
    return out


def write_repository(root: Path) -> Path:
    """The authors' repository files the release reader needs (no trailing newline, as theirs)."""
    (root / "prompt_splits").mkdir(parents=True)
    (root / "action_object_taxonomy").mkdir()
    for split, texts in SPLITS.items():
        (root / "prompt_splits" / f"prompts_{split}.txt").write_text("\n".join(texts), encoding="utf-8")
    (root / "action_object_taxonomy" / "action_category.json").write_text(json.dumps(ACTIONS, indent=2))
    (root / "action_object_taxonomy" / "object_category.json").write_text(json.dumps(OBJECTS, indent=2))
    return root


def video_name(number: int, text: str, code: str) -> str:
    """<number>_<prompt, spaces as underscores>_<two-letter code>.mp4"""
    return f"{number}_{text.replace(' ', '_')}_{code}.mp4"


def write_videos(folder: Path, names: list[str], clips: list[Path] | None = None) -> list[Path]:
    """The named files in `folder`: copies of `clips` in turn, or empty files when there are none."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, name in enumerate(names):
        target = folder / name
        if clips:
            shutil.copyfile(clips[i % len(clips)], target)
        else:
            target.write_bytes(b"")
        out.append(target)
    return out


def write_mean3(folder: Path, index: int, ratings: dict[str, dict[str, str]]) -> Path:
    """evaluations-<index>-mean3.json: video file name -> {"evaluations": {code: mean as text}}."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"evaluations-{index}-mean3.json"
    path.write_text(json.dumps({video: {"evaluations": codes} for video, codes in ratings.items()}, indent=2))
    return path


def judge_line(video_folder: str, scores: dict[str, object]) -> dict:
    """One line of the judge script's output for a video's frame folder (the video's name without .mp4)."""
    words = video_folder.split("_", 1)[1].rsplit("_", 1)[0].replace("_", " ")
    return {
        "video_folder": video_folder,
        "prompt": words,
        "result": {code: {"evidence": f"frames show {code}", "score": score} for code, score in scores.items()},
        "usage": {"input_tokens": 9000, "output_tokens": 700},
        "elapsed_sec": 12.5,
    }


def write_judge_output(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    return path
