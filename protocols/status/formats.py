"""The authors' release of STATUS Bench, read as published and written back (protocols/kit/releases.py;
docs/protocols/status.md, "The authors' release"). Plain Python, no Django.

The release is one file, ``STATUS_Bench.json``: a JSON array of rows ``id`` (a number),
``caption_0`` / ``caption_1`` (the object's state in each image), ``dataset``, ``video_id``,
``frame_0`` / ``frame_1`` (where in which video the images were taken), ``diff_cap``
(``{"answer", "captions"}``: four change texts and the index of the right one) and ``image_0`` /
``image_1`` (image names without extension). The authors' frame extractor writes each image as
``images/<name>.png`` in the folder of the file, so that folder is the media root.

A row becomes one item line: the captions the two states, the right caption the change, the other
three the distractors (in the release's order), the images ``images/<name>.png``. What the row
holds besides (the id as published, the source video and frames, the image names, the right
caption's position, any key the release adds) is kept under the line's ``extra``; writing a
release back puts it where it came from, so an unedited release writes the authors' bytes again.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from protocols.fields import check_media_path
from protocols.kit.releases import (
    Conversion,
    FormatRefused,
    ReleaseFormat,
    first_bytes,
    read_json,
    starts_with_array,
)

RELEASE_FILE = "STATUS_Bench.json"
IMAGE_DIR = "images"
IMAGE_SUFFIX = ".png"
# The keys of a row, in the authors' order (the order a written release keeps).
AUTHOR_KEYS = (
    "id",
    "caption_0",
    "caption_1",
    "dataset",
    "video_id",
    "frame_0",
    "frame_1",
    "diff_cap",
    "image_0",
    "image_1",
)
DIFF_CAP_KEYS = ("answer", "captions")
N_CAPTIONS = 4  # the right change and three distractors
# Listed in a refusal before "and N more".
SHOWN_PROBLEMS = 10
EXPECTED = (
    "the authors' STATUS_Bench.json: a JSON array of objects with "
    + ", ".join(AUTHOR_KEYS)
    + ' (diff_cap: {"answer": index, "captions": [4 texts]})'
)
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,150}$")


def _describe(value: Any) -> str:
    """A JSON value's shape in a few words, for a refusal."""
    if isinstance(value, dict):
        keys = ", ".join(list(map(str, value))[:8]) or "none"
        return f"a JSON object (keys: {keys})"
    if isinstance(value, list):
        return "a JSON array"
    if isinstance(value, bool) or value is None:
        return f"JSON {json.dumps(value)}"
    if isinstance(value, (int, float)):
        return "a JSON number"
    return "a JSON string"


def _nonempty_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def image_path(name: str) -> str:
    """The media path (relative to the media root) of an image the release names."""
    return f"{IMAGE_DIR}/{name}{IMAGE_SUFFIX}"


def release_file(path: Path) -> Path | None:
    """The release file a path names: the file itself, or STATUS_Bench.json in the folder (or in its
    Bench/ folder, as the authors' repository lays it out); None for a folder without one."""
    path = Path(path)
    if path.is_dir():
        for candidate in (path / RELEASE_FILE, path / "Bench" / RELEASE_FILE):
            if candidate.is_file():
                return candidate
        return None
    return path


def _row_problems(row: Any) -> list[str]:
    """Every reason one row cannot be read (all of them, in key order)."""
    if not isinstance(row, dict):
        return [f"{_describe(row)} found, expected an object"]
    out = []
    rid = row.get("id")
    if not (_is_int(rid) or _nonempty_text(rid)):
        out.append("id: must be the row's number" + ("" if "id" in row else " (missing)"))
    for key in ("caption_0", "caption_1"):
        if not _nonempty_text(row.get(key)):
            out.append(f"{key}: must be a non-empty text" + ("" if key in row else " (missing)"))
    diff = row.get("diff_cap")
    if not isinstance(diff, dict):
        out.append(
            f'diff_cap: must be {{"answer", "captions"}}, found {_describe(diff) if "diff_cap" in row else "none"}'
        )
    else:
        captions = diff.get("captions")
        if not isinstance(captions, list) or len(captions) != N_CAPTIONS:
            found = f"{len(captions)} texts" if isinstance(captions, list) else _describe(captions)
            out.append(
                f"diff_cap.captions: must hold {N_CAPTIONS} texts (the change and three distractors), found {found}"
            )
        elif not all(_nonempty_text(c) for c in captions):
            out.append("diff_cap.captions: every caption must be a non-empty text")
        answer = diff.get("answer")
        if not _is_int(answer) or not 0 <= answer < N_CAPTIONS:
            out.append(
                f"diff_cap.answer: must be the index (0-{N_CAPTIONS - 1}) of the right caption, found {answer!r}"
            )
    for key in ("image_0", "image_1"):
        name = row.get(key)
        if not _nonempty_text(name):
            out.append(f"{key}: must be an image name (without extension)" + ("" if key in row else " (missing)"))
        elif reason := check_media_path(image_path(name)):
            out.append(f"{key}: {reason}")
    return out


