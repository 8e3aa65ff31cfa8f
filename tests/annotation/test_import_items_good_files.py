"""Item import of good files: every protocol's sample file imports with its media recorded (from a
folder or a zip; raw items pending, --verified ones verified); a re-import changes nothing, a
longer file adds only the new items, media shared by two projects is stored once; the import_items
command creates the project and reports, or creates nothing when refused; a --verified re-import
promotes identical items and nothing when refused; gold items are flagged, offered pending, and
need their known answer. Refusals: tests/annotation/test_import_items_refusals.py."""

from __future__ import annotations

import json
import zipfile

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.importing import items_import
from annotation.importing.samples import make_video, write_sample_dataset
from annotation.models import Item, MediaAsset, Project
from tests.helpers.files import write_lines
from tests.helpers.item_import import assert_nothing_written, osc_line, refused, status_line, stored_files

pytestmark = pytest.mark.django_db

# --- good files -----------------------------------------------------------------------------------

EXPECTED_MEDIA = {"status": 8, "changeit": 4, "visualtrans": 8, "m3verse": 8, "oscbench": 4}


@pytest.mark.parametrize("protocol", ["status", "changeit", "visualtrans", "m3verse", "oscbench"])
def test_good_file_of_every_protocol_imports_with_media_recorded(protocol, make_project, data_dir, _media_root):
    project = make_project("p", protocol)
    path = write_sample_dataset(data_dir, protocol, 6)

    report = items_import(project=project, path=path)

    assert (report.lines, report.created, report.unchanged) == (6, 6, 0)
    assert report.media_files == EXPECTED_MEDIA[protocol]
    expected_status = "pending" if protocol == "oscbench" else "annotated"
    assert report.by_status == {expected_status: 6}
    assert Item.objects.filter(project=project, status=expected_status).count() == 6
    item = Item.objects.get(project=project, external_id=f"{protocol}-00000")
    first = json.loads(path.read_text().splitlines()[0])
    assert item.payload == {k: v for k, v in first.items() if k not in ("id", "split", "tags")}
    assert item.split == "test" and item.tags == ["sample"]
    shas = set(MediaAsset.objects.values_list("sha256", flat=True))
    used = {s for v in item.media.values() for s in (v if isinstance(v, list) else [v])}
    assert used <= shas
    assert len(stored_files(_media_root)) == MediaAsset.objects.count()
    for asset in MediaAsset.objects.all():
        assert asset.width == 160 and asset.height == 120 and asset.size_bytes > 0
        assert (_media_root / asset.file.name).is_file()
        if asset.kind == "video":
            assert asset.duration == pytest.approx(2.0, abs=0.01)
            assert asset.fps == pytest.approx(6.0) and asset.frame_count == 12


def test_raw_items_are_pending_and_verified_flag_marks_verified(make_project, data_dir):
    raw = make_project("raw", "status")
    ver = make_project("ver", "m3verse")
    items_import(project=raw, path=write_sample_dataset(data_dir / "raw", "status", 3, complete=False))
    items_import(project=ver, path=write_sample_dataset(data_dir / "ver", "m3verse", 3), verified=True)
    assert list(raw.items.values_list("status", flat=True).distinct()) == ["pending"]
    assert list(ver.items.values_list("status", flat=True).distinct()) == ["verified"]
    assert raw.items.get(external_id="status-00001").payload == {"image_a": "img/s1_a.png", "image_b": "img/s1_b.png"}


def test_zip_holding_items_and_media_imports(make_project, data_dir, tmp_path):
    project = make_project("z", "visualtrans")
    write_sample_dataset(data_dir, "visualtrans", 5)
    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for p in data_dir.rglob("*"):
            if p.is_file():
                zf.write(p, p.relative_to(data_dir).as_posix())
    report = items_import(project=project, path=archive)
    assert (report.created, report.media_files) == (5, 8)
    assert project.items.get(external_id="visualtrans-00002").payload["answer"] == ["apple"]


def test_reimporting_the_same_file_changes_nothing(status_project, data_dir, _media_root):
    path = write_sample_dataset(data_dir, "status", 5)
    items_import(project=status_project, path=path)
    before = list(
        Item.objects.order_by("id").values_list("id", "external_id", "payload", "media", "status", "updated_at")
    )
    files = stored_files(_media_root)

    again = items_import(project=status_project, path=path)

    assert (again.created, again.unchanged, again.media_stored) == (0, 5, 0)
    assert (
        list(Item.objects.order_by("id").values_list("id", "external_id", "payload", "media", "status", "updated_at"))
        == before
    )
    assert stored_files(_media_root) == files and MediaAsset.objects.count() == 8


def test_a_file_extending_an_earlier_import_adds_only_the_new_items(status_project, data_dir):
    items_import(project=status_project, path=write_sample_dataset(data_dir, "status", 3))
    report = items_import(project=status_project, path=write_sample_dataset(data_dir, "status", 5, name="more.jsonl"))
    assert (report.created, report.unchanged) == (2, 3)
    assert status_project.items.count() == 5


