"""The OSCBench authors' release as it lies on disk (docs/protocols/oscbench.md, "The authors'
files"): the three prompt split files, the action and object taxonomy, one folder of generated
videos per generator, and how a video's file name ties it to its prompt line. Plain Python (no
Django); the three formats of formats.py read through it.

A video is named as the authors' judge script expects: ``<number>_<prompt, spaces as
underscores>_<two letters>.mp4``; the script recovers the prompt by dropping the leading number,
the trailing two-letter code and the underscores, and so does this module. Prompts repeat (a few
prompts are on more than one line), so a video whose prompt is on several lines goes to the line
its number names (the line's number in prompts.txt or in its split file), else to the first of
those lines no other video of its generator took, in the order of the videos' numbers.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocols.kit.releases import FormatRefused

from .fields import SCENARIOS

SPLIT_FILES = {split: Path("prompt_splits") / f"prompts_{split}.txt" for split in SCENARIOS}
ACTION_FILE = Path("action_object_taxonomy") / "action_category.json"
OBJECT_FILE = Path("action_object_taxonomy") / "object_category.json"
VIDEO_SUFFIX = ".mp4"
# Folders of the authors' repository that hold no videos.
NOT_GENERATORS = {"prompt_splits", "action_object_taxonomy"}

_NUMBER = re.compile(r"^(\d+)_")
_CODE = re.compile(r"_([A-Za-z]{2})$")
_NOT_WORD = re.compile(r"[^a-z0-9]+")


def match_key(text: str) -> str:
    """A prompt as compared with a file name: lower case, every run of other characters one space."""
    return _NOT_WORD.sub(" ", text.lower()).strip()


@dataclass(frozen=True)
class PromptLine:
    split: str
    line: int  # 1-based, in its split file
    number: int  # 1-based, in prompts.txt (the split files one after the other)
    text: str


@dataclass(frozen=True)
class Video:
    generator: str
    path: str  # relative to the video folder root, "/"-separated
    stem: str  # the file name without .mp4: the authors' video key
    number: int | None
    code: str | None
    spelled: str  # the prompt the name spells


def item_id(generator: str, prompt: PromptLine) -> str:
    """An item's id: its generator, split and line (prompt texts repeat, their lines do not)."""
    return f"{generator}:{prompt.split}:{prompt.line:04d}"


