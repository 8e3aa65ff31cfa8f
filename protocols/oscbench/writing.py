"""An OSCBench release written back in the authors' layout (docs/importing.md, "OSCBench"): the
three prompt split files, the action and object taxonomy rebuilt from the items, and one folder of
videos per generator named as the authors' judge script reads them. Plain Python (no Django);
``PromptSplits.write`` (formats.py) calls ``write_release``.

The prompt reader keeps each item's split line (``extra.prompt_line``) and video file name
(``extra.video_name``), so the split files come back in their original line order and the videos
under their original names. A split line is written once however many generators have a video of
it; lines no item of the release names are left out (the lines after them move up, and keep their
order). Items added in StateLab (no ``extra.prompt_line``) follow the imported lines of their
split, in release order.

A release holds items, not ratings: the human ratings (``evaluations-<i>-mean3.json``) are
annotations and are not written here.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from protocols.kit.releases import FormatRefused, copy_media, media_parts

from .fields import SCENARIOS
from .release_layout import ACTION_FILE, OBJECT_FILE, SPLIT_FILES, VIDEO_SUFFIX

_NOT_CODE = re.compile(r"[^A-Za-z]")


def _where(line: Mapping[str, Any]) -> str:
    return f"item {line.get('id')!r}"


def _split_of(line: Mapping[str, Any]) -> str:
    split = line.get("scenario")
    if split not in SCENARIOS:
        raise FormatRefused(
            f"{_where(line)}: scenario {split!r}; the authors' prompt splits need one of {', '.join(SCENARIOS)}"
        )
    return split


def _prompt_of(line: Mapping[str, Any]) -> str:
    prompt = line.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip() or "\n" in prompt or "\r" in prompt:
        raise FormatRefused(f"{_where(line)}: prompt {prompt!r}; expected one line of text")
    return prompt.strip()


def _folder_name(value: Any, what: str, line: Mapping[str, Any]) -> str:
    if not isinstance(value, str) or not value.strip() or value in (".", "..") or set(value) & {"/", "\\"}:
        raise FormatRefused(f"{_where(line)}: {what} {value!r} cannot name a file or folder")
    return value


def _video_name(line: Mapping[str, Any], extra: Mapping[str, Any], number: int) -> str:
    """The video's file name without .mp4: as imported, else spelled from the prompt line."""
    if extra.get("video_name") is not None:
        return _folder_name(extra["video_name"], "video name", line)
    code = extra.get("video_code")
    if not (isinstance(code, str) and len(code) == 2 and code.isalpha()):
        code = (_NOT_CODE.sub("", str(line.get("generator") or "")) + "xx")[:2].lower()
    return f"{number}_{_prompt_of(line).replace(' ', '_')}_{code}"


class _Taxonomy:
    """action_category.json and object_category.json, from the words the items were tagged with."""

    def __init__(self) -> None:
        self.actions: dict[str, list[str]] = defaultdict(list)
        self.objects: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))

    def add(self, line: Mapping[str, Any], extra: Mapping[str, Any]) -> None:
        action, category = line.get("action"), line.get("action_category")
        if isinstance(action, str) and isinstance(category, str) and action and category:
            words = action.split(" and ")
            categories = category.split(" + ")
            if len(categories) == 1:
                categories = categories * len(words)
            if len(categories) == len(words):  # else the categories cannot be told apart: left out
                for word, cat in zip(words, categories, strict=True):
                    if word not in self.actions[cat]:
                        self.actions[cat].append(word)
        obj, category, sub = line.get("object"), line.get("object_category"), extra.get("object_subcategory")
        if all(isinstance(v, str) and v for v in (obj, category, sub)) and obj not in self.objects[category][sub]:
            self.objects[category][sub].append(obj)

    def write(self, out_dir: Path) -> list[Path]:
        out = []
        for rel, data in ((ACTION_FILE, self.actions), (OBJECT_FILE, self.objects)):
            target = out_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            out.append(target)
        return out


def write_release(
    lines: Iterable[Mapping[str, Any]],
    out_dir: Path,
    *,
    open_media: Callable[[str], BinaryIO] | None = None,
) -> list[Path]:
    out_dir = Path(out_dir)
    # split -> original line -> prompt; split -> prompts of items added in StateLab, in order
    kept: dict[str, dict[int, str]] = {split: {} for split in SCENARIOS}
    added: dict[str, list[str]] = {split: [] for split in SCENARIOS}
    videos: list[tuple[Mapping[str, Any], dict[str, Any], str, str]] = []  # line, extra, split, prompt
    taxonomy = _Taxonomy()
    seen_videos: dict[str, str] = {}
    for line in lines:
        extra = dict(line.get("extra") or {})
        split, prompt = _split_of(line), _prompt_of(line)
        number = extra.get("prompt_line")
        if isinstance(number, int) and not isinstance(number, bool) and number >= 1:
            earlier = kept[split].setdefault(number, prompt)
            if earlier != prompt:
                raise FormatRefused(
                    f"{_where(line)}: {split} line {number} is {prompt!r}, but another item of that line has "
                    f"{earlier!r}; one split line holds one prompt"
                )
        elif number is not None:
            raise FormatRefused(f"{_where(line)}: extra.prompt_line {number!r}; expected a line number from 1")
        elif prompt not in added[split]:
            added[split].append(prompt)
        taxonomy.add(line, extra)
        videos.append((line, extra, split, prompt))
    if not videos:
        raise FormatRefused("the release holds no items; nothing to write")
    written: list[Path] = []
    order: dict[tuple[str, str], int] = {}  # (split, prompt) -> line in prompts.txt, for new names
    total = 0
    for split, rel in SPLIT_FILES.items():
        texts = [kept[split][n] for n in sorted(kept[split])] + added[split]
        for text in texts:
            total += 1
            order.setdefault((split, text), total)
        target = out_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(texts), encoding="utf-8")  # no trailing newline, as the authors'
        written.append(target)
    written.extend(taxonomy.write(out_dir))
    for line, extra, split, prompt in videos:
        generator = _folder_name(line.get("generator"), "generator", line)
        name = f"{generator}/{_video_name(line, extra, order[(split, prompt)])}{VIDEO_SUFFIX}"
        if name in seen_videos:
            raise FormatRefused(f"{_where(line)}: the video {name} is also item {seen_videos[name]!r}'s")
        seen_videos[name] = str(line.get("id"))
        if open_media is not None:
            video = line.get("video")
            if not isinstance(video, str):
                raise FormatRefused(f"{_where(line)}: no video")
            media_parts(video)
            written.append(copy_media(open_media, video, out_dir / name))
    return written
