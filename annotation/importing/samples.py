"""Small synthetic datasets in the five import formats, with media made locally.

Used by ``manage.py demo`` and by the tests: images are Pillow drawings of simple objects whose
*state* changes (a door opening, a cup filling, an apple being cut); videos are a few frames of
such a drawing encoded with ffmpeg (system binary, or the one imageio-ffmpeg bundles). Nothing is
downloaded.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from annotation.media_probe import ffmpeg_exe

# (object, list of states in order of change, change verb phrase, distractor changes)
SCENES = [
    ("door", ["a closed door", "a slightly opened door", "a wide open door"], "open the door",
     ["close the door", "paint the door", "remove the door"]),
    ("cup", ["an empty cup", "a half-full cup", "a full cup"], "fill the cup",
     ["empty the cup", "break the cup", "wash the cup"]),
    ("apple", ["a whole apple", "a halved apple", "a sliced apple"], "cut the apple",
     ["peel the apple", "wash the apple", "bite the apple"]),
    ("box", ["a closed box", "a half-open box", "an open box"], "open the box",
     ["close the box", "fold the box", "tape the box"]),
]
COLORS = [(200, 80, 60), (60, 130, 200), (80, 170, 90), (190, 150, 40)]


def draw_state(scene: int, state: int, *, size: tuple[int, int] = (160, 120), shift: int = 0) -> Image.Image:
    """One frame: object `scene` in state `state` (0 = start); `shift` moves it a little."""
    w, h = size
    img = Image.new("RGB", size, (235, 235, 230))
    d = ImageDraw.Draw(img)
    color = COLORS[scene % len(COLORS)]
    x0, y0 = w // 4 + shift, h // 6
    x1, y1 = x0 + w // 2, h - h // 6
    kind = SCENES[scene % len(SCENES)][0]
    if kind == "door":
        d.rectangle([x0, y0, x1, y1], outline=(60, 40, 20), width=3)
        opening = int((x1 - x0) * [0.0, 0.35, 0.8][state])
        d.polygon([(x0, y0), (x1 - opening, y0 + opening // 3), (x1 - opening, y1 - opening // 3), (x0, y1)], fill=color)
    elif kind == "cup":
        d.rectangle([x0, y0, x1, y1], outline=(40, 40, 40), width=3)
        level = int((y1 - y0) * [0.0, 0.5, 0.95][state])
        if level:
            d.rectangle([x0 + 3, y1 - level, x1 - 3, y1 - 3], fill=color)
    elif kind == "apple":
        d.ellipse([x0, y0, x1, y1], fill=color)
        for cut in range(state * 2):
            cx = x0 + (cut + 1) * (x1 - x0) // (state * 2 + 1)
            d.line([cx, y0, cx, y1], fill=(250, 250, 240), width=3)
    else:
        d.rectangle([x0, (y0 + y1) // 2, x1, y1], fill=color)
        lid = int((y1 - y0) * [0.0, 0.25, 0.5][state])
        d.polygon([(x0, (y0 + y1) // 2), (x1, (y0 + y1) // 2), (x1, (y0 + y1) // 2 - lid), (x0, (y0 + y1) // 2 - lid)],
                  fill=tuple(max(0, c - 50) for c in color))
    return img


def make_image(path: Path, scene: int, state: int, **kw) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    draw_state(scene, state, **kw).save(path)
    return path


def make_video(path: Path, scene: int, *, start: int = 0, end: int = 2, frames: int = 12, fps: int = 6,
               size: tuple[int, int] = (160, 120)) -> Path:
    """A short H.264 clip (MPEG-4 Part 2 if libx264 is missing) of the object changing state."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = bytearray()
    for i in range(frames):
        state = start + (end - start) * i // max(1, frames - 1)
        raw += draw_state(scene, state, size=size, shift=i % 4).tobytes()
    base = [ffmpeg_exe(), "-y", "-v", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{size[0]}x{size[1]}",
            "-r", str(fps), "-i", "-"]
    for codec in (["-c:v", "libx264", "-pix_fmt", "yuv420p"], ["-c:v", "mpeg4"]):
        proc = subprocess.run([*base, *codec, str(path)], input=bytes(raw), capture_output=True)
        if proc.returncode == 0:
            return path
    raise RuntimeError(f"ffmpeg could not encode {path.name}: {proc.stderr.decode(errors='replace')[-300:]}")


