"""Item imports in an authors' format (protocols/kit/releases.py), through the one importer: the
format is detected or named, converted to item lines, checked and written all or nothing; the
report names the format, the reader's notes and the fields kept. Run on the test-only protocol's
made-up format (tests/protocols/sample_protocol/formats.py), so nothing here depends on a
benchmark's reader; the command, the API, the page and zipped folders take the same files.
"""

from __future__ import annotations

import io
import json
import stat
import warnings
import zipfile
from pathlib import Path

import pytest
from django.core.management.base import CommandError
from django.urls import get_resolver

from annotation.importing import ImportRefused, items_import
from annotation.importing.samples import make_image
from annotation.models import ImportRun, Item, MediaAsset, Project, Role
from protocols import registry
from tests.helpers.clients import logged_in, token_client
from tests.helpers.items import run_command

get_resolver().url_patterns  # noqa: B018  (loaded before the setting changes, as in a server)

pytestmark = pytest.mark.django_db(transaction=True)  # uploads are sent when their run is committed


@pytest.fixture(autouse=True)
def _sample_protocol(settings):
    settings.STATELAB_PROTOCOLS = [*registry.BUILT_IN, "tests.protocols.sample_protocol"]


ROWS = [
    {"key": "lid-0", "picture": "pics/lid-0.png", "thing": "jar", "open": True, "shelf": 3},
    {"key": "lid-1", "picture": "pics/lid-1.png", "thing": "tin", "open": False, "shelf": 1, "batch": "b"},
    {"key": "lid-2", "picture": "pics/lid-2.png", "thing": "pot", "open": None},
]


def sheet_folder(root: Path, rows=ROWS, *, name: str = "lids.json") -> Path:
    """The made-up release: lids.json and its pictures."""
    for n, row in enumerate(rows):
        if isinstance(row.get("picture"), str):
            make_image(root / row["picture"], n, n % 2)
    (root / name).write_text(json.dumps({"lids": rows}, indent=1), encoding="utf-8")
    return root


def zip_of(folder: Path, target: Path, *, inside: str = "") -> Path:
    with zipfile.ZipFile(target, "w") as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, inside + p.relative_to(folder).as_posix())
    return target


@pytest.fixture
def lids(make_project):
    return make_project("lids", "lidcheck")


def refused(project, path, **kw) -> list[str]:
    with pytest.raises(ImportRefused) as exc:
        items_import(project=project, path=path, **kw)
    return exc.value.errors


def test_the_format_is_detected_and_its_rows_go_through_the_importer(lids, tmp_path):
    folder = sheet_folder(tmp_path / "release")

    report = items_import(project=lids, path=folder / "lids.json")

    assert (report.format, report.format_label) == ("lid-sheet", "lids.json (the lid check sheet)")
    assert report.notes == ["3 rows of lids.json; each question written from the object's name"]
    assert report.kept_fields == ["batch", "shelf"]
    assert report.kept_sentence() == "kept 2 fields not in the protocol: batch, shelf"
    assert (report.lines, report.created, report.by_status, report.media_files) == (
        3,
        3,
        {"annotated": 2, "pending": 1},
        3,
    )
    payloads = dict(Item.objects.values_list("external_id", "payload"))
    assert payloads["lid-1"] == {
        "image": "pics/lid-1.png",
        "object": "tin",
        "question": "Is the tin's lid open?",
        "options": ["yes", "no"],
        "answer": "B",
        "extra": {"shelf": 1, "batch": "b"},
    }
    assert "extra" not in payloads["lid-2"] and "answer" not in payloads["lid-2"]
    assert report.as_dict()["format"] == "lid-sheet" and report.as_dict()["kept"] == report.kept_sentence()
    # The same release again, given as its folder: detected there too, nothing new.
    again = items_import(project=lids, path=folder)
    assert (again.format, again.created, again.unchanged) == ("lid-sheet", 0, 3)


def test_a_named_format_skips_detection_and_an_unknown_name_lists_the_formats(lids, tmp_path):
    folder = sheet_folder(tmp_path / "release", name="sheet.json")  # the format knows its file by name
    assert refused(lids, folder / "sheet.json") == [
        'file: field -: found a JSON object with the keys "lids" and no "items" list; expected JSONL of item '
        'objects, a JSON array of items, {"items": [...]}, or a zip with items.jsonl, or one of the authors\' '
        "formats: lid-sheet (lids.json (the lid check sheet))"
    ]
    report = items_import(project=lids, path=folder / "sheet.json", format_name="lid-sheet")
    assert (report.format, report.created) == ("lid-sheet", 3)
    assert refused(lids, folder / "sheet.json", format_name="lid-guesses") == [
        "file: field format: unknown format 'lid-guesses' for protocol lidcheck; the formats there are: "
        "statelab, lid-sheet"
    ]
    # statelab: the project's own reading, whatever a format would say.
    assert refused(lids, folder / "sheet.json", format_name="statelab")[0].startswith(
        'file: field -: found a JSON object with the keys "lids"'
    )


