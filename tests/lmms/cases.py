"""Releases and replies the lmms-eval tier runs through lmms-eval, shared with the main tier, which
scores the same replies through StateLab (tests/annotation/test_lmms_eval_export.py) or imports the
tier's real sample log (tests/evaluation/test_lmms_real_log.py). Plain data: no Django, no lmms-eval.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from annotation.protocols import resolve_queries
from protocols.changeit import vocabulary as changeit_vocabulary

SEED = 11  # the release's option seed


def release_line(protocol: str, item_id: str, payload: dict, *, vocabulary: dict | None = None) -> dict:
    """An export line as annotation.releases.export_line makes it (split test, tag "tier")."""
    line = {"id": item_id, **payload, "split": "test", "tags": ["tier"]}
    line["resolved"] = resolve_queries(protocol, item_id, payload, seed=SEED, vocabulary=vocabulary)
    return line


# --- VisualTrans: the run whose --log_samples file is tests/evaluation/data/'s fixture -------------

VT_TASK = "statelab_vt_demo_v1"
VT_ITEMS = [
    # id, format, subtask, options, truth, reply
    ("vt-0", "choice", "global", ["a red cup", "a blue cup", "no cup"], "B", "B"),
    ("vt-1", "choice", "fine_grained", ["left", "right"], "A", "Answer: (B)"),
    ("vt-2", "count", "quantitative", [], 3, "There are 3 cups."),
    ("vt-3", "set", "causal", [], ["cup", "lid"], "Lid , CUP"),
    ("vt-4", "choice", "planning", ["x", "y", "z"], "C", ""),
    ("vt-5", "choice", "intermediate", ["p", "q"], "A", "a"),
]


def vt_payloads() -> dict[str, dict]:
    out = {}
    for item_id, fmt, subtask, options, truth, _ in VT_ITEMS:
        images = ["vt/init.png", "vt/final.png"] + (["vt/cand.png"] if item_id == "vt-0" else [])
        out[item_id] = {
            "images": images,
            "question": f"What changed in {item_id}?",
            "format": fmt,
            "options": options,
            "answer": truth,
            "subtask": subtask,
            "scene": "kitchen",
        }
    return out


# docs/protocols/visualtrans.md by hand: correct vt-0 (B), vt-2 (3), vt-3 (the set, any case and order), vt-5 ("a" is
# the letter A); vt-1 answers B for A; vt-4 is empty (a parse failure).
# fine_grained 0/1, global 1/1 -> spatial mean (0 + 100) / 2 = 50; intermediate 1/1, causal 1/1,
# planning 0/1 -> procedural mean 200 / 3 = 66.67; quantitative 1/1; overall 4/6 = 66.67.
VT_SCORES = {
    "fine_grained": 0.0,
    "global": 100.0,
    "spatial_mean": 50.0,
    "intermediate": 100.0,
    "causal": 100.0,
    "planning": 0.0,
    "procedural_mean": 66.67,
    "quantitative": 100.0,
    "overall": 66.67,
    "parse_failures": 1,
    "item": 6,
}


# --- ChangeIt ---------------------------------------------------------------------------------------

CI_TASK = "statelab_ci_demo_v1"
# id -> payload. Images: c-0 12x8, c-1 10x9, c-2 7x7 (written by the tests). c-0's box reaches past
# the image's right and bottom edges: clipped to x 8..12, y 4..8, a 4x4 crop. c-2's annotators
# answered nothing_to_label: it has no box, so its two crop queries are not asked.
CI_PAYLOADS = {
    "c-0": {
        "image": "ci/c0.png",
        "object": "apple",
        "state": "whole apple",
        "distractors": ["sliced apple", "peeled apple"],
        "bbox": [8, 4, 10, 10],
    },
    "c-1": {
        "image": "ci/c1.png",
        "object": "apple",
        "state": "sliced apple",
        "distractors": ["whole apple", "peeled apple"],
        "bbox": [0, 0, 5, 5],
    },
    "c-2": {
        "image": "ci/c2.png",
        "object": "door",
        "state": "open door",
        "distractors": ["closed door"],
        "bbox": "nothing_to_label",
    },
}
CI_IMAGE_SIZES = {"ci/c0.png": (12, 8), "ci/c1.png": (10, 9), "ci/c2.png": (7, 7)}
CI_CROP_SIZES = {"c-0": [4, 4], "c-1": [5, 5]}


def write_ci_images(src: Path) -> Path:
    """The ChangeIt items' images under `src` (a media folder for annotation's folder_media)."""
    for rel, size in CI_IMAGE_SIZES.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", size, (200, 60, 30)).save(src / rel)
    return src


def ci_lines() -> list[dict]:
    vocabulary = changeit_vocabulary(CI_PAYLOADS.values())  # the release's vocabulary, as a freeze has it
    return [release_line("changeit", item_id, p, vocabulary=vocabulary) for item_id, p in CI_PAYLOADS.items()]


# (id, query) -> the reply, written with the chosen label: {n} stands for that label's number among
# the query's candidates (their order is seeded). The release vocabulary: apple -> whole apple,
# sliced apple; door -> open door ("peeled apple" and "closed door" are only distractors).
CI_REPLIES = {
    ("c-0", "state:standard:full"): ("whole apple", "{n}"),  # right state
    ("c-0", "state:standard:crop"): ("sliced apple", "{n}"),  # right object, wrong state
    ("c-0", "state:distractor:full"): ("open door", "{n}"),  # wrong object
    ("c-0", "state:distractor:crop"): ("peeled apple", "Peeled apple."),  # label text; its own distractor
    ("c-1", "state:standard:full"): (None, "I am not sure."),  # unparseable
    ("c-1", "state:standard:crop"): ("sliced apple", "{n}"),  # right state
    ("c-1", "state:distractor:full"): ("sliced apple", "Answer: {n}"),  # right state
    ("c-1", "state:distractor:crop"): (None, ""),  # empty: unparseable
    ("c-2", "state:standard:full"): ("open door", "{n}."),  # right state
    ("c-2", "state:distractor:full"): ("whole apple", "{n}"),  # wrong object
}


def ci_replies(lines: list[dict]) -> dict[tuple[str, str], str]:
    """(id, query) -> reply text, the label numbers filled in from each query's candidate order."""
    options = {(line["id"], q): spec["options"] for line in lines for q, spec in line["resolved"].items()}
    out = {}
    for key, (label, text) in CI_REPLIES.items():
        out[key] = text.format(n=options[key].index(label) + 1) if label else text
    return out


