"""The authors' VisualTrans.json, as published, through the one command a researcher runs:
`import_items` detects the format, reports the duplicate row, keeps the authors' fields that are
not the protocol's (the 30 masks) with each item, and a frozen release exports back in their shape."""

from __future__ import annotations

import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from annotation.models import Item, ItemStatus

from . import authors_eval
from .helpers import write_images

pytestmark = pytest.mark.django_db

RELEASE = Path(__file__).resolve().parents[2] / "fixtures/authors/VisualTrans.json"


def test_the_real_release_imports_in_one_command_and_exports_back(tmp_path):
    folder = tmp_path / "VisualTrans"
    folder.mkdir()
    shutil.copyfile(RELEASE, folder / "VisualTrans.json")
    rows = json.loads(RELEASE.read_text(encoding="utf-8"))
    write_images(folder, sorted({path for row in rows for path in row["images"]}))

    out = StringIO()
    call_command("import_items", "vt", str(folder), "--protocol", "visualtrans", "--create", "--verified", stdout=out)
    said = out.getvalue()
    assert "read as visualtrans" in said and "row 307 repeats row 301" in said, said
    items = Item.objects.filter(project__slug="vt")
    assert items.count() == 496 and set(items.values_list("status", flat=True)) == {ItemStatus.VERIFIED}
    masked = [p for p in items.values_list("payload", flat=True) if "mask" in (p.get("extra") or {})]
    assert len(masked) == sum(1 for row in rows if "mask" in row)  # the duplicate row has no mask
    # a second run of the same file changes nothing
    again = StringIO()
    call_command("import_items", "vt", str(folder), "--protocol", "visualtrans", "--verified", stdout=again)
    assert Item.objects.filter(project__slug="vt").count() == 496

    call_command("freeze_release", "vt", "v1", stdout=StringIO())
    exported = tmp_path / "export"
    call_command("export_release", "vt", "v1", "--format", "visualtrans", "-o", str(exported), stdout=StringIO())
    written = json.loads((exported / "VisualTrans.json").read_text(encoding="utf-8"))
    assert len(written) == 496
    by_question = {(r["scene"], tuple(r["images"]), r["question"]): r for r in written}
    for row in rows:  # every original row (the duplicate too) is back with its label and its mask
        back = by_question[(row["scene"], tuple(row["images"]), row["question"])]
        assert back.get("mask") == row.get("mask")
        assert [s.strip() for s in str(back["label"]).split(",")] == [s.strip() for s in str(row["label"]).split(",")]
    loaded = authors_eval.load(exported / "VisualTrans.json", exported / "images")
    assert len(loaded) == 496
