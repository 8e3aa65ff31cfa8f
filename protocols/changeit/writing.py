"""A ChangeIt-Frames release written back in its authors' shape (docs/importing.md, "ChangeIt-Frames"),
and StateLab's own additions read again. Plain Python (no Django).

``write_release(lines, out_dir, open_media)`` writes, under ``out_dir/object-states/`` (so the
authors' scripts, which name their paths from the checkout, run in ``out_dir`` unchanged):

- ``ChangeIT-Subset-Images/<video>/frame_NNNN.jpg`` (items of the golden subset) and
  ``ChangeIT-Frames-Full/<video>/frame_NNNN.jpg`` (the others): the frames, copied as frozen;
- ``utils/annotations/<category>/<video>.fps1.csv`` (where the authors' ``utils/dicts.py`` reads
  them): ``second,label`` rows, no header, one per second from 0 to the video's last item frame's
  second (or to the end of the authors' file the items were read from), as ChangeIt's files are;
  an item's second carries 1 (initial state) or 3 (end state) after its verified state name; a
  second that is no item of the release takes its label from the authors' file as read
  (``extra.video_labels``, one digit per second, kept by the reader), else 0 (background);
- ``utils/classification_states.py``: the dicts ``q`` and ``a`` as Python literals, the way the
  authors' code imports them; ``a`` rebuilt from the items (the state proposed for each phase,
  the names a phase offered, the distractors), ``q`` the same names in one list per category;
- ``ChangeIT-Subset-Crop/<video>/cropped_frame_NNNN.png``: for golden-subset items with a box, the
  box cut out of the frame, lossless (so a reader finds it in its frame again, exactly);
- ``statelab_boxes.json`` (BOXES_FILE, StateLab's, beside the authors' files and never inside
  them): per item its id, category, video, frame, image, verified state name, tags, and box
  ``[x, y, width, height]`` in the frame's pixels. `apply_boxes` reads it back on import.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from PIL import Image, ImageOps

from protocols.kit.releases import FormatRefused, copy_media, media_parts

BOXES_FILE = "statelab_boxes.json"
BOXES_FORMAT = "statelab-changeit-boxes"
RELEASE_FOLDER = "object-states"
LABEL_FOLDER = "utils/annotations"
STATE_FILE = "utils/classification_states.py"
_ID = re.compile(r"^(?P<category>[^/]+)/(?P<video>[^/]+)/frame_(?P<frame>\d+)$")
_LABEL_OF = {"initial": 1, "end": 3, "terminal": 3}


@dataclass
class _Frame:
    """One item line, placed in the authors' tree."""

    ident: str
    category: str
    video: str
    frame: int
    folder: str
    image: str
    state: str
    distractors: list[str]
    phase: str | None
    choices: list[str]
    bbox: list[float] | None
    tags: list[str] = field(default_factory=list)
    video_labels: str = ""  # the authors' per-second labels of the video as read, one digit each

    @property
    def frame_name(self) -> str:
        return f"frame_{self.frame:04d}{Path(self.image).suffix or '.jpg'}"


def _placed(line: Mapping[str, Any], full: str, subset: str, golden_tag: str) -> _Frame:
    """Where an item line goes: its provenance (``extra``), else what its id says."""
    ident = str(line.get("id"))
    extra = line.get("extra") if isinstance(line.get("extra"), dict) else {}
    from_id = _ID.match(ident)
    category = extra.get("category") or (from_id and from_id["category"])
    video = extra.get("video") or (from_id and from_id["video"])
    frame = extra.get("frame")
    if not isinstance(frame, int) or isinstance(frame, bool):
        frame = int(from_id["frame"]) if from_id else None
    if not (category and video and frame and frame > 0):
        raise FormatRefused(
            f"item {ident}: the ChangeIt-Frames files need each item's category, video and frame number: "
            "extra.category, extra.video and extra.frame (items read from the authors' release carry them), "
            "or an id <category>/<video>/frame_NNNN"
        )
    tags = [t for t in line.get("tags") or [] if isinstance(t, str)]
    folder = extra.get("folder") if extra.get("folder") in (full, subset) else (subset if golden_tag in tags else full)
    phase = extra.get("phase") if extra.get("phase") in _LABEL_OF else None
    if phase is None and extra.get("label") in (1, 3):
        phase = "initial" if extra["label"] == 1 else "end"
    choices = [c for c in extra.get("state_choices") or [] if isinstance(c, str)]
    bbox = line.get("bbox") if isinstance(line.get("bbox"), list) else None
    return _Frame(
        ident=ident,
        category=str(category),
        video=str(video),
        frame=frame,
        folder=folder,
        image=str(line["image"]),
        state=str(line["state"]),
        distractors=[d for d in line.get("distractors") or [] if isinstance(d, str)],
        phase="end" if phase == "terminal" else phase,
        choices=choices,
        bbox=bbox,
        tags=tags,
        video_labels=labels if isinstance(labels := extra.get("video_labels"), str) and labels.isdigit() else "",
    )


