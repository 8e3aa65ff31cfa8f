"""ChangeIt as an lmms-eval task (protocols/kit/lmms.py), as StateLab's own runs ask it (prompts.py).

Up to four documents per item: standard / distractor candidates × the full image / its box. The
crop is the image made upright (EXIF), the box `[x, y, w, h]` rounded and clipped to it, as
inference.media.load_image cuts it, written at export time (`media/statelab-crops/`); a crop query
of an item with no box (none annotated, or `nothing_to_label` / `cannot_determine` in its place)
or with a box outside its image has no document, as inference fails that query: the task's
utils.py then counts it wrong and a parse failure, as StateLab's scoring counts a missing answer.
Object accuracy judges the chosen label by the release's vocabulary (`label_objects.json`: a state
label names the first object, in release order, that has it) or the item's own distractors, as
scoring.py does.
"""

from __future__ import annotations

import json
from pathlib import Path

from protocols.kit.lmms import LmmsExportError, LmmsTask, crop_path, media_path, media_paths, write_crop
from protocols.kit.prompting import numbered

from . import QUERIES

LABEL_OBJECTS = "label_objects.json"
PROMPT = (
    "This photo shows {article} {object}. Which of these labels describes the state the {object} is in?\n"
    "{options}\nAnswer with the number of the best label (1 to {n}) and nothing else."
)
# scoring.py's KEYS: every column, also when no item has a box.
METRICS = [f"{kind}_acc_{key.split(':')[1]}_{key.split(':')[2]}" for kind in ("state", "object") for key in QUERIES]


def has_box(line: dict) -> bool:
    """Whether the item has a box to crop (not none, nor an annotator's outcome in its place)."""
    return isinstance(line.get("bbox"), list)


def label_objects(vocabulary: dict[str, set[str]]) -> dict[str, str]:
    """label -> object as StateLab's ChangeIt scoring judges a chosen label (scoring.label_objects):
    objects in release order, each one's state labels sorted, the first object that has a label
    keeps it."""
    out: dict[str, str] = {}
    for obj, labels in vocabulary.items():
        for label in sorted(labels):
            out.setdefault(label, obj)
    return out


class Task(LmmsTask):
    def __init__(self, protocol, settings=None):
        super().__init__(protocol, settings)
        self.vocabulary: dict[str, set[str]] = {}  # object -> its state labels, in release order

    def documents(self, line: dict) -> list[dict]:
        obj = str(line["object"])
        self.vocabulary.setdefault(obj, set()).add(str(line["state"]))
        full = media_paths(line["image"])
        resolved = line.get("resolved") or {}
        docs = []
        for key in QUERIES:
            _, strategy, condition = key.split(":")
            if condition == "crop" and not has_box(line):
                continue  # inference fails this query: no document, scored as a missing answer
            q = resolved[key]
            options = q["options"]
            article = "an" if obj[:1].lower() in "aeiou" else "a"
            prompt = PROMPT.format(article=article, object=obj, options=numbered(options), n=len(options))
            meta = {
                "object": obj,
                "distractors": [str(d) for d in line.get("distractors") or []],
                "strategy": strategy,
                "condition": condition,
            }
            visuals = [crop_path(str(line["id"]))] if condition == "crop" else full
            docs.append(
                self.document(
                    line,
                    key,
                    prompt=prompt,
                    options=options,
                    fmt="number",
                    visuals=visuals,
                    kind="image",
                    target=q["answer"],
                    meta=meta,
                )
            )
        return docs

    def metrics(self, metas: list[dict]) -> list[str]:
        return list(METRICS)

    def add_media(self, out: Path, line: dict, docs: list[dict]) -> tuple[list[dict], int]:
        """Cut the item's box out of its image (written under out/media already); a box outside the
        image drops the crop documents instead, as inference fails those queries."""
        if not has_box(line):
            return docs, 0
        try:
            cropped = write_crop(out / media_path(line["image"]), line["bbox"], out / crop_path(str(line["id"])))
        except (TypeError, ValueError) as exc:
            raise LmmsExportError(f"item {line['id']}: box {line['bbox']!r} is not [x, y, w, h] ({exc})") from None
        return (docs if cropped else [d for d in docs if not d["query"].endswith(":crop")]), int(cropped)

    def files(self) -> dict[str, str]:
        return {LABEL_OBJECTS: json.dumps(label_objects(self.vocabulary), ensure_ascii=False) + "\n"}
