"""VisualTrans's release as its authors publish it, read and written back
(docs/protocols/visualtrans.md, "The authors' files"; the interface: protocols/kit/releases.py).

``VisualTrans.json`` is one JSON array of rows without ids: ``task_type`` (six kinds), ``scene``,
``images`` (paths relative to an image folder: initial, final, then candidates), ``question``
(the options, if any, inside its text) and ``label`` (a letter, a count as text, or a
comma-separated list of object names); planning rows add ``mask`` (``first`` / ``last``: which
step the question asks about). The authors' scorer decides a row's kind by the label and the
task type: a count row compares the reply with the label as text, a letter label is a choice, any
other label is a set of names compared without order or repeats.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from protocols.base import LETTERS
from protocols.kit.releases import (
    Conversion,
    FormatRefused,
    ReleaseFormat,
    copy_media,
    first_bytes,
    media_parts,
    starts_with_array,
)

from .question_text import LAYOUTS, SplitQuestion, join_options, split_options

FILE_NAME = "VisualTrans.json"
IMAGES_FOLDER = "images"  # where write() puts the images: the authors' --image_base
# The authors' task types (their scorer's groups) and the protocol's subtasks.
SUBTASK_OF = {
    "spatial_fine_grained": "fine_grained",
    "spatial_global": "global",
    "procedural_interm": "intermediate",
    "procedural_causal": "causal",
    "procedural_plan": "planning",
    "count": "quantitative",
}
TASK_TYPE_OF = {subtask: task_type for task_type, subtask in SUBTASK_OF.items()}
AUTHOR_KEYS = ("task_type", "scene", "images", "question", "label", "mask")
_COUNT = re.compile(r"\s*\d+\s*")
_LETTER = re.compile(r"\s*[A-Za-z]\s*")
_SHOWN_PROBLEMS = 10
_EXPECTED = "one JSON array of question rows"


def _rows(n: int) -> str:
    return f"{n} row" if n == 1 else f"{n} rows"


def item_id(scene: str | None, images: list[str], question: str) -> str:
    """The item's id from its content: the scene, then a hash of the scene, the image paths and
    the question text (whitespace runs collapsed), so a later release of the file gives the same
    row the same id, wherever the row stands in it."""
    key = json.dumps([scene or "", images, " ".join(question.split())], ensure_ascii=False, separators=(",", ":"))
    return f"{scene or 'visualtrans'}-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:12]}"


class _Problems:
    """What is wrong with the rows, refused together in one message."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def add(self, row: int, message: str) -> None:
        self.found.append(f"row {row}: {message}")

    def refuse_if_any(self) -> None:
        if self.found:
            shown = "; ".join(self.found[:_SHOWN_PROBLEMS])
            more = len(self.found) - _SHOWN_PROBLEMS
            tail = f" (and {more} more)" if more > 0 else ""
            raise FormatRefused(f"{FILE_NAME}: {len(self.found)} rows cannot be read: {shown}{tail}")


def _answer(row: Mapping[str, Any], split_options_found: tuple[str, ...]) -> tuple[str, Any] | str:
    """(format, answer) of a row, or why its label cannot be read."""
    label, task_type = row["label"], row["task_type"]
    if isinstance(label, int) and not isinstance(label, bool):
        label = str(label)
    if not isinstance(label, str) or not label.strip():
        return f"label must be a non-empty text, found {label!r}"
    if task_type == "count":
        if not _COUNT.fullmatch(label):
            return f"a count row's label must be a whole number, found {label!r}"
        return "count", int(label)
    if split_options_found:
        last = LETTERS[len(split_options_found) - 1]
        if not _LETTER.fullmatch(label):
            return f"the question lists options A–{last} but the label {label!r} is not a letter"
        letter = label.strip().upper()
        if letter not in LETTERS[: len(split_options_found)]:
            return f"label {letter!r} names no option (the question lists A–{last})"
        return "choice", letter
    if _LETTER.fullmatch(label):
        return f"label {label.strip()!r} is a letter but the question text lists no options 'A. …', 'B. …'"
    names = [" ".join(part.split()) for part in label.split(",") if part.strip()]
    return "set", names