def sample_line(protocol: str, i: int, *, complete: bool = True, media: dict[str, Any] | None = None) -> dict[str, Any]:
    """Item `i` of a synthetic dataset; media paths follow `sample_media_paths`."""
    scene = i % len(SCENES)
    obj, states, change, distractors = SCENES[scene]
    m = media or sample_media_paths(protocol, i)
    line: dict[str, Any] = {"id": f"{protocol}-{i:05d}", **m}
    if protocol == "status":
        if complete:
            line.update(state_a=states[0], state_b=states[2], change=change, change_distractors=list(distractors),
                        category="functional" if obj in ("cup", "apple") else "positional",
                        difference="significant" if i % 2 else "slight")
    elif protocol == "changeit":
        line.update(object=obj, state=states[i % 3], distractors=[s for s in states if s != states[i % 3]])
        if complete:
            line["bbox"] = [40, 20, 80, 80]
    elif protocol == "visualtrans":
        # The question defines a QA task, so raw items carry it too; the answer is the label.
        fmt = ("choice", "count", "set")[i % 3]
        line.update(question=f"What happened to the {obj}?", format=fmt, scene="kitchen")
        if fmt == "choice":
            line.update(options=[change, distractors[0], distractors[1]])
        elif fmt == "count":
            line.update(question=f"How many {obj}s changed state?")
        else:
            line.update(question="Which objects changed?")
        if complete:
            line.update(subtask=("global", "causal", "quantitative")[i % 3],
                        answer={"choice": "A", "count": 1, "set": [obj]}[fmt])
    elif protocol == "m3verse":
        line.update(question=f"What differs between the two videos of the {obj}?",
                    options=[f"the {obj} changed state", "the light changed", "nothing listed is correct"])
        if complete:
            line.update(answer=["A"], context="intra" if i % 2 else "inter", capabilities=["attribute"],
                        hallucination=False)
    elif protocol == "oscbench":
        line.update(prompt=f"A person slowly {change.split(' ', 1)[0]}s the {obj}.", generator=f"gen-{i % 2}",
                    scenario=("regular", "novel", "compositional")[i % 3], action=change.split(" ", 1)[0],
                    action_category="manipulation", object=obj, object_category="household")
    if i % 5 == 0:
        line["tags"] = ["sample"]
    return line


def sample_media_paths(protocol: str, i: int, *, distinct: int = 4) -> dict[str, Any]:
    """Media paths of item i; items share `distinct` media sets so datasets stay small."""
    k = i % distinct
    return {
        "status": {"image_a": f"img/s{k}_a.png", "image_b": f"img/s{k}_b.png"},
        "changeit": {"image": f"img/c{k}.png"},
        "visualtrans": {"images": [f"img/s{k}_a.png", f"img/s{k}_b.png"]},
        "m3verse": {"video_before": f"vid/m{k}_before.mp4", "video_after": f"vid/m{k}_after.mp4"},
        "oscbench": {"video": f"vid/o{k}.mp4"},
    }[protocol]


def write_sample_media(root: Path, protocol: str, *, distinct: int = 4) -> None:
    for k in range(distinct):
        paths = sample_media_paths(protocol, k, distinct=distinct)
        scene = k % len(SCENES)
        if protocol in ("status", "visualtrans"):
            make_image(root / f"img/s{k}_a.png", scene, 0)
            make_image(root / f"img/s{k}_b.png", scene, 2)
        elif protocol == "changeit":
            make_image(root / paths["image"], scene, k % 3)
        elif protocol == "m3verse":
            make_video(root / paths["video_before"], scene, start=0, end=0)
            make_video(root / paths["video_after"], scene, start=0, end=2)
        else:
            make_video(root / paths["video"], scene, start=0, end=2)


def write_sample_dataset(root: Path, protocol: str, n: int, *, complete: bool = True, start: int = 0,
                         distinct: int = 4, name: str = "items.jsonl", media: bool = True) -> Path:
    """Write media under `root` and `n` item lines to root/name; returns the JSONL path."""
    root.mkdir(parents=True, exist_ok=True)
    if media:
        write_sample_media(root, protocol, distinct=distinct)
    path = root / name
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(start, start + n):
            line = sample_line(protocol, i, complete=complete, media=sample_media_paths(protocol, i, distinct=distinct))
            fh.write(json.dumps(line) + "\n")
    return path
