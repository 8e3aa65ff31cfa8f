"""The documents of a release's lmms-eval task (`docs.jsonl`, written by lmms_eval.write_task): one
per query the release asks, in release order, each with StateLab's own prompt, its options in the
release's frozen order, its visuals (paths inside the task folder), the correct answer and the
item fields the breakdowns need. Plain Python, no Django.

ChangeIt, as StateLab's own runs ask it (inference/protocols/changeit.py): a crop query shows the
item's box cut out at export time (`crop_path`); a crop query of an item with no box (none
annotated, or `nothing_to_label` / `cannot_determine` in its place) has no document, as inference
fails that query, and the task's utils.py scores it as a missing answer.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import PurePosixPath
from typing import Any

from ..protocols import LETTERS, QUERY_KEYS, qa_shape

SUPPORTED = ("status", "changeit", "visualtrans", "m3verse")
CROPS = "statelab-crops"  # under media/: the ChangeIt box crops (a release path may not start with it)


class LmmsExportError(ValueError):
    """A release that cannot become an lmms-eval task (unsupported protocol, bad media path, …)."""


# --- prompts (StateLab's wording, as inference/protocols/*.py puts it, in one text block) --------

_STATUS_OSI = (
    "Look closely at the object in this photo. Which description matches the state it is in right now?\n"
    "{options}\nAnswer with the letter of the matching description (A or B) and nothing else."
)
_STATUS_IR = (
    "Here are two photos, labelled A and B, of the same object (photo A is the first image, photo B the "
    "second). Which photo shows {state}?\nAnswer with the letter of the photo (A or B) and nothing else."
)
_STATUS_SCI = (
    "The first photo was taken before and the second photo after something was done to an object. "
    "Which action turns the scene in the first photo into the scene in the second?\n"
    "{options}\nAnswer with the letter of the action ({letters}) and nothing else."
)
_VT_INTRO = "The first image shows a scene before a transformation and the second image shows it afterwards."
_VT_REPLY = {
    "choice": "Answer with the letter of the correct option ({letters}) and nothing else.",
    "count": "Answer with a single whole number and nothing else.",
    "set": "List every correct answer, separated by commas, and nothing else.",
}
_M3_INTRO = (
    "You are shown two videos of the same place, the first recorded before and the second after some "
    "things in it changed. Compare them to answer the question."
)
_M3_ONE = "Exactly one option is correct. Answer with its letter and nothing else."
_M3_ANY = (
    "One or more options may be correct. Answer with the letters of all correct options, separated by commas "
    "(for example A,C), and nothing else."
)
_CHANGEIT = (
    "This photo shows {article} {object}. Which of these labels describes the state the {object} is in?\n"
    "{options}\nAnswer with the number of the best label (1 to {n}) and nothing else."
)


def _lettered(options: list) -> str:
    return "\n".join(f"{LETTERS[i]}. {opt}" for i, opt in enumerate(options))


def _numbered(options: list) -> str:
    return "\n".join(f"{i + 1}. {opt}" for i, opt in enumerate(options))


def media_path(path: Any) -> str:
    rel = PurePosixPath(str(path))
    if not str(path) or rel.is_absolute() or ".." in rel.parts:
        raise LmmsExportError(f"media path {path!r} is not a relative path inside the release")
    if rel.parts[0] == CROPS:
        raise LmmsExportError(f"media path {path!r}: {CROPS}/ holds the task's box crops")
    return "media/" + str(rel)


def crop_path(item_id: str) -> str:
    """Where an item's box crop lies in the task folder (readable, and unique per item id)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", item_id)[:60]
    return f"media/{CROPS}/{safe}-{hashlib.sha256(item_id.encode('utf-8')).hexdigest()[:8]}.png"


def has_box(line: dict) -> bool:
    """Whether the item has a box to crop (not none, nor an annotator's outcome in its place)."""
    return isinstance(line.get("bbox"), list)


def _paths(value: Any) -> list[str]:
    return [media_path(v) for v in (value if isinstance(value, list) else [value]) if v]


def _doc(
    line: dict,
    protocol: str,
    query: str,
    *,
    prompt: str,
    options: list,
    fmt: str,
    visuals: list[str],
    kind: str,
    target: Any,
    meta: dict,
) -> dict:
    return {
        "id": str(line["id"]),
        "query": query,
        "protocol": protocol,
        "split": line.get("split") or "test",
        "tags": [str(t) for t in line.get("tags") or []],
        "prompt": prompt,
        "options": [str(o) for o in options],
        "format": fmt,
        "visuals": visuals,
        "visual_kind": kind,
        "target": json.dumps(target, ensure_ascii=False),
        "meta": json.dumps(meta, ensure_ascii=False, sort_keys=True),
    }