def _row_problem(row: Any) -> str | None:
    if not isinstance(row, dict):
        return f"must be a JSON object, found {type(row).__name__}"
    missing = [k for k in ("task_type", "images", "question", "label") if k not in row]
    if missing:
        return f"missing {', '.join(missing)}"
    if row["task_type"] not in SUBTASK_OF:
        return f"task_type {row['task_type']!r} is none of {', '.join(SUBTASK_OF)}"
    images = row["images"]
    if not isinstance(images, list) or len(images) < 2 or not all(isinstance(p, str) and p.strip() for p in images):
        return "images must be a list of at least 2 relative image paths"
    if not isinstance(row["question"], str) or not row["question"].strip():
        return "question must be a non-empty text"
    if "scene" in row and not (isinstance(row["scene"], str) and row["scene"].strip()):
        return "scene must be a non-empty text"
    return None


def _line(row: Mapping[str, Any], split: SplitQuestion, fmt: str, answer: Any) -> dict[str, Any]:
    """The protocol's item line of one readable row."""
    scene = row.get("scene")
    line: dict[str, Any] = {
        "id": item_id(scene, row["images"], row["question"]),
        "images": list(row["images"]),
        "question": split.stem if fmt == "choice" else row["question"],
        "format": fmt,
    }
    if fmt == "choice":
        line["options"] = list(split.options)
    line.update(answer=answer, subtask=SUBTASK_OF[row["task_type"]])
    if scene is not None:
        line["scene"] = scene
    extra = {k: v for k, v in row.items() if k not in AUTHOR_KEYS or k == "mask"}
    if fmt == "choice":
        extra["options_layout"] = split.layout
        if join_options(split.stem, split.options, split.layout) != row["question"]:
            # Spacing the layout does not reproduce ("block.D. Stack"): kept to write it back.
            extra["question_text"] = row["question"]
    if extra:
        line["extra"] = extra
    return line


def _media_root(path: Path, rows: list[dict[str, Any]], given: Path | None) -> tuple[Path | None, str | None]:
    """The folder the image paths are relative to: the one given, else the file's folder or its
    ``images`` folder, whichever holds the first row's first image."""
    if given is not None:
        return given, None
    first = rows[0]["images"][0] if rows else None
    for folder in (path.parent, path.parent / IMAGES_FOLDER):
        if first and (folder / first).is_file():
            return folder, f"images found under {folder.name or folder}/"
    return None, None


