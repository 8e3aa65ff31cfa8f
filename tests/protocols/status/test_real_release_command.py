"""The authors' STATUS_Bench.json, as published, through the one command a researcher runs:
`import_items` detects the format, keeps the authors' provenance with each item, a frozen release
exports back to the same bytes, and model answers imported against it score on the board."""

from __future__ import annotations

import json
import shutil
from io import StringIO

import pytest
from django.core.management import call_command
from PIL import Image

from annotation.models import Item, ItemStatus
from annotation.releases import release_lines
from evaluation import leaderboard
from tests.helpers.files import write_predictions

from .authors import FIXTURE

pytestmark = pytest.mark.django_db


@pytest.fixture
def bench_folder(tmp_path):
    """The real file with the images the authors' extractor would leave beside it (small PNGs)."""
    folder = tmp_path / "Bench"
    (folder / "images").mkdir(parents=True)
    shutil.copyfile(FIXTURE, folder / "STATUS_Bench.json")
    for row in json.loads(FIXTURE.read_text(encoding="utf-8")):
        for k in (0, 1):
            Image.new("RGB", (4, 3), (row["id"] % 256, k * 200, 7)).save(folder / "images" / f"{row[f'image_{k}']}.png")
    return folder


def test_the_real_release_imports_exports_back_byte_identical_and_scores(bench_folder, tmp_path):
    out = StringIO()
    call_command("import_items", "sb", str(bench_folder), "--protocol", "status", "--create", "--verified", stdout=out)
    said = out.getvalue()
    assert "status-bench" in said, said
    items = Item.objects.filter(project__slug="sb")
    assert items.count() == 404 and set(items.values_list("status", flat=True)) == {ItemStatus.VERIFIED}
    first = items.get(external_id="0")
    # provenance kept with the item (never shown to annotators: the annotator payload is an allow-list)
    assert first.payload["extra"]["video_id"] == "6099730e-7a7c-41ce-8266-83a9f00cacec"
    assert (first.payload["extra"]["frame_0"], first.payload["extra"]["frame_1"]) == (6224, 6291)
    assert "category" not in first.payload and "difference" not in first.payload

    call_command("freeze_release", "sb", "v1", stdout=StringIO())
    exported = tmp_path / "export"
    call_command("export_release", "sb", "v1", "--format", "status-bench", "-o", str(exported), stdout=StringIO())
    assert (exported / "STATUS_Bench.json").read_bytes() == FIXTURE.read_bytes()
    assert len(list((exported / "images").glob("*.png"))) == 808

    # An oracle (every query's right letter) and a model that always answers "A".
    from annotation.models import Release

    lines = list(release_lines(Release.objects.get(project__slug="sb", version="v1")))
    oracle = [{"item": ln["id"], "query": q, "answer": r["answer"]} for ln in lines for q, r in ln["resolved"].items()]
    always_a = [{"item": ln["id"], "query": q, "answer": "A"} for ln in lines for q in ln["resolved"]]
    for name, predictions in (("oracle", oracle), ("always-a", always_a)):
        (tmp_path / name).mkdir()
        path = write_predictions(tmp_path / name, predictions)
        call_command("import_predictions", "sb", str(path), "--model", name, "--release", "v1", stdout=StringIO())

    board = leaderboard.build(first.project, release_version="v1", n_boot=50)
    rows = {row["model"]: row for row in board["rows"]}
    assert rows["oracle"]["n"] == 404
    assert all(value == 100.0 for value in rows["oracle"]["metrics"].values()), rows["oracle"]["metrics"]
    # OSI: a query is right when its letter is the right one; "A" is right where the answer is A.
    osi = [ln["resolved"][q]["answer"] == "A" for ln in lines for q in ln["resolved"] if q.startswith("osi")]
    assert rows["always-a"]["metrics"]["acc_osi"] == pytest.approx(100 * sum(osi) / len(osi), abs=0.01)
    # no breakdown tables: the release carries neither category nor difference
    assert leaderboard.breakdown_groups(board) == {}
