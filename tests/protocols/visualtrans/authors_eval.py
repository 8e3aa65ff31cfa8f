"""What the VisualTrans authors' evaluation does with a VisualTrans.json, rebuilt from its description
for the tests (docs/protocols/visualtrans.md, "The authors' files"): the runner reads the JSON
array, opens every image under the image folder and sends the question text as it stands; the
scorer takes the text inside <answer>…</answer> of a reply and judges it by the row's label and
task type:

- a ``count`` row is right when that text equals the label, as text;
- a label that is one of the letters A–D makes a choice: the reply's first character, upper-cased
  when it is one of A–D (else the whole reply upper-cased), must be that letter;
- any other label is a list of names: both sides split at commas, brackets dropped, each name
  stripped, and compared as sets.

Accuracy is reported per group of task types and overall.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

GROUP_OF = {
    "count": "Quantitative",
    "procedural_interm": "Procedural_intermediate_state_recognition",
    "procedural_causal": "Procedural_latent_action_reasoning",
    "procedural_plan": "Procedural_transformation_planning",
    "spatial_fine_grained": "Spatial_fine_grained",
    "spatial_global": "Spatial_global",
}
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.IGNORECASE | re.DOTALL)
_CHOICES = ("A", "B", "C", "D")


def load(benchmark: Path, image_base: Path) -> list[dict[str, Any]]:
    """The rows as the runner reads them; a missing image fails, as the runner's does."""
    rows = json.loads(benchmark.read_text(encoding="utf-8"))
    assert isinstance(rows, list)
    for row in rows:
        for rel in row["images"]:
            if not (image_base / rel).is_file():
                raise FileNotFoundError(f"image file not found: {image_base / rel}")
        assert isinstance(row["question"], str) and isinstance(row["label"], str)
    return rows


def row_key(row: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """How the runner tells rows apart (it resumes by question text and image list)."""
    return row["question"], tuple(row["images"])


def _extracted(reply: str) -> str:
    found = _ANSWER.search(reply)
    if found:
        return found.group(1).strip()
    last = reply.strip().split("\n")[-1].strip()
    if len(last) <= 10 and (last.isdigit() or last.upper() in _CHOICES or "," in last):
        return last
    return ""


def _names(text: str) -> list[str]:
    text = re.sub(r"[\[\](){}]", "", text)
    return sorted({part.strip() for part in text.split(",") if part.strip()})


def is_right(row: dict[str, Any], reply: str) -> bool:
    label = row["label"]
    pred = _extracted(reply)
    if row["task_type"] == "count":
        return pred == label
    if label.upper() in _CHOICES:
        pred = pred.strip()
        letter = pred[0].upper() if pred and pred[0].upper() in _CHOICES else pred.upper()
        return letter == label.upper()
    return _names(pred) == _names(label)


def score(rows: list[dict[str, Any]], replies: dict[tuple[str, tuple[str, ...]], str]) -> dict[str, tuple[int, int]]:
    """(right, total) per group and "Overall"; a row without a reply is not scored (the runner
    writes only the rows it got a reply for)."""
    right: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for row in rows:
        reply = replies.get(row_key(row))
        if reply is None:
            continue
        group = GROUP_OF[row["task_type"]]
        ok = is_right(row, reply)
        for name in (group, "Overall"):
            total[name] += 1
            right[name] += ok
    return {name: (right[name], total[name]) for name in total}


def perfect_replies(rows: list[dict[str, Any]]) -> dict[tuple[str, tuple[str, ...]], str]:
    """A reply per row that names its label, in the runner's answer tags."""
    return {row_key(r): f"<think>compared the two images</think>\n<answer>{r['label']}</answer>" for r in rows}