# docs/protocols/changeit.md by hand, N = 3 items, every figure over the 3 items (c-2's crop queries have no
# document: wrong and parse failures, as a missing answer is in StateLab):
#   state  standard  full: c-0 yes, c-1 no (unparseable), c-2 yes  -> 2/3 = 66.67
#   state  standard  crop: c-0 no, c-1 yes, c-2 missing            -> 1/3 = 33.33
#   state  distractor full: c-0 no, c-1 yes, c-2 no                -> 1/3 = 33.33
#   state  distractor crop: c-0 no, c-1 no (empty), c-2 missing    -> 0/3 = 0
#   object standard  full: c-0 apple yes, c-1 no, c-2 door yes     -> 2/3 = 66.67
#   object standard  crop: c-0 sliced apple yes, c-1 yes, c-2 no   -> 2/3 = 66.67
#   object distractor full: c-0 open door no, c-1 yes, c-2 whole apple no -> 1/3 = 33.33
#   object distractor crop: c-0 peeled apple yes (a distractor of c-0), c-1 no, c-2 no -> 1/3 = 33.33
#   parse failures: c-1 standard full and distractor crop, c-2's two crops -> 4.
CI_SCORES = {
    "state_acc_standard_full": 66.67,
    "state_acc_standard_crop": 33.33,
    "state_acc_distractor_full": 33.33,
    "state_acc_distractor_crop": 0.0,
    "object_acc_standard_full": 66.67,
    "object_acc_standard_crop": 66.67,
    "object_acc_distractor_full": 33.33,
    "object_acc_distractor_crop": 33.33,
    "parse_failures": 4,
    "item": 3,
}