def test_a_row_the_importer_refuses_is_named_by_its_row_and_nothing_is_written(lids, tmp_path, _media_root):
    rows = [*ROWS[:2], {"key": "lid 9 ", "picture": "pics/missing.png", "thing": "cup", "open": True}]
    folder = sheet_folder(tmp_path / "release", rows)
    with pytest.raises(ImportRefused) as exc:
        items_import(project=lids, path=folder)
    assert exc.value.errors == ["row 3: field id: at most 200 characters, no surrounding spaces"]
    assert exc.value.read_as == "lids.json (the lid check sheet)"
    assert not Item.objects.exists() and not MediaAsset.objects.exists()
    assert not [p for p in _media_root.rglob("*") if p.is_file()]


def test_a_file_the_reader_refuses_gives_its_one_message(lids, tmp_path):
    sheet = tmp_path / "lids.json"
    sheet.write_text('{"lids": {"not": "a list"}}')
    assert refused(lids, sheet) == [
        'file: field -: lids.json: no "lids" list; expected {"lids": [...]} (read as lids.json (the lid check sheet))'
    ]
    assert not Item.objects.exists()


def test_the_command_reads_the_format_reports_it_and_strict_refuses_kept_fields(lids, tmp_path):
    folder = sheet_folder(tmp_path / "release")
    with pytest.raises(CommandError, match=r"import refused \(read as lids.json \(the lid check sheet\)\): 2 error"):
        run_command("import_items", "lids", str(folder), "--strict")
    assert not Item.objects.exists()

    out = run_command("import_items", "lids", str(folder / "lids.json"), "--format", "lid-sheet")
    assert out.splitlines()[1:] == [
        "read as lid-sheet: lids.json (the lid check sheet)",
        "- 3 rows of lids.json; each question written from the object's name",
        "kept 2 fields not in the protocol: batch, shelf (stored in each item's extra; --strict refuses them)",
    ]
    with pytest.raises(CommandError, match="unknown format 'nope'"):
        run_command("import_items", "lids", str(folder), "--format", "nope")


def test_a_folder_in_no_format_is_refused_naming_what_is_expected(lids, tmp_path):
    (tmp_path / "empty").mkdir()
    assert refused(lids, tmp_path / "empty") == [
        "file: field -: empty is a folder in none of the formats of protocol lidcheck; expected JSONL of item "
        'objects, a JSON array of items, {"items": [...]}, or a zip with items.jsonl, or one of the authors\' '
        "formats: lid-sheet (lids.json (the lid check sheet))"
    ]


# --- uploads: the API and the page -------------------------------------------------------------------


@pytest.fixture
def researcher(make_user, lids):
    user = make_user("res")
    lids.memberships.create(user=user, role=Role.RESEARCHER)
    return user


def upload(path: Path) -> io.BytesIO:
    body = io.BytesIO(path.read_bytes())
    body.name = path.name
    return body


def test_a_zipped_release_folder_uploads_through_the_api_and_is_detected_inside(researcher, tmp_path, eager):
    folder = sheet_folder(tmp_path / "release")
    archive = zip_of(folder, tmp_path / "release.zip", inside="release/")  # zip -r release.zip release/
    api = token_client(researcher)

    queued = api.post("/api/projects/lids/imports/", {"file": upload(archive)}, format="multipart")

    assert queued.status_code == 202, queued.content
    run = api.get(queued["Location"]).json()
    assert (run["status"], run["format"], run["strict"], run["read_as"], run["errors"]) == (
        "finished",
        None,
        False,
        "lids.json (the lid check sheet)",
        [],
    )
    report = run["report"]
    assert (report["created"], report["format"], report["kept_fields"], report["by_status"]) == (
        3,
        "lid-sheet",
        ["batch", "shelf"],
        {"annotated": 2, "pending": 1},
    )
    assert report["notes"] == ["3 rows of lids.json; each question written from the object's name"]
    assert not list((Path(tmp_path) / "cache" / "imports").iterdir())  # the working folders are gone