def state_names(frames: list[_Frame]) -> dict[str, dict[str, list[str]]]:
    """``a`` rebuilt from the items: per category its initial and terminal names."""
    out: dict[str, dict[str, list[str]]] = {}
    for category in sorted({f.category for f in frames}):
        mine = [f for f in frames if f.category == category]
        every = list(dict.fromkeys(n for f in mine for n in [*f.distractors, f.state]))
        phases: dict[str, list[str]] = {}
        for phase in ("initial", "end"):
            of_phase = [f for f in mine if f.phase == phase]
            offered = next((f.choices for f in of_phase if f.choices), None)
            if offered:
                phases[phase] = list(offered)
            elif of_phase:  # one name: the state most of the phase's items carry
                phases[phase] = [Counter(f.state for f in of_phase).most_common(1)[0][0]]
        for phase, other in (("initial", "end"), ("end", "initial")):
            if phase not in phases and other in phases:
                phases[phase] = [n for n in every if n not in phases[other]]
        if not phases.get("initial") or not phases.get("end") or set(phases["initial"]) & set(phases["end"]):
            raise FormatRefused(
                f"category {category}: its initial and end state names cannot be told apart from the items "
                "(each needs extra.phase, initial or end, as items read from the authors' release have)"
            )
        out[category] = {"initial": phases["initial"], "terminal": phases["end"]}
    return out


def _label(f: _Frame, names: dict[str, list[str]]) -> int:
    if f.state in names["initial"]:
        return 1
    if f.state in names["terminal"]:
        return 3
    if f.phase is not None:
        return _LABEL_OF[f.phase]
    raise FormatRefused(f"item {f.ident}: state {f.state!r} is none of category {f.category}'s state names")


def write_release(
    lines: Iterable[Mapping[str, Any]],
    out_dir: Path,
    *,
    open_media: Callable[[str], BinaryIO] | None,
    full: str,
    subset: str,
    crops: str,
    golden_tag: str,
) -> list[Path]:
    """The release's item lines as the authors' files under ``out_dir/object-states``; the paths written."""
    frames = [_placed(line, full, subset, golden_tag) for line in lines]
    if not frames:
        raise FormatRefused("a ChangeIt-Frames release needs at least one item")
    names = state_names(frames)
    root = out_dir / RELEASE_FOLDER
    written: list[Path] = []
    seconds: dict[tuple[str, str], dict[int, tuple[int, str]]] = {}
    read_labels: dict[tuple[str, str], str] = {}
    images: dict[Path, str] = {}
    for f in frames:
        label = _label(f, names[f.category])
        second = f.frame - 1
        per_video = seconds.setdefault((f.category, f.video), {})
        if second in per_video and per_video[second][0] != label:
            raise FormatRefused(
                f"items {per_video[second][1]} and {f.ident}: second {second} of {f.category}/{f.video} "
                "labelled both initial and end state"
            )
        per_video[second] = (label, f.ident)
        if f.video_labels:
            read_labels.setdefault((f.category, f.video), f.video_labels)
        dest = root.joinpath(f.folder, *media_parts(f.video), f.frame_name)
        if images.setdefault(dest, f.image) != f.image:
            raise FormatRefused(f"item {f.ident}: frame {dest.relative_to(root)} is another item's with another image")
    if open_media is not None:
        for dest, rel in images.items():
            written.append(copy_media(open_media, rel, dest))
        written.extend(_crops(frames, root, subset, crops, open_media))
    for (category, video), labelled in sorted(seconds.items()):
        target = root.joinpath(LABEL_FOLDER, *media_parts(category), f"{video}.fps1.csv")
        target.parent.mkdir(parents=True, exist_ok=True)
        base = read_labels.get((category, video), "")
        rows = "".join(
            f"{s},{labelled[s][0] if s in labelled else (base[s] if s < len(base) else 0)}\n"
            for s in range(max(max(labelled) + 1, len(base)))
        )
        target.write_text(rows, encoding="utf-8", newline="")
        written.append(target)
    written.append(_write_states(root / STATE_FILE, names))
    written.append(_write_boxes(root / BOXES_FILE, frames))
    return written


