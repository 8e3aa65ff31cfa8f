"""Item imports as the import tests check them (tests/annotation/test_import_items_*.py): a sample
status or OSCBench line, the messages of an import that must be refused, and the check that a
refused import wrote nothing: no item, no media asset, no file under MEDIA_ROOT."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotation.importing import ImportRefused, items_import
from annotation.importing.samples import sample_line
from annotation.models import Item, MediaAsset


def stored_files(media_root: Path) -> list[Path]:
    return sorted(p for p in media_root.rglob("*") if p.is_file())


def assert_nothing_written(media_root: Path) -> None:
    assert Item.objects.count() == 0
    assert MediaAsset.objects.count() == 0
    assert stored_files(media_root) == []


def refused(project, path, **kw) -> list[str]:
    with pytest.raises(ImportRefused) as exc:
        items_import(project=project, path=path, **kw)
    return exc.value.errors


def status_line(i: int, **changes) -> dict:
    line = sample_line("status", i, media={"image_a": "img/a.png", "image_b": "img/b.png"})
    line.update(changes)
    return {k: v for k, v in line.items() if v is not None}


def osc_line(video: str) -> dict:
    return sample_line("oscbench", 1, media={"video": video})