def _line(row: dict[str, Any]) -> dict[str, Any]:
    """The item line of a readable row; ``extra``: the row less what the item's fields hold."""
    diff = row["diff_cap"]
    captions, answer = diff["captions"], diff["answer"]
    extra = {k: v for k, v in row.items() if k not in ("caption_0", "caption_1", "diff_cap")}
    extra["diff_cap"] = {k: v for k, v in diff.items() if k != "captions"}
    return {
        "id": str(row["id"]),
        "image_a": image_path(row["image_0"]),
        "image_b": image_path(row["image_1"]),
        "state_a": row["caption_0"],
        "state_b": row["caption_1"],
        "change": captions[answer],
        "change_distractors": [c for i, c in enumerate(captions) if i != answer],
        "extra": extra,
    }


def _refusal(name: str, problems: list[str], where: str = "rows") -> FormatRefused:
    shown = "; ".join(problems[:SHOWN_PROBLEMS])
    more = f"; and {len(problems) - SHOWN_PROBLEMS} more" if len(problems) > SHOWN_PROBLEMS else ""
    return FormatRefused(f"{name}: {len(problems)} problem(s) in its {where}: {shown}{more}")


class StatusBench(ReleaseFormat):
    name = "status-bench"
    label = "STATUS_Bench.json (mmaiLab/STATUS_Bench)"
    kind = "items"
    writes = True

    def detect(self, path: Path) -> bool:
        found = release_file(path)
        if found is None or not found.is_file() or not starts_with_array(found):
            return False
        head = first_bytes(found)
        return b'"diff_cap"' in head and b'"caption_0"' in head

    # --- reading -------------------------------------------------------------------------------
    def read(self, path: Path, *, media_root: Path | None = None) -> Conversion:
        found = release_file(path)
        if found is None:
            raise FormatRefused(
                f"{Path(path).name}: a folder without {RELEASE_FILE} (nor Bench/{RELEASE_FILE}); expected {EXPECTED}"
            )
        name = found.name
        rows = read_json(found, EXPECTED)
        if not isinstance(rows, list):
            raise FormatRefused(f"{name}: {_describe(rows)} found; expected {EXPECTED}")
        if not rows:
            raise FormatRefused(f"{name}: an empty JSON array; expected {EXPECTED}, at least one row")
        first = rows[0]
        if not isinstance(first, dict) or not {"caption_0", "diff_cap"} & set(first):
            # Not the authors' rows at all: one message, not one per row.
            raise FormatRefused(f"{name}: a JSON array whose first row is {_describe(first)}; expected {EXPECTED}")
        if "img_0" in first and "image_0" not in first:
            raise FormatRefused(
                f"{name}: rows name their images img_0 / img_1 (an earlier revision of the release, whose "
                f"names the authors' extract_frames.py does not read); expected the current release, {EXPECTED}"
            )
        problems = [f"row {n} ({_row_label(row)}): {p}" for n, row in enumerate(rows, 1) for p in _row_problems(row)]
        if problems:
            raise _refusal(name, problems)
        lines = [_line(row) for row in rows]
        root = Path(media_root) if media_root is not None else found.parent
        return Conversion(lines=lines, media_root=root, notes=self._notes(found, rows, root))

    def _notes(self, found: Path, rows: list[dict[str, Any]], root: Path) -> list[str]:
        notes = [
            f"read {len(rows)} rows of {found.name}, the authors' STATUS Bench release",
            "caption_0 -> state_a, caption_1 -> state_b; diff_cap.captions[diff_cap.answer] -> change, "
            "the other three captions -> change_distractors (in the release's order)",
            f"image_0 / image_1 -> {IMAGE_DIR}/<name>{IMAGE_SUFFIX} under the media root ({root})",
            "kept under extra (stored with each item, written back on export): id as published, dataset, "
            "video_id, frame_0, frame_1, image_0, image_1, diff_cap.answer",
            "category and difference are not in the release: the items are complete without them, and the "
            "board shows no category / difference tables until items carry them",
        ]
        unknown = sorted({k for row in rows for k in row if k not in AUTHOR_KEYS})
        unknown += sorted({f"diff_cap.{k}" for row in rows for k in row["diff_cap"] if k not in DIFF_CAP_KEYS})
        if unknown:
            notes.append(f"keys the authors' format does not name, kept under extra: {', '.join(unknown)}")
        repeated = [_row_label(row) for row in rows if len(set(row["diff_cap"]["captions"])) < N_CAPTIONS]
        if repeated:
            notes.append(
                f"{len(repeated)} row(s) list one caption twice in diff_cap.captions "
                f"({', '.join(repeated)}); kept as published"
            )
        if not (root / IMAGE_DIR).is_dir():
            notes.append(
                f"no {IMAGE_DIR}/ folder under the media root ({root}): extract the frames with the authors' "
                "extract_frames.py --bench first, or give the folder holding images/ as the media root"
            )
        return notes

    # --- writing -------------------------------------------------------------------------------
    def write(
        self,
        lines: Iterable[Mapping[str, Any]],
        out_dir: Path,
        *,
        open_media: Callable[[str], BinaryIO] | None = None,
    ) -> list[Path]:
        """STATUS_Bench.json (and, with ``open_media``, images/<name>.png) in ``out_dir``; all or
        nothing: an unwritable line refuses the whole release before a file is made."""
        out_dir = Path(out_dir)
        rows, media = rows_for_release(lines)
        # A release lists its items by their id as text ("10" before "2"); the authors' file is in
        # the order of its integer ids. Rows with an integer id come first in that order, any
        # others (items made in the project) after them as the release lists them.
        rows.sort(key=lambda row: (0, row["id"]) if _int_id(row) else (1, 0))
        targets = [out_dir / RELEASE_FILE] + ([out_dir / IMAGE_DIR] if open_media is not None else [])
        taken = [t.name for t in targets if t.exists()]
        if taken:
            raise FormatRefused(f"{out_dir}: holds {' and '.join(taken)} already; write a release into a new folder")
        out_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".status-bench-", dir=out_dir))
        try:
            written = []
            if open_media is not None:
                (staging / IMAGE_DIR).mkdir()
                for image_name, source in media.items():
                    _copy_png(open_media, source, staging / IMAGE_DIR / f"{image_name}{IMAGE_SUFFIX}")
                    written.append(out_dir / IMAGE_DIR / f"{image_name}{IMAGE_SUFFIX}")
            # As the authors' file is laid out: four-space indent, ASCII escapes, no final newline.
            (staging / RELEASE_FILE).write_text(json.dumps(rows, indent=4), encoding="utf-8")
            if open_media is not None:
                os.replace(staging / IMAGE_DIR, out_dir / IMAGE_DIR)
            os.replace(staging / RELEASE_FILE, out_dir / RELEASE_FILE)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return [out_dir / RELEASE_FILE, *written]