def test_same_media_in_two_projects_is_stored_once(make_project, data_dir, _media_root):
    path = write_sample_dataset(data_dir, "status", 2)
    items_import(project=make_project("one", "status"), path=path)
    report = items_import(project=make_project("two", "status"), path=path)
    assert report.media_stored == 0
    assert MediaAsset.objects.count() == 4 and len(stored_files(_media_root)) == 4  # 2 items x 2 images


def test_management_command_creates_the_project_and_reports(data_dir, capsys):
    path = write_sample_dataset(data_dir, "changeit", 4)
    call_command("import_items", "cmd", str(path), "--protocol", "changeit", "--create", "--verified")
    out = capsys.readouterr().out
    assert "cmd: 4 lines, 4 items created (verified 4), 0 unchanged" in out
    assert Project.objects.get(slug="cmd").protocol == "changeit"


def test_management_command_refusal_creates_no_project(data_dir, capsys, _media_root):
    path = write_lines(
        data_dir / "bad.jsonl", [{"id": "x", "image": "nope.png", "object": "door", "state": "a closed door"}]
    )
    with pytest.raises(CommandError, match="import refused: 1 error"):
        call_command("import_items", "cmd", str(path), "--protocol", "changeit", "--create")
    assert "line 1: field image: nope.png: file not found under the media root" in capsys.readouterr().err
    assert not Project.objects.filter(slug="cmd").exists()
    assert_nothing_written(_media_root)


# --- --verified on items already there ------------------------------------------------------------


def test_verified_reimport_promotes_identical_items(status_project, data_dir, capsys):
    path = write_sample_dataset(data_dir, "status", 4)
    items_import(project=status_project, path=path)  # annotated
    Item.objects.filter(external_id="status-00001").update(status="discarded")
    Item.objects.filter(external_id="status-00002").update(status="pending")
    Item.objects.filter(external_id="status-00003").update(status="verified")
    before = dict(Item.objects.values_list("external_id", "updated_at"))

    call_command("import_items", "st", str(path), "--verified")

    assert "st: 4 lines, 0 items created (none), 2 unchanged, 2 promoted to verified;" in capsys.readouterr().out
    assert dict(Item.objects.values_list("external_id", "status")) == {
        "status-00000": "verified",
        "status-00001": "discarded",
        "status-00002": "verified",
        "status-00003": "verified",
    }
    after = dict(Item.objects.values_list("external_id", "updated_at"))
    assert after["status-00001"] == before["status-00001"] and after["status-00003"] == before["status-00003"]
    again = items_import(project=status_project, path=path, verified=True)
    assert (again.created, again.unchanged, again.promoted) == (0, 4, 0)


def test_verified_reimport_promotes_nothing_when_refused(status_project, data_dir):
    path = write_sample_dataset(data_dir, "status", 3)
    items_import(project=status_project, path=path)
    lines = path.read_text().splitlines()
    changed = json.loads(lines[2]) | {"change": "shut it"}
    bad = write_lines(data_dir / "bad.jsonl", [json.loads(lines[0]), json.loads(lines[1]), changed])
    assert refused(status_project, bad, verified=True) == [
        "line 3: field id: item 'status-00002' already exists in the project with different content (payload)"
        "; import with update (import_items --update) to replace the content of existing items"
    ]
    assert set(Item.objects.values_list("status", flat=True)) == {"annotated"}


# --- gold items -------------------------------------------------------------------------------------


def test_gold_items_are_flagged_and_offered_pending(status_project, status_media):
    path = write_lines(
        status_media / "items.jsonl", [status_line(0, gold=True), status_line(1), status_line(2, gold=False)]
    )
    report = items_import(project=status_project, path=path, verified=True)
    assert report.by_status == {"pending": 1, "verified": 2}
    assert dict(Item.objects.values_list("external_id", "is_gold")) == {
        "status-00000": True,
        "status-00001": False,
        "status-00002": False,
    }
    gold = Item.objects.get(external_id="status-00000")
    assert gold.status == "pending" and "gold" not in gold.payload
    assert items_import(project=status_project, path=path).unchanged == 3
    flipped = write_lines(status_media / "flip.jsonl", [status_line(0)])
    assert refused(status_project, flipped) == [
        "line 1: field id: item 'status-00000' already exists in the project with different content (gold)"
        "; import with update (import_items --update) to replace the content of existing items"
    ]


def test_gold_needs_a_complete_item(status_project, status_media, osc_project, data_dir, _media_root):
    raw = {"id": "r", "image_a": "img/a.png", "image_b": "img/b.png", "gold": True}
    path = write_lines(status_media / "items.jsonl", [raw, status_line(1, gold="yes")])
    assert refused(status_project, path) == [
        "line 1: field gold: a gold item needs its known answer; this item is raw "
        "(give state_a, state_b, change, change_distractors too, or drop gold)",
        "line 2: field gold: must be true or false",
    ]
    # OSCBench's known answer is not a label but the expected rating (tests/annotation/test_gold_ratings.py).
    make_video(data_dir / "clip.mp4", 1)
    path = write_lines(data_dir / "osc.jsonl", [osc_line("clip.mp4") | {"gold": True}])
    assert refused(osc_project, path) == [
        "line 1: field gold: a gold oscbench item needs its known answer: give gold_scores too, or drop gold"
    ]
    assert_nothing_written(_media_root)
