"""The authors' files of ChangeIt-Frames (docs/protocols/changeit.md, "The authors' files"), read as
published: the frames, crops and state names of the paper's release with the per-second labels of
the ChangeIt videos. Plain Python (no Django); the interface: protocols/kit/releases.py.

The release folder (the ``object-states`` folder of the authors' repository, or the repository
itself) holds:

- ``ChangeIT-Frames-Full/<video>/frame_NNNN.jpg`` and ``ChangeIT-Subset-Images/<video>/frame_NNNN.jpg``:
  one frame per second of a video, frame N showing second N − 1 (the authors look a frame's label
  up at row N − 1 of its video's labels); the subset is the golden subset the paper's annotators
  verified and boxed (its frames are not repeated in the full folder);
- ``ChangeIT-Subset-Crop/<video>/cropped_frame_NNNN.jpg``: the boxed object cut out of frame N;
- ``utils/classification_states.py``: the state names as Python dicts, ``a`` (category ->
  ``{"initial": [...], "terminal": [...]}``) and ``q`` (category -> every state name). Read with
  ``ast`` (the file is never executed);
- ``annotations/<category>/<video>.fps1.csv`` (or ``utils/annotations/…``, where the authors' code
  reads them): the ChangeIt labels, rows ``second,label`` with 0 background, 1 initial state,
  2 action, 3 end state.

One item per frame whose second is labelled 1 or 3, per category that labels its video.

A release exports back in this shape (``write``, writing.py): the frames, the per-second labels,
the state names, and StateLab's boxes and verified state names in a file of its own beside them
(``statelab_boxes.json``), which ``read`` applies when it finds it.
"""

from __future__ import annotations

import ast
import csv
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from protocols.kit.releases import Conversion, FormatRefused, ReleaseFormat

from .crops import Located, locate_files
from .writing import apply_boxes, write_release

FULL = "ChangeIT-Frames-Full"
SUBSET = "ChangeIT-Subset-Images"
CROPS = "ChangeIT-Subset-Crop"
# When both frame folders hold a frame, the golden subset's copy is the one read.
FRAME_FOLDERS = (SUBSET, FULL)
STATE_FILES = ("utils/classification_states.py", "classification_states.py")
LABEL_FOLDERS = ("annotations", "utils/annotations")
GOLDEN_TAG = "golden-subset"
# A frame whose phase has several state names (apple's end state: peeled or cut) gets the first
# proposed; the annotator confirms or corrects it in the box form.
CONFIRM_TAG = "state-to-confirm"
PHASES = {1: ("initial", "initial"), 3: ("end", "terminal")}  # label -> (our name, the dict's key)
LABELS = {0: "background", 1: "initial state", 2: "action", 3: "end state"}

_FRAME = re.compile(r"^frame_(\d+)\.(?:jpe?g|png)$", re.IGNORECASE)
_CROP = re.compile(r"^cropped_frame_(\d+)\.(?:jpe?g|png)$", re.IGNORECASE)


def release_root(path: Path) -> Path | None:
    """The folder holding the frame folders and the state names: ``path`` or its ``object-states``."""
    for root in (path, path / "object-states"):
        if root.is_dir() and any((root / f).is_dir() for f in FRAME_FOLDERS) and _first(root, STATE_FILES):
            return root
    return None


def _first(root: Path, names: tuple[str, ...]) -> Path | None:
    return next((root / n for n in names if (root / n).exists()), None)


# --- state names -------------------------------------------------------------------------------