def _crops(frames: list[_Frame], root: Path, subset: str, crops: str, open_media) -> list[Path]:
    """Golden-subset items with a box: the box cut out of the frame as decoded (EXIF orientation
    applied, as the box was drawn), saved lossless."""
    out = []
    for f in frames:
        if f.folder != subset or not f.bbox or len(f.bbox) != 4:
            continue
        x, y, w, h = (round(float(v)) for v in f.bbox)
        if w <= 0 or h <= 0:
            continue
        with open_media(f.image) as src, Image.open(src) as im:
            shown = ImageOps.exif_transpose(im).convert("RGB")
            cut = shown.crop((x, y, x + w, y + h))
        dest = root.joinpath(crops, *media_parts(f.video), f"cropped_frame_{f.frame:04d}.png")
        dest.parent.mkdir(parents=True, exist_ok=True)
        cut.save(dest, "PNG")
        out.append(dest)
    return out


def _write_states(path: Path, names: dict[str, dict[str, list[str]]]) -> Path:
    every = {c: [*n["initial"], *n["terminal"]] for c, n in names.items()}
    # JSON text of strings, lists and dicts is a Python literal (non-ASCII kept as is, not escaped).
    text = (
        f"# The state names of the ChangeIt-Frames categories, written by StateLab from a release.\n"
        f"q = {json.dumps(every, ensure_ascii=False, indent=2)}\n\n"
        f"a = {json.dumps(names, ensure_ascii=False, indent=4)}\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _write_boxes(path: Path, frames: list[_Frame]) -> Path:
    items = []
    for f in frames:
        entry: dict[str, Any] = {
            "id": f.ident,
            "category": f.category,
            "video": f.video,
            "frame": f.frame,
            "image": f"{f.folder}/{f.video}/{f.frame_name}",
            "state": f.state,
            "tags": f.tags,
        }
        if f.bbox:
            entry["bbox"] = f.bbox
        items.append(entry)
    document = {
        "format": BOXES_FORMAT,
        "version": 1,
        "about": "StateLab's additions to the ChangeIt-Frames files beside it: each item's verified state name, "
        "tags and box; not one of the authors' files",
        "box": "[x, y, width, height] in pixels of the frame image as shown (EXIF orientation applied), "
        "origin at its top-left corner",
        "items": items,
    }
    path.write_text(json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


def apply_boxes(lines: list[dict[str, Any]], root: Path, phases: Mapping[str, Mapping[str, list[str]]]) -> str | None:
    """A StateLab export read again: each line whose id ``statelab_boxes.json`` lists takes its box
    (pixels), its state name (one of its category's) and its tags; returns the report's sentence,
    or None when there is no such file."""
    path = root / BOXES_FILE
    if not path.is_file():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise FormatRefused(f"{BOXES_FILE}: not readable JSON ({exc.__class__.__name__})") from exc
    entries = document.get("items") if isinstance(document, dict) else None
    if document.get("format") != BOXES_FORMAT or not isinstance(entries, list):
        raise FormatRefused(f'{BOXES_FILE}: expected {{"format": "{BOXES_FORMAT}", "items": [...]}}')
    by_id = {e["id"]: e for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)}
    boxes = states = 0
    for line in lines:
        entry = by_id.get(line["id"])
        if entry is None:
            continue
        bbox = entry.get("bbox")
        if isinstance(bbox, list) and len(bbox) == 4 and all(isinstance(v, (int, float)) for v in bbox):
            line["bbox"] = list(bbox)
            boxes += 1
        names = phases[line["extra"]["category"]]
        everyone = list(dict.fromkeys([*names["initial"], *names["terminal"]]))
        state = entry.get("state")
        if isinstance(state, str) and state in everyone and state != line["state"]:
            line["state"] = state
            line["distractors"] = [n for n in everyone if n != state]
            states += 1
        tags = [t for t in entry.get("tags") or [] if isinstance(t, str)]
        if tags:
            line["tags"] = list(dict.fromkeys([*line.get("tags", []), *tags]))
    return (
        f"{BOXES_FILE} (a StateLab export): {boxes} boxes in pixels and {states} verified state names "
        f"applied, tags kept, for the {len(by_id)} items it lists"
    )
