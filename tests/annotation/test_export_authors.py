"""A release written back in an authors' format (annotation/interchange/authors.py, `export_release
--format NAME`): the frozen lines and media through the protocol's writer, into a folder or a zip,
all or nothing. On the test-only protocol's made-up format (tests/protocols/sample_protocol/formats.py):
its sheet imported, verified, frozen and exported gives the sheet back, pictures and kept fields included.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from django.core.management.base import CommandError

from annotation.importing import items_import
from annotation.interchange.authors import AuthorsExportError, authors_export, authors_export_formats
from annotation.models import AuditEvent, Item
from annotation.releases import release_freeze
from protocols import registry
from tests.helpers.items import run_command

from .test_import_authors_formats import ROWS, sheet_folder

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _sample_protocol(settings):
    settings.STATELAB_PROTOCOLS = [*registry.BUILT_IN, "tests.protocols.sample_protocol"]


@pytest.fixture
def release(make_project, tmp_path):
    project = make_project("lids", "lidcheck")
    folder = sheet_folder(tmp_path / "published", ROWS[:2])
    items_import(project=project, path=folder, verified=True)
    return release_freeze(project=project, version="v1")


def test_a_release_exports_back_in_the_authors_format_as_it_was_published(release, tmp_path):
    out = run_command("export_release", "lids", "v1", "--format", "lid-sheet", "-o", str(tmp_path / "back"))
    assert out == ""
    published, back = tmp_path / "published", tmp_path / "back"
    assert json.loads((back / "lids.json").read_text()) == {"lids": ROWS[:2]}
    for row in ROWS[:2]:
        assert (back / row["picture"]).read_bytes() == (published / row["picture"]).read_bytes()
    assert sorted(p.relative_to(back).as_posix() for p in back.rglob("*") if p.is_file()) == [
        "lids.json",
        "pics/lid-0.png",
        "pics/lid-1.png",
    ]
    assert AuditEvent.objects.filter(action="export").get().details == {"format": "lid-sheet", "source": "cli"}
    # What the export wrote imports again as the same items.
    again = items_import(project=release.project, path=back, verified=True)
    assert (again.format, again.created, again.unchanged) == ("lid-sheet", 0, 2)


def test_a_zip_export_holds_the_same_files(release, tmp_path):
    run_command("export_release", "lids", "v1", "--format", "lid-sheet", "-o", str(tmp_path / "lids.zip"))
    with zipfile.ZipFile(tmp_path / "lids.zip") as zf:
        assert sorted(zf.namelist()) == ["lids.json", "pics/lid-0.png", "pics/lid-1.png"]
        assert json.loads(zf.read("lids.json")) == {"lids": ROWS[:2]}
    assert not list(tmp_path.glob(".lids.zip*"))


def test_the_export_reads_the_frozen_release_not_the_live_items(release, tmp_path):
    Item.objects.filter(external_id="lid-0").update(
        payload={**Item.objects.get(external_id="lid-0").payload, "object": "mug"}
    )
    authors_export(release, "lid-sheet", tmp_path / "back")
    assert json.loads((tmp_path / "back/lids.json").read_text())["lids"][0]["thing"] == "jar"


def test_unknown_or_read_only_formats_are_refused_naming_those_there_are(release, tmp_path):
    assert [f.name for f in authors_export_formats("lidcheck")] == ["lid-sheet"]
    with pytest.raises(CommandError) as exc:
        run_command("export_release", "lids", "v1", "--format", "lid-guesses", "-o", str(tmp_path / "x"))
    assert str(exc.value) == (
        "unknown format 'lid-guesses'; use one of json, jsonl, zip, coco, hf, lmms-eval, or one of the "
        "authors' formats of protocol lidcheck: lid-sheet"
    )
    with pytest.raises(CommandError, match="needs -o DIR"):
        run_command("export_release", "lids", "v1", "--format", "lid-sheet")
    assert not (tmp_path / "x").exists() and not AuditEvent.objects.filter(action="export").exists()


def test_a_folder_that_is_not_empty_is_left_alone(release, tmp_path):
    (tmp_path / "back").mkdir()
    (tmp_path / "back/notes.txt").write_text("mine")
    with pytest.raises(AuthorsExportError, match="exists and is not an empty folder"):
        authors_export(release, "lid-sheet", tmp_path / "back")
    assert [p.name for p in (tmp_path / "back").iterdir()] == ["notes.txt"]


def test_a_writer_that_refuses_leaves_nothing_behind(release, tmp_path, monkeypatch):
    from annotation.models import ReleaseItem

    row = ReleaseItem.objects.get(release=release, position=1)
    row.payload = {k: v for k, v in row.payload.items() if k != "answer"}
    row.save(update_fields=["payload"])
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(CommandError) as exc:
        run_command("export_release", "lids", "v1", "--format", "lid-sheet", "-o", str(out / "back"))
    assert str(exc.value) == (
        "release v1 cannot be written as lids.json (the lid check sheet): item lid-1: a sheet row needs the "
        "answer (open or not); nothing was written"
    )
    assert list(out.iterdir()) == []
    with pytest.raises(CommandError):
        run_command("export_release", "lids", "v1", "--format", "lid-sheet", "-o", str(out / "back.zip"))
    assert list(out.iterdir()) == []
    assert not AuditEvent.objects.filter(action="export").exists()


def test_media_missing_from_the_release_refuses_the_export(release, tmp_path):
    from annotation.models import ReleaseItem

    row = ReleaseItem.objects.get(release=release, position=0)
    row.payload = {**row.payload, "image": "pics/elsewhere.png"}
    row.save(update_fields=["payload"])
    with pytest.raises(AuthorsExportError, match="names no media file 'pics/elsewhere.png'"):
        authors_export(release, "lid-sheet", Path(tmp_path / "back"))
    assert not (tmp_path / "back").exists()


def test_the_download_is_a_zip_and_a_refusal_comes_before_any_byte(release, tmp_path):
    import io

    from annotation.interchange.authors import authors_download_response
    from annotation.models import ReleaseItem

    response = authors_download_response(release, "lid-sheet")
    assert response["Content-Disposition"] == 'attachment; filename="lids-v1.lid-sheet.zip"'
    with zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))) as zf:
        assert json.loads(zf.read("lids.json")) == {"lids": ROWS[:2]}
    assert AuditEvent.objects.filter(action="export").count() == 1

    row = ReleaseItem.objects.get(release=release, position=0)
    row.payload = {k: v for k, v in row.payload.items() if k != "answer"}
    row.save(update_fields=["payload"])
    with pytest.raises(AuthorsExportError, match="a sheet row needs the answer"):
        authors_download_response(release, "lid-sheet")
    assert AuditEvent.objects.filter(action="export").count() == 1