class VisualTransJson(ReleaseFormat):
    name = "visualtrans"
    label = "VisualTrans.json (WangYipu2002/VisualTrans)"
    kind = "items"
    writes = True

    def detect(self, path: Path) -> bool:
        if not path.is_file() or not starts_with_array(path):
            return False
        head = first_bytes(path, 1 << 16)
        return all(key in head for key in (b'"task_type"', b'"images"', b'"question"', b'"label"'))

    def read(self, path: Path, *, media_root: Path | None = None) -> Conversion:
        try:
            with open(path, encoding="utf-8-sig") as fh:
                rows = json.load(fh)
        except UnicodeDecodeError as exc:
            raise FormatRefused(f"{path.name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        except json.JSONDecodeError as exc:
            raise FormatRefused(
                f"{path.name}: not JSON ({exc.msg}, line {exc.lineno} column {exc.colno}); "
                f"expected {FILE_NAME}: {_EXPECTED}"
            ) from exc
        if not isinstance(rows, list):
            found = type(rows).__name__
            raise FormatRefused(f"{path.name}: found a JSON {found}, expected {FILE_NAME}: {_EXPECTED}")
        if not rows:
            raise FormatRefused(f"{path.name}: an empty array; expected {FILE_NAME}'s question rows")
        problems = _Problems()
        lines: list[dict[str, Any]] = []
        seen: dict[str, tuple[int, Any]] = {}
        duplicates: list[str] = []
        formats: Counter[str] = Counter()
        n_options: Counter[int] = Counter()
        none_sets = 0
        for number, row in enumerate(rows, start=1):
            problem = _row_problem(row)
            if problem is None:
                split = split_options(row["question"])
                read = _answer(row, split.options)
                if isinstance(read, str):
                    problem = read
            if problem is not None:
                problems.add(number, problem)
                continue
            fmt, answer = read
            line = _line(row, split, fmt, answer)
            earlier = seen.get(line["id"])
            if earlier is not None:
                if earlier[1] == row:
                    duplicates.append(f"row {number} repeats row {earlier[0]}")
                else:
                    differing = sorted(k for k in set(row) | set(earlier[1]) if row.get(k) != earlier[1].get(k))
                    problems.add(
                        number,
                        f"asks row {earlier[0]}'s question on the same scene and images but differs in "
                        f"{', '.join(differing)}",
                    )
                continue
            seen[line["id"]] = (number, row)
            formats[fmt] += 1
            if fmt == "choice":
                n_options[len(line["options"])] += 1
            none_sets += fmt == "set" and answer == ["none"]
            lines.append(line)
        problems.refuse_if_any()
        root, found_where = _media_root(path, lines, media_root)
        notes = [
            f"{_rows(len(rows))} read into {len(lines)} items: {formats['choice']} choice, {formats['count']} count, "
            f"{formats['set']} set questions",
            "options split out of the question text ("
            + ", ".join(f"{_rows(n)} with {k} options" for k, n in sorted(n_options.items(), reverse=True))
            + "); the <imageN> references kept in the question and options",
            "counts typed as whole numbers; comma-separated labels read as sets of object names",
            "ids made from the content: the scene and a hash of scene, images and question",
            "task_type mapped to subtask; mask and any other field of the authors kept in extra",
        ]
        if none_sets:
            notes.append(f"{_rows(none_sets)} labelled 'none' (no object matches): the one-name set ['none']")
        if duplicates:
            notes.append(f"{_rows(len(duplicates))} repeating another exactly, imported once ({'; '.join(duplicates)})")
        if found_where:
            notes.append(found_where)
        return Conversion(lines=lines, media_root=root, notes=notes)

    def write(
        self,
        lines: Iterable[Mapping[str, Any]],
        out_dir: Path,
        *,
        open_media: Callable[[str], BinaryIO] | None = None,
    ) -> list[Path]:
        rows = [_row(line) for line in lines]
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / FILE_NAME
        target.write_text(json.dumps(rows, ensure_ascii=False, indent=4) + "\n", encoding="utf-8")
        written = [target]
        if open_media is not None:
            copied: set[str] = set()
            for row in rows:
                for rel in row["images"]:
                    if rel not in copied:
                        copied.add(rel)
                        dest = (out_dir / IMAGES_FOLDER).joinpath(*media_parts(rel))
                        written.append(copy_media(open_media, rel, dest))
        return written


def _row(line: Mapping[str, Any]) -> dict[str, Any]:
    """One item line back as the authors' row."""
    fmt, answer, ident = line.get("format"), line.get("answer"), line.get("id")
    subtask = line.get("subtask")
    if answer is None or subtask not in TASK_TYPE_OF:
        raise FormatRefused(
            f"item {ident}: {FILE_NAME} needs a label and a task type on every row; "
            "export verified items (with answer and subtask)"
        )
    extra = dict(line.get("extra") or {})
    options = list(line.get("options") or [])
    question = line["question"]
    if fmt == "choice":
        original = extra.get("question_text")
        kept = split_options(original) if isinstance(original, str) else None
        if kept is not None and kept.stem == question and list(kept.options) == options:
            question = original  # unchanged since the import: its own spacing
        else:
            layout = extra.get("options_layout")
            question = join_options(question, options, layout if layout in LAYOUTS else "lines")
        label = str(answer)
    elif fmt == "count":
        label = str(answer)
    else:
        label = ", ".join(answer)
    row: dict[str, Any] = {"task_type": TASK_TYPE_OF[subtask]}
    if line.get("scene") is not None:
        row["scene"] = line["scene"]
    row.update(images=list(line["images"]), question=question, label=label)
    for key in ("options_layout", "question_text"):
        extra.pop(key, None)
    row.update(extra)
    return row


FORMATS = (VisualTransJson(),)