def _int_id(row: Mapping[str, Any]) -> bool:
    return isinstance(row.get("id"), int) and not isinstance(row.get("id"), bool)


def _row_label(row: Any) -> str:
    rid = row.get("id") if isinstance(row, dict) else None
    return f"id {rid!r}" if rid is not None else "no id"


def rows_for_release(lines: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The authors' rows of a release's item lines, and image name -> media path of the images they
    name. Refuses (all problems in one message) lines that are not complete STATUS items and two
    lines whose images would share one name."""
    rows: list[dict[str, Any]] = []
    media: dict[str, str] = {}
    problems: list[str] = []
    for n, line in enumerate(lines, 1):
        if set(line) == {"release"}:  # a JSONL export's header line
            continue
        missing = [k for k in ("id", "image_a", "image_b", "state_a", "state_b", "change") if not line.get(k)]
        distractors = line.get("change_distractors")
        if not isinstance(distractors, list) or len(distractors) != N_CAPTIONS - 1:
            missing.append("change_distractors (three texts)")
        if missing:
            problems.append(f"line {n} (id {line.get('id')!r}): a STATUS_Bench.json row needs {', '.join(missing)}")
            continue
        row = _row(line)
        for key, field in (("image_0", "image_a"), ("image_1", "image_b")):
            source = media.setdefault(row[key], line[field])
            if source != line[field]:
                problems.append(
                    f"line {n} (id {line['id']!r}): {key} {row[key]!r} names {line[field]} while an earlier line's "
                    f"{row[key]!r} is {source}; two images cannot share one name"
                )
        rows.append(row)
    if problems:
        raise _refusal("release", problems, "lines")
    return rows, media


def _row(line: Mapping[str, Any]) -> dict[str, Any]:
    """One line as the authors' row: their keys in their order, then keys only ``extra`` holds."""
    extra = line.get("extra") if isinstance(line.get("extra"), Mapping) else {}
    item_id = str(line["id"])
    published = extra.get("id")
    rid: Any = published if _is_int(published) and str(published) == item_id else item_id
    change, distractors = line["change"], list(line["change_distractors"])
    diff_extra = extra.get("diff_cap") if isinstance(extra.get("diff_cap"), Mapping) else {}
    position = diff_extra.get("answer")
    if _is_int(position) and 0 <= position <= len(distractors):
        captions = [*distractors[:position], change, *distractors[position:]]
    else:
        # No recorded position (an item made in the project): alphabetical, as the authors' captions are.
        captions = sorted([change, *distractors])
        position = captions.index(change)
    names = [
        _image_name(extra.get(f"image_{k}"), line[field], item_id, k) for k, field in enumerate(("image_a", "image_b"))
    ]
    row: dict[str, Any] = {
        "id": rid,
        "caption_0": line["state_a"],
        "caption_1": line["state_b"],
        "dataset": extra.get("dataset"),
        "video_id": extra.get("video_id"),
        "frame_0": extra.get("frame_0"),
        "frame_1": extra.get("frame_1"),
        "diff_cap": {
            "answer": position,
            "captions": captions,
            **{k: diff_extra[k] for k in sorted(diff_extra) if k not in DIFF_CAP_KEYS},
        },
        "image_0": names[0],
        "image_1": names[1],
    }
    # Keys only extra holds (a later release's own): after the authors' keys, in name order (a
    # stored extra keeps no key order).
    row.update({k: extra[k] for k in sorted(extra) if k not in AUTHOR_KEYS})
    return row


def _image_name(published: Any, media_path: str, item_id: str, k: int) -> str:
    """The name an image is written under: the release's own name where it has one, else one made
    from the item id (``<id>_0`` / ``<id>_1``, as the authors' ``ex_0000_0``), kept to safe file
    name characters (a name that had to change gets a short hash of the id, so two stay apart)."""
    if isinstance(published, str) and _SAFE_NAME.match(published) and media_path == image_path(published):
        return published
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", item_id).lstrip(".") or "item"
    if safe != item_id:
        safe = f"{safe[:120]}-{hashlib.sha256(item_id.encode()).hexdigest()[:8]}"
    return f"{safe}_{k}"


def _copy_png(open_media: Callable[[str], BinaryIO], source: str, target: Path) -> None:
    """One image as PNG: a PNG's bytes unchanged, any other image converted (the authors' images
    are PNG files and their names say so)."""
    try:
        with open_media(source) as fh:
            data = fh.read()
    except OSError as exc:
        raise FormatRefused(f"{source}: the release's image cannot be read ({exc})") from exc
    if data.startswith(_PNG_MAGIC):
        target.write_bytes(data)
        return
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as img:
            img.save(target, format="PNG")
    except (OSError, ValueError) as exc:
        raise FormatRefused(f"{source}: not an image Pillow can read ({exc}); expected the item's image") from exc


FORMATS = (StatusBench(),)