def parse_video_name(stem: str) -> tuple[int | None, str | None, str]:
    """(leading number, trailing two-letter code, prompt) of a video's file name without .mp4."""
    number = _NUMBER.match(stem)
    rest = stem[number.end() :] if number else stem
    code = _CODE.search(rest)
    if code:
        rest = rest[: code.start()]
    return (int(number.group(1)) if number else None), (code.group(1) if code else None), rest.replace("_", " ").strip()


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise FormatRefused(f"{what}: {path} is missing") from None
    except UnicodeDecodeError as exc:
        raise FormatRefused(f"{what}: {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise FormatRefused(f"{what}: {path} cannot be read ({exc.strerror})") from None


def read_prompts(root: Path) -> list[PromptLine]:
    """Every line of the three split files, in prompts.txt's order (regular, novel, compositional)."""
    out: list[PromptLine] = []
    for split, rel in SPLIT_FILES.items():
        lines = _read_text(root / rel, "prompt split").splitlines()
        for n, text in enumerate(lines, start=1):
            if not text.strip():
                raise FormatRefused(f"prompt split: {rel} line {n} is blank; expected one prompt per line")
            out.append(PromptLine(split, n, len(out) + 1, text.strip()))
    return out


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(_read_text(path, what))
    except json.JSONDecodeError as exc:
        raise FormatRefused(f"{what}: {path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None


@dataclass
class Taxonomy:
    """Action word -> category; object word -> (category, subcategory)."""

    actions: dict[str, str]
    objects: dict[str, tuple[str, str]]

    def _object_word(self, word: str) -> str | None:
        # The taxonomy lists singular forms ("cooky" for cookies); prompts may use plurals.
        for form in (word, word[:-3] + "y" if word.endswith("ies") else "", word[:-2], word[:-1]):
            if form and form in self.objects and (form == word or word.endswith("s")):
                return form
        return None

    def tag(self, text: str) -> tuple[dict[str, str], dict[str, Any], list[str]]:
        """(item fields, extra fields, findings) of one prompt: its action(s) and object and their
        categories. Two actions (compositional prompts) are joined with "and" and their categories
        with " + "; of two objects, the one not after "the" is the one acted on ("coating the bread
        with butter", "melting chocolate on the cake")."""
        words = re.findall(r"[a-z]+", text.lower())
        actions = [w for w in words if w in self.actions]
        objects = [(i, self._object_word(w)) for i, w in enumerate(words)]
        objects = [(i, w) for i, w in objects if w is not None]
        fields: dict[str, str] = {}
        extra: dict[str, Any] = {}
        findings: list[str] = []
        if actions:
            fields["action"] = " and ".join(actions)
            fields["action_category"] = " + ".join(dict.fromkeys(self.actions[a] for a in actions))
        else:
            findings.append("no action")
        if objects:
            chosen = objects[0][1]
            if len(objects) > 1:
                free = [w for i, w in objects if i == 0 or words[i - 1] != "the"]
                chosen = free[0] if free else chosen
                extra["objects"] = [w for _, w in objects]
                findings.append("two objects")
            category, subcategory = self.objects[chosen]
            fields.update(object=chosen, object_category=category)
            extra["object_subcategory"] = subcategory
        else:
            findings.append("no object")
        return fields, extra, findings


def read_taxonomy(root: Path) -> Taxonomy:
    raw_actions = _read_json(root / ACTION_FILE, "taxonomy")
    raw_objects = _read_json(root / OBJECT_FILE, "taxonomy")
    if not isinstance(raw_actions, dict) or not all(
        isinstance(ws, list) and all(isinstance(w, str) for w in ws) for ws in raw_actions.values()
    ):
        raise FormatRefused(f"taxonomy: {ACTION_FILE} must be an object category -> [action words]")
    if not isinstance(raw_objects, dict) or not all(
        isinstance(sub, dict)
        and all(isinstance(ws, list) and all(isinstance(w, str) for w in ws) for ws in sub.values())
        for sub in raw_objects.values()
    ):
        raise FormatRefused(f"taxonomy: {OBJECT_FILE} must be an object category -> {{subcategory -> [object words]}}")
    actions = {w.lower(): category for category, ws in raw_actions.items() for w in ws}
    objects = {
        w.lower(): (category, subcategory)
        for category, subs in raw_objects.items()
        for subcategory, ws in subs.items()
        for w in ws
    }
    return Taxonomy(actions, objects)


def is_release_root(path: Path) -> bool:
    return all((path / rel).is_file() for rel in SPLIT_FILES.values())


def find_release_root(*starts: Path | None) -> Path | None:
    """The first of the folders given, or of their parents, that holds the prompt split files."""
    for start in starts:
        if start is None:
            continue
        start = Path(start).resolve()
        for folder in (start, *start.parents) if start.is_dir() else start.parents:
            if is_release_root(folder):
                return folder
    return None


def list_videos(video_root: Path) -> list[Video]:
    """The videos under ``video_root``: each folder (not hidden, not one of the repository's own) is
    a generator, named by the folder; .mp4 files lying in ``video_root`` itself (one folder of
    every generator's videos, as the authors' frame sampler reads them) are named by their
    trailing two-letter code."""
    out: list[Video] = []
    for entry in sorted(video_root.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") or entry.name in NOT_GENERATORS:
            continue
        if entry.is_dir():
            for f in sorted(entry.iterdir(), key=lambda p: p.name):
                if f.is_file() and f.suffix.lower() == VIDEO_SUFFIX and not f.name.startswith("."):
                    out.append(_video(entry.name, f"{entry.name}/{f.name}", f.name[: -len(VIDEO_SUFFIX)]))
        elif entry.is_file() and entry.suffix.lower() == VIDEO_SUFFIX:
            stem = entry.name[: -len(VIDEO_SUFFIX)]
            out.append(_video(parse_video_name(stem)[1] or "unknown", entry.name, stem))
    return out


def _video(generator: str, path: str, stem: str) -> Video:
    number, code, spelled = parse_video_name(stem)
    return Video(generator, path, stem, number, code, spelled)


@dataclass
class Layout:
    """The release's prompt lines and which video of each generator is on which line."""

    prompts: list[PromptLine]
    pairs: list[tuple[Video, PromptLine]] = field(default_factory=list)
    unmatched: list[Video] = field(default_factory=list)  # spell no prompt line
    surplus: list[Video] = field(default_factory=list)  # more videos of a prompt than it has lines
    generators: list[str] = field(default_factory=list)

    def by_stem(self) -> dict[str, list[str]]:
        """Video key (file name without .mp4) -> the ids of the items showing it."""
        out: dict[str, list[str]] = defaultdict(list)
        for video, prompt in self.pairs:
            out[video.stem].append(item_id(video.generator, prompt))
        return dict(out)


def _assign(videos: list[Video], lines: list[PromptLine]) -> tuple[list[tuple[Video, PromptLine]], list[Video]]:
    """One generator's videos of one prompt text onto that text's lines (see the module)."""
    if len(lines) == 1:
        ordered = sorted(videos, key=lambda v: (v.number is None, v.number or 0, v.stem))
        return [(ordered[0], lines[0])], ordered[1:]
    taken: dict[int, Video] = {}
    rest: list[Video] = []
    for video in sorted(videos, key=lambda v: (v.number is None, v.number or 0, v.stem)):
        named = [p for p in lines if video.number in (p.number, p.line) and p.number not in taken]
        if len(named) == 1:
            taken[named[0].number] = video
        else:
            rest.append(video)
    free = [p for p in lines if p.number not in taken]
    by_number = {p.number: p for p in lines}
    pairs = [(v, by_number[n]) for n, v in taken.items()] + list(zip(rest, free))
    return sorted(pairs, key=lambda pair: pair[1].number), rest[len(free) :]


def read_layout(root: Path, video_root: Path) -> Layout:
    prompts = read_prompts(root)
    by_key: dict[str, list[PromptLine]] = defaultdict(list)
    for p in prompts:
        by_key[match_key(p.text)].append(p)
    layout = Layout(prompts=prompts)
    per_generator: dict[str, dict[str, list[Video]]] = defaultdict(lambda: defaultdict(list))
    for video in list_videos(video_root):
        key = match_key(video.spelled)
        if key not in by_key:
            layout.unmatched.append(video)
            continue
        per_generator[video.generator][key].append(video)
    layout.generators = sorted(per_generator)
    for generator in layout.generators:
        for key, videos in per_generator[generator].items():
            pairs, surplus = _assign(videos, by_key[key])
            layout.pairs.extend(pairs)
            layout.surplus.extend(surplus)
    order = {g: i for i, g in enumerate(layout.generators)}
    layout.pairs.sort(key=lambda pair: (order[pair[0].generator], pair[1].number))
    return layout


def video_root(root: Path, media_root: Path | None) -> Path:
    """Where the generator folders lie: ``media_root`` when it is given and lies outside the release
    folder ``root``, else the release folder (a media root holding the release, such as an
    uploaded zip's folder, is not a folder of videos)."""
    if media_root is None or Path(root).resolve().is_relative_to(Path(media_root).resolve()):
        return Path(root)
    return Path(media_root)


def locate(path: Path, media_root: Path | None) -> tuple[Path, Path]:
    """(release root, video root) for a file of ratings or judge output: the release root is the
    first folder holding the prompt splits among ``media_root``, the file's folder and their
    parents."""
    root = find_release_root(media_root, path)
    if root is None:
        raise FormatRefused(
            f"{Path(path).name}: its videos are named by their file names; to tie them to items, give the "
            "release folder the items were read from (--media-root: the folder holding prompt_splits/ and "
            "one folder of videos per generator)"
        )
    return root, video_root(root, media_root)