def read_state_names(path: Path, shown: str) -> tuple[dict[str, dict[str, list[str]]], dict[str, list[str]]]:
    """``a`` and ``q`` of the authors' state file, as literals of its top-level assignments."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=shown)
    except (SyntaxError, ValueError, UnicodeDecodeError) as exc:
        why = exc.__class__.__name__
        raise FormatRefused(f"{shown}: not readable Python ({why}); expected the dicts a and q") from exc
    found: dict[str, Any] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        if isinstance(target, ast.Name) and target.id in ("a", "q") and node.value is not None:
            try:
                found[target.id] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
                raise FormatRefused(
                    f"{shown}: {target.id} is not a literal dict (found an expression that would have to run)"
                ) from exc
    phases = found.get("a")
    if not isinstance(phases, dict) or not phases:
        raise FormatRefused(f'{shown}: no dict a; expected a = {{category: {{"initial": [...], "terminal": [...]}}}}')
    for category, entry in phases.items():
        ok = isinstance(category, str) and isinstance(entry, dict)
        ok = ok and all(_names(entry.get(k)) for k in ("initial", "terminal"))
        if not ok:
            raise FormatRefused(
                f'{shown}: a[{category!r}] is not {{"initial": [state names], "terminal": [state names]}}'
            )
    every = found.get("q")
    if every is not None and not (isinstance(every, dict) and all(_names(v) for v in every.values())):
        raise FormatRefused(f"{shown}: q is not {{category: [state names]}}")
    return phases, every or {}


def _names(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) and v.strip() for v in value)


# --- per-second labels ---------------------------------------------------------------------------


def read_seconds(path: Path, shown: str) -> dict[int, int]:
    """second -> label of one video's ChangeIt label file (an optional header row is skipped)."""
    out: dict[int, int] = {}
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            for n, row in enumerate(csv.reader(fh), start=1):
                cells = [c.strip() for c in row]
                if not any(cells):
                    continue
                if n == 1 and not cells[0].lstrip("-").isdigit():
                    continue  # a header such as "second,label"
                if len(cells) != 2 or not cells[0].isdigit() or cells[1] not in ("0", "1", "2", "3"):
                    raise FormatRefused(
                        f"{shown}: row {n}: expected 'second,label' (a whole second and a label 0–3), "
                        f"found {','.join(row)!r}"
                    )
                second = int(cells[0])
                if second in out:
                    raise FormatRefused(f"{shown}: row {n}: second {second} is labelled twice")
                out[second] = int(cells[1])
    except (OSError, UnicodeDecodeError) as exc:
        raise FormatRefused(f"{shown}: not a readable CSV ({exc.__class__.__name__})") from exc
    return out


def label_files(root: Path) -> tuple[str, dict[tuple[str, str], Path]]:
    """The labels folder used and (category, video) -> its label file."""
    folder = _first(root, LABEL_FOLDERS)
    if folder is None or not folder.is_dir():
        raise FormatRefused(
            f"{root.name}: no per-second labels; expected annotations/<category>/<video>.fps1.csv "
            "(the annotations folder of soCzech/ChangeIt) next to the frame folders"
        )
    files = {
        (cat.name, f.name.split(".")[0]): f
        for cat in sorted(folder.iterdir())
        if cat.is_dir()
        for f in sorted(cat.iterdir())
        if f.is_file() and f.suffix.lower() == ".csv"
    }
    if not files:
        raise FormatRefused(f"{folder.relative_to(root)}: holds no <category>/<video>.fps1.csv files")
    return str(folder.relative_to(root)), files


# --- frames and crops ----------------------------------------------------------------------------


def frames_by_video(root: Path) -> tuple[dict[str, dict[int, tuple[str, Path]]], int, int]:
    """video -> frame number -> (folder, file); and how many frames both folders hold (the subset's
    copy kept) and how many files are not named frame_NNNN."""
    out: dict[str, dict[int, tuple[str, Path]]] = {}
    twice = other = 0
    for folder in FRAME_FOLDERS:
        base = root / folder
        if not base.is_dir():
            continue
        for video in sorted(p for p in base.iterdir() if p.is_dir()):
            frames = out.setdefault(video.name, {})
            for f in sorted(video.iterdir()):
                m = _FRAME.match(f.name)
                if not m or not f.is_file():
                    other += 1
                    continue
                number = int(m.group(1))
                if number in frames:
                    twice += 1
                    continue
                frames[number] = (folder, f)
    return out, twice, other


def crops_by_frame(root: Path) -> dict[tuple[str, int], Path]:
    base = root / CROPS
    if not base.is_dir():
        return {}
    return {
        (video.name, int(m.group(1))): f
        for video in sorted(p for p in base.iterdir() if p.is_dir())
        for f in sorted(video.iterdir())
        if (m := _CROP.match(f.name)) and f.is_file()
    }


# --- the format ----------------------------------------------------------------------------------


@dataclass
class _Tally:
    """What one read found, for the import report."""

    items: dict[int, int] = field(default_factory=lambda: {1: 0, 3: 0})
    skipped: Counter = field(default_factory=Counter)
    to_confirm: dict[str, set[str]] = field(default_factory=dict)
    crops: Counter = field(default_factory=Counter)
    unplaced: Counter = field(default_factory=Counter)  # why crops were not located
    golden: int = 0


