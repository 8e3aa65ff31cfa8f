"""Small synthetic datasets in the protocols' import formats, with media made locally.

Used by ``manage.py demo`` and by the tests. What each protocol's items hold is its own
``samples`` module (protocols/kit/samples.py); here the media it names are drawn: images are
Pillow drawings of simple objects whose *state* changes (a door opening, a cup filling, an apple
being cut); videos are a few frames of such a drawing encoded with ffmpeg (system binary, or the
one imageio-ffmpeg bundles). Nothing is downloaded.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from annotation.media.probe import ffmpeg_exe
from protocols import registry
from protocols.kit.samples import SCENES, Clip, Picture

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
        d.polygon(
            [(x0, y0), (x1 - opening, y0 + opening // 3), (x1 - opening, y1 - opening // 3), (x0, y1)], fill=color
        )
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
        d.polygon(
            [(x0, (y0 + y1) // 2), (x1, (y0 + y1) // 2), (x1, (y0 + y1) // 2 - lid), (x0, (y0 + y1) // 2 - lid)],
            fill=tuple(max(0, c - 50) for c in color),
        )
    return img


def make_image(path: Path, scene: int, state: int, **kw) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    draw_state(scene, state, **kw).save(path)
    return path


def make_video(
    path: Path,
    scene: int,
    *,
    start: int = 0,
    end: int = 2,
    frames: int = 12,
    fps: int = 6,
    size: tuple[int, int] = (160, 120),
) -> Path:
    """A short H.264 clip (MPEG-4 Part 2 if libx264 is missing) of the object changing state."""
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = bytearray()
    for i in range(frames):
        state = start + (end - start) * i // max(1, frames - 1)
        raw += draw_state(scene, state, size=size, shift=i % 4).tobytes()
    base = [
        ffmpeg_exe(),
        "-y",
        "-v",
        "error",
        "-f",
        "rawvideo",
        "-pix_fmt",
        "rgb24",
        "-s",
        f"{size[0]}x{size[1]}",
        "-r",
        str(fps),
        "-i",
        "-",
    ]
    for codec in (["-c:v", "libx264", "-pix_fmt", "yuv420p"], ["-c:v", "mpeg4"]):
        proc = subprocess.run([*base, *codec, str(path)], input=bytes(raw), capture_output=True)
        if proc.returncode == 0:
            return path
    raise RuntimeError(f"ffmpeg could not encode {path.name}: {proc.stderr.decode(errors='replace')[-300:]}")


def _samples(protocol: str):
    found = registry.get(protocol).samples
    if found is None:
        raise ValueError(f"protocol {protocol!r} has no sample dataset")
    return found


def sample_line(protocol: str, i: int, *, complete: bool = True, media: dict[str, Any] | None = None) -> dict[str, Any]:
    """Item `i` of a synthetic dataset; media paths follow `sample_media_paths`."""
    line: dict[str, Any] = {"id": f"{protocol}-{i:05d}", **(media or sample_media_paths(protocol, i))}
    line.update(_samples(protocol).fields(i, complete=complete))
    if i % 5 == 0:
        line["tags"] = ["sample"]
    return line


def sample_media_paths(protocol: str, i: int, *, distinct: int = 4) -> dict[str, Any]:
    """Media paths of item i; items share `distinct` media sets so datasets stay small."""
    return _samples(protocol).media_paths(i, distinct=distinct)


def write_sample_media(root: Path, protocol: str, *, distinct: int = 4) -> None:
    for k in range(distinct):
        for relpath, drawing in _samples(protocol).media_files(k, distinct=distinct).items():
            if isinstance(drawing, Picture):
                make_image(root / relpath, drawing.scene, drawing.state)
            elif isinstance(drawing, Clip):
                make_video(root / relpath, drawing.scene, start=drawing.start, end=drawing.end)
            else:
                raise TypeError(f"{protocol} sample {relpath}: not a Picture or a Clip: {drawing!r}")


def write_sample_dataset(
    root: Path,
    protocol: str,
    n: int,
    *,
    complete: bool = True,
    start: int = 0,
    distinct: int = 4,
    name: str = "items.jsonl",
    media: bool = True,
) -> Path:
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