def task_documents(protocol: str, line: dict, settings: dict | None = None) -> list[dict]:
    """The documents of one release line: one per query, in QUERY_KEYS order."""
    resolved = line.get("resolved") or {}
    if protocol == "status":
        a, b = _paths(line["image_a"]), _paths(line["image_b"])
        meta = {"category": line.get("category"), "difference": line.get("difference")}
        docs = []
        for key in QUERY_KEYS["status"]:
            q = resolved[key]
            options = q["options"]
            if key in ("osi_a", "osi_b"):
                prompt, visuals = _STATUS_OSI.format(options=_lettered(options)), a if key == "osi_a" else b
            elif key in ("ir_a", "ir_b"):
                state = line["state_a"] if key == "ir_a" else line["state_b"]
                prompt, visuals, options = _STATUS_IR.format(state=state), a + b, ["photo A", "photo B"]
            else:
                letters = ", ".join(LETTERS[: len(options)])
                prompt, visuals = _STATUS_SCI.format(options=_lettered(options), letters=letters), a + b
            docs.append(
                _doc(
                    line,
                    protocol,
                    key,
                    prompt=prompt,
                    options=options,
                    fmt="choice",
                    visuals=visuals,
                    kind="image",
                    target=q["answer"],
                    meta=meta,
                )
            )
        return docs
    if protocol == "changeit":
        obj = str(line["object"])
        full = _paths(line["image"])
        docs = []
        for key in QUERY_KEYS["changeit"]:
            _, strategy, condition = key.split(":")
            if condition == "crop" and not has_box(line):
                continue  # inference fails this query: no document, scored as a missing answer
            q = resolved[key]
            options = q["options"]
            article = "an" if obj[:1].lower() in "aeiou" else "a"
            prompt = _CHANGEIT.format(article=article, object=obj, options=_numbered(options), n=len(options))
            meta = {
                "object": obj,
                "distractors": [str(d) for d in line.get("distractors") or []],
                "strategy": strategy,
                "condition": condition,
            }
            visuals = [crop_path(str(line["id"]))] if condition == "crop" else full
            docs.append(
                _doc(
                    line,
                    protocol,
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
    if protocol == "visualtrans":
        q = resolved["qa"]
        options = q["options"]
        fmt = line.get("format") or ("choice" if options else "count")
        images = _paths(line.get("images") or [])
        labels = ["Image 1 (initial state)", "Image 2 (final state)"] + [
            f"Image {i + 1} (candidate)" for i in range(2, len(images))
        ]
        prompt = f"{_VT_INTRO}\nThe images, in order: {', '.join(labels[: len(images)])}.\nQuestion: {line['question']}"
        if fmt == "choice":
            prompt += (
                "\n"
                + _lettered(options)
                + "\n"
                + _VT_REPLY["choice"].format(letters=", ".join(LETTERS[: len(options)]))
            )
        else:
            prompt += "\n" + _VT_REPLY[fmt]
        meta = {"subtask": line.get("subtask"), "scene": line.get("scene")}
        return [
            _doc(
                line,
                protocol,
                "qa",
                prompt=prompt,
                options=options,
                fmt=fmt,
                visuals=images,
                kind="image",
                target=q["answer"],
                meta=meta,
            )
        ]
    if protocol == "m3verse":
        q = resolved["qa"]
        options = q["options"]
        rule = _M3_ANY if qa_shape(protocol=protocol, payload=line, project_settings=settings)["multiple"] else _M3_ONE
        prompt = f"{_M3_INTRO}\nQuestion: {line['question']}\n{_lettered(options)}\n{rule}"
        meta = {
            "context": line.get("context"),
            "capabilities": list(line.get("capabilities") or []),
            "hallucination": bool(line.get("hallucination")),
        }
        visuals = _paths(line["video_before"]) + _paths(line["video_after"])
        return [
            _doc(
                line,
                protocol,
                "qa",
                prompt=prompt,
                options=options,
                fmt="letters",
                visuals=visuals,
                kind="video",
                target=q["answer"],
                meta=meta,
            )
        ]
    raise LmmsExportError(f"protocol {protocol!r} has no lmms-eval task (supported: {', '.join(SUPPORTED)})")