def test_an_uploaded_sheet_is_read_under_its_own_name_and_the_format_field_is_passed(researcher, tmp_path, eager):
    folder = sheet_folder(tmp_path / "release")
    api = token_client(researcher)
    bad = api.post(
        "/api/projects/lids/imports/", {"file": upload(folder / "lids.json"), "format": "csv"}, format="multipart"
    )
    assert bad.status_code == 400 and bad.json() == {
        "format": ["unknown format 'csv' for protocol lidcheck; the formats there are: statelab, lid-sheet"]
    }
    assert not ImportRun.objects.exists()

    # A bare file's media come from the server's import folder, not from beside the upload.
    queued = api.post(
        "/api/projects/lids/imports/",
        {"file": upload(folder / "lids.json"), "format": "lid-sheet", "strict": "true"},
        format="multipart",
    )
    run = api.get(queued["Location"]).json()
    assert (run["status"], run["format"], run["strict"], run["read_as"]) == (
        "refused",
        "lid-sheet",
        True,
        "lids.json (the lid check sheet)",
    )
    assert run["errors"] == [
        "row 1: field extra: unknown field for protocol lidcheck (refused by --strict)",
        "row 2: field extra: unknown field for protocol lidcheck (refused by --strict)",
        "row 3: field image: pics/lid-2.png: file not found under the media root",
    ]
    assert run["report"] is None and not Item.objects.exists()


def test_the_page_offers_the_formats_and_shows_what_was_read(researcher, tmp_path, eager):
    folder = sheet_folder(tmp_path / "release")
    archive = zip_of(folder, tmp_path / "lids.zip")
    page = logged_in(researcher)
    form = page.get("/projects/lids/import/").content.decode()
    assert '<option value="lid-sheet">lid-sheet: lids.json (the lid check sheet)</option>' in form
    assert '<option value="statelab">' in form and 'name="strict"' in form

    wrong = page.post("/projects/lids/import/", {"file": upload(archive), "kind": "items", "format": "xlsx"})
    assert wrong.status_code == 400 and "unknown format &#x27;xlsx&#x27;" in wrong.content.decode()

    done = page.post(
        "/projects/lids/import/", {"file": upload(archive), "kind": "items", "format": "lid-sheet"}, follow=True
    )
    html = done.content.decode()
    assert '<strong id="created">3</strong>' in html
    assert "Read as lids.json (the lid check sheet) (<code>lid-sheet</code>)." in html
    assert "<li>3 rows of lids.json; each question written from the object&#x27;s name</li>" in html
    assert "Kept 2 fields not in the protocol: batch, shelf: stored with each item" in html


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        ("../evil.png", "path leaves the media root ('..')"),
        ("/abs.png", "absolute paths are refused; give a path relative to the media root"),
        ("link.png", "symlinks inside the zip are refused"),
        ("lids.json", "appears twice in the zip"),
    ],
)
def test_a_zip_with_a_member_leaving_the_folder_or_a_symlink_is_refused_whole(lids, tmp_path, member, reason):
    folder = sheet_folder(tmp_path / "release")
    archive = zip_of(folder, tmp_path / "bad.zip")
    with zipfile.ZipFile(archive, "a") as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name the test writes
        info = zipfile.ZipInfo(member)
        if member == "link.png":
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    assert refused(lids, archive, confined=True) == [f"file: field -: zip entry {member!r}: {reason}"]
    assert not Item.objects.exists()
    assert not (tmp_path / "evil.png").exists()


def test_a_zip_member_larger_than_the_limit_is_refused_before_anything_is_stored(lids, tmp_path, settings):
    folder = sheet_folder(tmp_path / "release")
    archive = zip_of(folder, tmp_path / "big.zip")
    settings.IMPORT_MAX_FILE_BYTES = 100
    errors = refused(lids, archive, confined=True)
    assert len(errors) == 1 and errors[0].startswith("file: field -: zip entry ")
    assert errors[0].endswith(": file is larger than 100 bytes")
    assert not Project.objects.get(slug="lids").items.exists()


def test_an_item_import_never_asks_a_format_of_another_kind(lids, tmp_path):
    # lid-guesses (predictions) claims every .json; an items file nobody else claims stays the project's own.
    lines = [
        {"id": "x", "image": "pics/lid-0.png", "object": "jar", "question": "Open?", "options": ["yes", "no"]},
    ]
    make_image(tmp_path / "pics/lid-0.png", 0, 0)
    (tmp_path / "items.json").write_text(json.dumps(lines))
    report = items_import(project=lids, path=tmp_path / "items.json")
    assert (report.format, report.created) == ("statelab", 1)