class _Reader:
    """One read of a release folder: its state names, crops and media root, and what it found."""

    def __init__(self, root: Path, base: Path, phases: dict[str, dict[str, list[str]]], crops: dict):
        self.root, self.base, self.phases, self.crops = root, base, phases, crops
        try:  # where the release folder lies in the media root, found once
            self.prefix = root.resolve().relative_to(base)
        except ValueError:
            raise FormatRefused(
                f"{root.name}: the release folder is not inside the media root {base.name}; give a media root "
                "that holds it, or none"
            ) from None
        self.tally = _Tally()
        self.located: dict[tuple[str, int], Located] = {}

    def rel(self, p: Path) -> str:
        """A path of the release relative to the media root."""
        return (self.prefix / p.relative_to(self.root)).as_posix()

    def line(
        self, category: str, video: str, number: int, label: int, folder: str, frame: Path, labels: str = ""
    ) -> dict[str, Any]:
        ours, key = PHASES[label]
        phases = self.phases[category]
        choices = phases[key]
        state = choices[0]
        self.tally.items[label] += 1
        extra: dict[str, Any] = {
            "category": category,
            "video": video,
            "frame": number,
            "second": number - 1,
            "label": label,
            "phase": ours,
            "folder": folder,
        }
        if labels:
            # The video's whole per-second label file, one digit per second from 0 (background 0,
            # initial 1, action 2, end 3), so an export writes the authors' file back exactly,
            # the seconds that are no item of the release included (protocols/changeit/writing.py).
            extra["video_labels"] = labels
        tags = []
        if folder == SUBSET:
            tags.append(GOLDEN_TAG)
            self.tally.golden += 1
        if len(choices) > 1:
            tags.append(CONFIRM_TAG)
            extra["state_choices"] = list(choices)
            self.tally.to_confirm.setdefault(category, set()).add(ours)
        line: dict[str, Any] = {
            "id": f"{category}/{video}/{frame.stem}",
            "image": self.rel(frame),
            "object": category.replace("_", " "),
            "state": state,
            "distractors": [n for n in dict.fromkeys([*phases["initial"], *phases["terminal"]]) if n != state],
        }
        crop = self.crops.get((video, number))
        if crop is not None:
            extra["crop"] = self.rel(crop)
            found = self.locate(video, number, frame, crop)
            if found.box:
                line["bbox"] = list(found.box)
        if tags:
            line["tags"] = tags
        line["extra"] = extra
        return line

    def locate(self, video: str, number: int, frame: Path, crop: Path) -> Located:
        """The crop's box, searched once per frame (a video labelled under two categories shares it)."""
        found = self.located.get((video, number))
        if found is None:
            found = self.located[video, number] = locate_files(frame, crop)
            self.tally.crops["located" if found.box else "not located"] += 1
            if not found.box:
                self.tally.unplaced[found.reason] += 1
        return found


class ChangeItFrames(ReleaseFormat):
    name = "changeit-frames"
    label = "ChangeIt-Frames release (brown-palm/object-states) with ChangeIt per-second labels (soCzech/ChangeIt)"
    kind = "items"
    writes = True

    def detect(self, path: Path) -> bool:
        return path.is_dir() and release_root(path) is not None

    def write(
        self,
        lines: Iterable[Mapping[str, Any]],
        out_dir: Path,
        *,
        open_media: Callable[[str], BinaryIO] | None = None,
    ) -> list[Path]:
        return write_release(
            lines, out_dir, open_media=open_media, full=FULL, subset=SUBSET, crops=CROPS, golden_tag=GOLDEN_TAG
        )

    def read(self, path: Path, *, media_root: Path | None = None) -> Conversion:
        root = release_root(path) if path.is_dir() else None
        if root is None:
            raise FormatRefused(
                f"{path.name}: not a ChangeIt-Frames release; expected a folder with {FULL}/ or {SUBSET}/ "
                "(<video>/frame_NNNN.jpg) and utils/classification_states.py"
            )
        states_file = _first(root, STATE_FILES)
        states_shown = states_file.relative_to(root).as_posix()
        phases, every = read_state_names(states_file, states_shown)
        labels_shown, files = label_files(root)
        frames, twice, other = frames_by_video(root)
        categories = {cat for cat, video in files if video in frames}
        missing = sorted(categories - set(phases))
        if missing:
            raise FormatRefused(
                f"{states_shown}: a names no states for {', '.join(missing)}, whose videos have frames; "
                'expected a[category] = {"initial": [...], "terminal": [...]}'
            )
        reader = _Reader(root, (media_root or root).resolve(), phases, crops_by_frame(root))
        lines: list[dict[str, Any]] = []
        for (category, video), label_file in sorted(files.items()):
            if video not in frames:
                continue
            seconds = read_seconds(label_file, f"{labels_shown}/{category}/{label_file.name}")
            labels = "".join(str(seconds.get(s, 0)) for s in range(max(seconds, default=-1) + 1))
            for number, (folder, frame) in sorted(frames[video].items()):
                label = seconds.get(number - 1)
                if label in PHASES:
                    lines.append(reader.line(category, video, number, label, folder, frame, labels))
                else:
                    reader.tally.skipped["with no label for their second" if label is None else LABELS[label]] += 1
        if not lines:
            raise FormatRefused(
                f"{root.name}: no frame whose second is labelled initial state (1) or end state (3) "
                f"among {sum(len(v) for v in frames.values())} frames and {len(files)} label files"
            )
        used = {(line["extra"]["video"], line["extra"]["frame"]) for line in lines}
        reader.tally.crops["of frames that are not items"] = sum(1 for key in reader.crops if key not in used)
        notes = _notes(lines, reader, files, set(frames), phases, every, states_shown, labels_shown)
        if twice:
            notes.append(f"{_count(twice, 'frame')} in both {SUBSET} and {FULL}: the subset's copy read")
        if other:
            notes.append(f"{_count(other, 'file')} in the frame folders not named frame_NNNN.jpg, ignored")
        if (applied := apply_boxes(lines, root, phases)) is not None:
            notes.append(applied)
        return Conversion(lines=lines, media_root=reader.base, notes=notes)


