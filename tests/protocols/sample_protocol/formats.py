"""Lid check's made-up "authors' formats", for the tests of the generic import and export of
authors' formats (protocols/kit/releases.py): nothing of annotation/ knows them.

- ``lid-sheet`` (items, writes): a file ``lids.json`` (or a folder holding one), an object
  ``{"lids": [{"key", "picture", "thing", "open" (true, false or null), ...}]}`` with the
  pictures at their relative paths. Each row becomes an item line: the question is written from
  the object's name, ``open`` becomes the answer letter, and anything else the row carries
  (``shelf``, ...) is kept under ``extra`` and written back.
- ``lid-guesses`` (predictions): claims the same files, to show that an item import asks only
  formats of kind "items".
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from protocols.kit.releases import Conversion, FormatRefused, ReleaseFormat, first_bytes

SHEET = "lids.json"
ROW_KEYS = ("key", "picture", "thing", "open")


def _sheet(path: Path) -> Path | None:
    path = Path(path)
    if path.is_dir():
        return path / SHEET if (path / SHEET).is_file() else None
    return path if path.suffix == ".json" else None


class LidSheet(ReleaseFormat):
    name = "lid-sheet"
    label = "lids.json (the lid check sheet)"
    kind = "items"
    writes = True

    def detect(self, path: Path) -> bool:
        # Known by its name and its first key; another name takes --format.
        sheet = _sheet(path)
        if sheet is None or sheet.name != SHEET:
            return False
        return re.match(rb'\s*\{\s*"lids"', first_bytes(sheet)) is not None

    def read(self, path: Path, *, media_root: Path | None = None) -> Conversion:
        sheet = _sheet(path)
        if sheet is None:
            raise FormatRefused(f"{Path(path).name}: expected {SHEET} or a folder holding it")
        try:
            data = json.loads(sheet.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise FormatRefused(f'{sheet.name}: not JSON ({exc}); expected {{"lids": [...]}}') from exc
        rows = data.get("lids") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise FormatRefused(f'{sheet.name}: no "lids" list; expected {{"lids": [...]}}')
        lines = [self._line(row) for row in rows]
        root = Path(media_root) if media_root is not None else sheet.parent
        notes = [f"{len(lines)} rows of {sheet.name}; each question written from the object's name"]
        return Conversion(lines=lines, media_root=root, notes=notes)

    @staticmethod
    def _line(row: Mapping[str, Any]) -> dict[str, Any]:
        line: dict[str, Any] = {
            "id": row.get("key"),
            "image": row.get("picture"),
            "object": row.get("thing"),
            "question": f"Is the {row.get('thing')}'s lid open?",
            "options": ["yes", "no"],
        }
        if row.get("open") is not None:
            line["answer"] = "A" if row["open"] else "B"
        extra = {k: v for k, v in row.items() if k not in ROW_KEYS}
        if extra:
            line["extra"] = extra
        return line

    def write(
        self,
        lines: Iterable[Mapping[str, Any]],
        out_dir: Path,
        *,
        open_media: Callable[[str], BinaryIO] | None = None,
    ) -> list[Path]:
        rows, written = [], []
        for line in lines:
            if line.get("answer") not in ("A", "B"):
                raise FormatRefused(f"item {line.get('id')}: a sheet row needs the answer (open or not)")
            rows.append(
                {
                    "key": line["id"],
                    "picture": line["image"],
                    "thing": line["object"],
                    "open": line["answer"] == "A",
                    **(line.get("extra") or {}),
                }
            )
            if open_media is not None:
                target = out_dir / line["image"]
                target.parent.mkdir(parents=True, exist_ok=True)
                with open_media(line["image"]) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                written.append(target)
        sheet = out_dir / SHEET
        sheet.write_text(json.dumps({"lids": rows}, indent=1), encoding="utf-8")
        return [sheet, *written]


class LidGuesses(ReleaseFormat):
    name = "lid-guesses"
    label = "a made-up predictions file (never an item file)"
    kind = "predictions"

    def detect(self, path: Path) -> bool:
        return _sheet(path) is not None

    def read(self, path: Path, *, media_root: Path | None = None) -> Conversion:
        raise AssertionError("an item import never reads a predictions format")


FORMATS = (LidGuesses(), LidSheet())
