"""Bounded import input: a JSONL line longer than STATELAB_MAX_LINE_BYTES is
refused without being read whole, a zip declaring more than STATELAB_MAX_ZIP_BYTES uncompressed is
refused from its central directory before anything is extracted, and NUL bytes anywhere in a line
(fields, media paths, annotator ids) are refused with the line and field — an import run with one
ends with its message instead of staying `running`. All at the production defaults."""

from __future__ import annotations

import json
import struct
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile

from annotation.importing import ImportRefused, items_import
from annotation.importing.annotations import annotations_import
from annotation.importing.runs import import_run_queue
from annotation.importing.samples import make_image, sample_line
from annotation.models import ImportKind, ImportRun, Item, MediaAsset
from background.models import RunStatus
from tests.helpers.files import write_lines

pytestmark = pytest.mark.django_db
MiB, GiB = 1024**2, 1024**3


def test_the_defaults_are_sane():
    assert django_settings.STATELAB_MAX_LINE_BYTES == 1 * MiB
    assert django_settings.STATELAB_MAX_ZIP_BYTES == 16 * GiB
    assert django_settings.STATELAB_MAX_UPLOAD_BYTES == 2 * GiB


def refused(project, path, **kw) -> list[str]:
    with pytest.raises(ImportRefused) as exc:
        items_import(project=project, path=path, **kw)
    return exc.value.errors


def stored(media_root: Path) -> list[Path]:
    return [p for p in media_root.rglob("*") if p.is_file()]


# --- line length ------------------------------------------------------------------------------------


def one_gib_line_zip(path: Path) -> Path:
    """About 1 MB on disk: items.jsonl is a single line of 1 GiB (what drove a web worker to 3.1 GB)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        with zf.open("items.jsonl", "w", force_zip64=True) as out:
            out.write(b'{"id": "x", "object": "')
            block = b"a" * (8 * MiB)
            for _ in range(GiB // len(block)):
                out.write(block)
            out.write(b'"}\n')
    return path


def test_a_one_gib_line_is_refused_without_being_read_into_memory(make_project, tmp_path, _media_root):
    project = make_project("boxes", "changeit")
    archive = one_gib_line_zip(tmp_path / "bomb.zip")
    assert archive.stat().st_size < 5 * MiB

    tracemalloc.start()
    try:
        errors = refused(project, archive)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert errors == [
        f"line 1: field -: longer than {MiB} bytes (STATELAB_MAX_LINE_BYTES); the file was not read past this line"
    ]
    assert peak < 64 * MiB, f"peak Python allocation {peak / MiB:.0f} MiB"
    assert not Item.objects.exists() and stored(_media_root) == []


def test_a_line_just_over_the_cap_is_refused_and_one_at_the_cap_is_read(make_project, tmp_path):
    project = make_project("boxes", "changeit")
    make_image(tmp_path / "a.png", 0, 0)
    head = {"id": "b1", "image": "a.png", "object": "apple", "state": ""}
    filler = MiB - len(json.dumps(head))
    at_cap = json.dumps({**head, "state": "s" * filler})
    assert len(at_cap.encode()) == MiB

    path = write_lines(tmp_path / "ok.jsonl", [at_cap])
    assert refused(project, path) == ["line 1: field state: longer than 2000 characters"]  # read, then checked
    over = write_lines(
        tmp_path / "over.jsonl",
        [sample_line("changeit", 0, media={"image": "a.png"}), json.dumps({**head, "state": "s" * (filler + 1)})],
    )
    assert refused(project, over) == [
        f"line 2: field -: longer than {MiB} bytes (STATELAB_MAX_LINE_BYTES); the file was not read past this line"
    ]


def test_annotation_imports_take_the_same_line_cap(make_project, tmp_path):
    project = make_project("vt", "visualtrans")
    path = tmp_path / "answers.jsonl"
    path.write_bytes(b'{"item": "' + b"q" * (MiB + 10) + b'"}\n')
    with pytest.raises(ImportRefused) as exc:
        annotations_import(project=project, path=path)
    assert exc.value.errors == [
        f"line 1: field -: longer than {MiB} bytes (STATELAB_MAX_LINE_BYTES); the file was not read past this line"
    ]


# --- zip size ---------------------------------------------------------------------------------------


def claiming_zip(path: Path, members: int, claimed: int | None) -> Path:
    """A small zip whose central directory claims `claimed` uncompressed bytes per member."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("items.jsonl", "{}\n")
        for i in range(members):
            zf.writestr(f"media/{i}.png", b"tiny")
    if claimed is None:
        return path
    data = bytearray(path.read_bytes())
    offset = 0
    while (offset := data.find(b"PK\x01\x02", offset)) != -1:  # central directory headers
        struct.pack_into("<I", data, offset + 24, claimed)  # uncompressed size
        offset += 4
    path.write_bytes(bytes(data))
    return path