def _notes(lines, reader: _Reader, files, framed: set[str], phases, every, states_shown, labels_shown) -> list[str]:
    """One sentence per mapping or finding of a read, for the import report."""
    tally = reader.tally
    categories = sorted({line["extra"]["category"] for line in lines})
    videos = {line["extra"]["video"] for line in lines}
    notes = [
        f"{_count(len(lines), 'item')} from {_count(len(videos), 'video')} of {len(categories)} "
        f"categor{'y' if len(categories) == 1 else 'ies'}: {tally.items[1]} "
        f"initial-state and {tally.items[3]} end-state frames (state names from a in {states_shown}, labels from "
        f"{labels_shown}/<category>/<video>.fps1.csv; frame N shows second N − 1)",
        f"{_count(tally.golden, 'frame')} of the golden subset ({SUBSET}) tagged {GOLDEN_TAG}",
        "distractors: the category's other state names (the paper's distractor prompts are not in the release)",
    ]
    if tally.skipped:
        parts = ", ".join(f"{n} {why}" for why, n in sorted(tally.skipped.items()))
        notes.append(f"frames that are not items (their second shows no state): {parts}")
    if tally.to_confirm:
        named = "; ".join(
            f"{cat} "
            + ", ".join(f"{ours}: {' / '.join(phases[cat][key])}" for ours, key in PHASES.values() if ours in in_cat)
            for cat, in_cat in sorted(tally.to_confirm.items())
        )
        notes.append(
            f"the labels do not say which of several state names applies ({named}): the first is proposed, "
            f"the items are tagged {CONFIRM_TAG}, and the annotator confirms or corrects it"
        )
    per_video = Counter(video for _, video in files)
    twofold = sorted(v for v in videos if per_video[v] > 1)
    if twofold:
        shown = ", ".join(f"{v} ({', '.join(sorted(c for c, w in files if w == v))})" for v in twofold)
        notes.append(f"videos labelled under several categories, each frame an item of each: {shown}")
    unlabelled = sorted(framed - {video for _, video in files})
    if unlabelled:
        more = " …" if len(unlabelled) > 10 else ""
        listed = ", ".join(unlabelled[:10])
        notes.append(f"{_count(len(unlabelled), 'frame folder')} without a label file, not read: {listed}{more}")
    if sum(tally.crops.values()):
        why = " (" + ", ".join(f"{n} {r}" for r, n in sorted(tally.unplaced.items())) + ")" if tally.unplaced else ""
        notes.append(
            f"crops ({CROPS}): {tally.crops['located']} located as exact sub-images of their frame, box pre-filled "
            f"in pixels (those items arrive annotated, for review); {tally.crops['not located']} not located, "
            f"boxes drawn in the app{why}; {tally.crops['of frames that are not items']} of frames that are not items"
        )
    differ = []
    for cat in categories:
        named = set(phases[cat]["initial"]) | set(phases[cat]["terminal"])
        if cat in every and set(every[cat]) != named:
            only_q = ", ".join(repr(n) for n in every[cat] if n not in named)
            differ.append(f"{cat}: q also names {only_q}" if only_q else f"{cat}: q lists other names")
    if differ:
        notes.append(f"a's state names used where q names a state otherwise ({'; '.join(differ)})")
    return notes


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


FORMATS = (ChangeItFrames(),)