def test_a_zip_declaring_more_than_the_cap_is_refused_before_extraction(make_project, tmp_path, _media_root):
    project = make_project("boxes", "changeit")
    # 5 members (items.jsonl and 4 images) of 3.75 GiB each (no zip64 needed): 18.75 GiB declared,
    # above the 16 GiB default.
    archive = claiming_zip(tmp_path / "big.zip", 4, 0xF0000000)
    declared = sum(i.file_size for i in zipfile.ZipFile(archive).infolist())
    assert declared > django_settings.STATELAB_MAX_ZIP_BYTES

    assert refused(project, archive) == [
        f"file: field -: the zip holds {declared} bytes uncompressed, more than the limit of {16 * GiB} bytes "
        "(STATELAB_MAX_ZIP_BYTES); nothing was extracted"
    ]
    assert stored(_media_root) == [] and not MediaAsset.objects.exists()


def test_a_zip_under_the_cap_is_read(make_project, tmp_path):
    project = make_project("boxes", "changeit")
    archive = claiming_zip(tmp_path / "ok.zip", 1, None)
    assert refused(project, archive)[0] == "line 1: field id: required, a non-empty string"


# --- NUL bytes --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"image": "a\u0000.png"}, "image"),
        ({"object": "app\u0000le"}, "object"),
        ({"distractors": ["ok", "bad\u0000"]}, "distractors[1]"),
        ({"id": "b\u00001"}, "id"),
        ({"tags": ["\u0000"]}, "tags[0]"),
    ],
)
def test_a_nul_byte_anywhere_in_an_item_line_is_refused_with_its_field(
    make_project, tmp_path, _media_root, changes, field
):
    project = make_project("boxes", "changeit")
    make_image(tmp_path / "a.png", 0, 0)
    line = {**sample_line("changeit", 0, media={"image": "a.png"}), **changes}
    path = write_lines(tmp_path / "items.jsonl", [sample_line("changeit", 1, media={"image": "a.png"}), line])

    assert refused(project, path) == [
        f"line 2: field {field}: contains a NUL byte (\\u0000), which is never valid input"
    ]
    assert not Item.objects.exists() and stored(_media_root) == []


def test_a_nul_byte_in_an_imported_annotation_is_refused(make_project, tmp_path):
    project = make_project("vt", "visualtrans")
    path = write_lines(tmp_path / "a.jsonl", [{"item": "q1", "annotator": "h\u00001", "answer": "A", "flags": []}])
    with pytest.raises(ImportRefused) as exc:
        annotations_import(project=project, path=path)
    assert exc.value.errors == ["line 1: field annotator: contains a NUL byte (\\u0000), which is never valid input"]


def test_an_import_run_with_a_nul_in_a_media_path_ends_refused_with_its_message(
    make_project, make_user, eager, django_capture_on_commit_callbacks
):
    user = make_user("res")
    project = make_project("boxes", "changeit")
    line = json.dumps({"id": "b1", "image": "img/a\u0000.png", "object": "apple", "state": "whole apple"})
    upload = SimpleUploadedFile("items.jsonl", (line + "\n").encode())

    with django_capture_on_commit_callbacks(execute=True):
        run = import_run_queue(project=project, user=user, uploaded=upload, kind=ImportKind.ITEMS)

    run = ImportRun.objects.get(pk=run.pk)
    assert (run.status, run.errors) == (
        RunStatus.REFUSED,
        ["line 1: field image: contains a NUL byte (\\u0000), which is never valid input"],
    )
    assert run.finished_at is not None and not Item.objects.exists()


def test_an_upload_named_with_a_nul_is_recorded_without_it(
    make_project, make_user, eager, django_capture_on_commit_callbacks
):
    user = make_user("res")
    project = make_project("boxes", "changeit")
    upload = SimpleUploadedFile("ite\u0000ms.jsonl", b"{}\n")

    with django_capture_on_commit_callbacks(execute=True):
        run = import_run_queue(project=project, user=user, uploaded=upload, kind=ImportKind.ITEMS)

    run = ImportRun.objects.get(pk=run.pk)
    assert run.file_name == "items.jsonl" and run.status == RunStatus.REFUSED
