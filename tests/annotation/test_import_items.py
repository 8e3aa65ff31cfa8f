"""Item import: every protocol's good file, one bad file per refusal rule, idempotency.

Every refused import asserts the exact "line N: field F: reason" message and that nothing was
written: no item, no media asset, no file under MEDIA_ROOT.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from PIL import Image

from annotation.importing import ImportRefused, items_import
from annotation.importing.samples import make_image, make_video, sample_line, write_sample_dataset
from annotation.models import Item, MediaAsset, Project
from tests.helpers.files import write_lines

pytestmark = pytest.mark.django_db


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


@pytest.fixture
def data_dir(tmp_path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


@pytest.fixture
def status_project(make_project):
    return make_project("st", "status")


@pytest.fixture
def status_media(data_dir) -> Path:
    make_image(data_dir / "img/a.png", 0, 0)
    make_image(data_dir / "img/b.png", 0, 2)
    return data_dir


def status_line(i: int, **changes) -> dict:
    line = sample_line("status", i, media={"image_a": "img/a.png", "image_b": "img/b.png"})
    line.update(changes)
    return {k: v for k, v in line.items() if v is not None}


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


# --- refusal rules: one bad file each -------------------------------------------------------------


def test_path_with_dotdot_is_refused(status_project, status_media, tmp_path, _media_root):
    make_image(tmp_path / "secret.png", 1, 1)
    path = write_lines(status_media / "items.jsonl", [status_line(0, image_a="../secret.png")])
    assert refused(status_project, path) == ["line 1: field image_a: ../secret.png: path leaves the media root ('..')"]
    assert_nothing_written(_media_root)


def test_absolute_path_is_refused(status_project, status_media, _media_root):
    absolute = str(status_media / "img/a.png")
    path = write_lines(status_media / "items.jsonl", [status_line(0), status_line(1, image_b=absolute)])
    assert refused(status_project, path) == [
        f"line 2: field image_b: {absolute}: absolute paths are refused; give a path relative to the media root"
    ]
    assert_nothing_written(_media_root)


def test_symlink_leaving_the_media_root_is_refused(status_project, status_media, tmp_path, _media_root):
    outside = make_image(tmp_path / "outside.png", 2, 1)
    os.symlink(outside, status_media / "img/link.png")
    path = write_lines(status_media / "items.jsonl", [status_line(0, image_a="img/link.png")])
    assert refused(status_project, path) == [
        "line 1: field image_a: img/link.png: path leaves the media root (symlink pointing outside)"
    ]
    assert_nothing_written(_media_root)


def test_missing_media_file_is_refused(status_project, status_media, _media_root):
    path = write_lines(status_media / "items.jsonl", [status_line(0, image_b="img/missing.png")])
    assert refused(status_project, path) == [
        "line 1: field image_b: img/missing.png: file not found under the media root"
    ]
    assert_nothing_written(_media_root)


def test_unreadable_image_is_refused(status_project, status_media, _media_root):
    (status_media / "img/noise.png").write_bytes(b"this is not an image at all" * 10)
    path = write_lines(status_media / "items.jsonl", [status_line(0, image_a="img/noise.png")])
    assert refused(status_project, path) == ["line 1: field image_a: img/noise.png: not a readable image"]
    assert_nothing_written(_media_root)


def test_truncated_image_is_refused(status_project, status_media, _media_root):
    Image.effect_noise((200, 200), 60).convert("RGB").save(status_media / "img/full.png")
    data = (status_media / "img/full.png").read_bytes()
    (status_media / "img/cut.png").write_bytes(data[: len(data) // 2])
    path = write_lines(status_media / "items.jsonl", [status_line(0, image_b="img/cut.png")])
    [message] = refused(status_project, path)
    assert message.startswith("line 1: field image_b: img/cut.png: corrupt image (")
    assert_nothing_written(_media_root)


def test_decompression_bomb_is_refused_before_decoding(status_project, status_media, settings, _media_root):
    settings.IMPORT_MAX_IMAGE_PIXELS = 10_000_000
    Image.new("L", (4000, 4000)).save(status_media / "img/bomb.png")  # 16 Mpx in a few kB
    assert (status_media / "img/bomb.png").stat().st_size < 100_000
    path = write_lines(status_media / "items.jsonl", [status_line(0, image_a="img/bomb.png")])
    assert refused(status_project, path) == [
        "line 1: field image_a: img/bomb.png: image is 4000×4000 = 16000000 pixels, above the limit of 10000000 "
        "(decompression bomb?)"
    ]
    assert_nothing_written(_media_root)


@pytest.fixture
def osc_project(make_project):
    return make_project("osc", "oscbench")


def osc_line(video: str) -> dict:
    return sample_line("oscbench", 1, media={"video": video})


def test_file_that_is_no_video_is_refused(osc_project, data_dir, _media_root):
    (data_dir / "clip.mp4").write_bytes(b"plain text pretending to be a video\n" * 20)
    path = write_lines(data_dir / "items.jsonl", [osc_line("clip.mp4")])
    [message] = refused(osc_project, path)
    assert message.startswith("line 1: field video: clip.mp4: not a readable video (")
    assert_nothing_written(_media_root)


def test_image_renamed_to_mp4_is_refused(osc_project, data_dir, _media_root):
    make_image(data_dir / "still.png", 0, 1)
    (data_dir / "still.png").rename(data_dir / "still.mp4")
    path = write_lines(data_dir / "items.jsonl", [osc_line("still.mp4")])
    assert refused(osc_project, path) == ["line 1: field video: still.mp4: is a still image (png_pipe), not a video"]
    assert_nothing_written(_media_root)


def test_video_claiming_another_container_is_refused(osc_project, data_dir, _media_root):
    make_video(data_dir / "clip.mp4", 1)
    (data_dir / "clip.mp4").rename(data_dir / "clip.webm")
    path = write_lines(data_dir / "items.jsonl", [osc_line("clip.webm")])
    assert refused(osc_project, path) == [
        "line 1: field video: clip.webm: claims to be .webm but its container is mov,mp4,m4a,3gp,3g2,mj2"
    ]
    assert_nothing_written(_media_root)


def test_image_used_where_a_video_is_expected_is_refused(make_project, data_dir, _media_root):
    project = make_project("m3", "m3verse")
    make_video(data_dir / "v.mp4", 0)
    make_image(data_dir / "i.png", 0, 0)
    line = sample_line("m3verse", 0, media={"video_before": "v.mp4", "video_after": "i.png"})
    path = write_lines(data_dir / "items.jsonl", [line])
    assert refused(project, path) == ["line 1: field video_after: i.png: is a still image (png_pipe), not a video"]
    assert_nothing_written(_media_root)


def test_duplicate_ids_in_the_file_are_refused(status_project, status_media, _media_root):
    path = write_lines(
        status_media / "items.jsonl", [status_line(0, id="dup"), status_line(1, id="other"), status_line(2, id="dup")]
    )
    assert refused(status_project, path) == ["line 3: field id: duplicate id 'dup' (first on line 1)"]
    assert_nothing_written(_media_root)


def test_existing_id_with_different_content_is_refused(status_project, status_media, _media_root):
    items_import(project=status_project, path=write_lines(status_media / "one.jsonl", [status_line(0)]))
    before = list(Item.objects.values_list("id", "payload", "updated_at"))
    assets = MediaAsset.objects.count()
    changed = status_line(0, change="shut the door")
    path = write_lines(status_media / "two.jsonl", [status_line(1), changed])
    assert refused(status_project, path) == [
        "line 2: field id: item 'status-00000' already exists in the project with different content (payload)"
        "; import with update (import_items --update) to replace the content of existing items"
    ]
    assert list(Item.objects.values_list("id", "payload", "updated_at")) == before
    assert MediaAsset.objects.count() == assets


def test_every_field_error_is_listed_with_line_and_field(status_project, status_media, _media_root):
    lines = [
        status_line(0),
        "{not json",
        status_line(2, category="spatial", change_distractors=["only one"]),
        status_line(3, id=7, colour="red"),
        status_line(4, tags="sample", split="has space"),
    ]
    path = write_lines(status_media / "items.jsonl", lines)
    expected = [
        "line 2: field -: invalid JSON (Expecting property name enclosed in double quotes at column 2)",
        "line 3: field change_distractors: must hold exactly 3 strings, got 1",
        "line 3: field category: must be one of positional, functional, other",
        "line 4: field id: must be a string (quote numeric ids)",
        "line 5: field split: must be a short name of letters, digits, '_', '.', '-'",
        "line 5: field tags: must be a list of non-empty strings",
    ]
    assert refused(status_project, path) == expected  # an unknown field is kept, not an error
    assert refused(status_project, path, strict=True) == [
        *expected[:4],
        "line 4: field colour: unknown field for protocol status (refused by --strict)",
        *expected[4:],
    ]
    assert_nothing_written(_media_root)


def test_null_lines_json_nested_too_deeply_and_extra_data_are_refused(status_project, status_media, _media_root):
    lines = [
        status_line(0),
        "null",
        "[" * 100_000 + "]" * 100_000,
        "  " + json.dumps(status_line(3)) + " \t",  # surrounding whitespace is fine
        '{"id": "x"} {}',
        "  null ",
    ]
    path = write_lines(status_media / "items.jsonl", lines)
    assert refused(status_project, path) == [
        "line 2: field -: a line must be a JSON object",
        "line 3: field -: invalid JSON (nested too deeply)",
        "line 5: field -: invalid JSON (Extra data at column 13)",
        "line 6: field -: a line must be a JSON object",
    ]
    assert_nothing_written(_media_root)


def test_labeled_item_missing_a_label_and_raw_item_imported_as_verified_are_refused(
    status_project, status_media, _media_root
):
    partial = status_line(0, change=None)
    raw = {"id": "raw-1", "image_a": "img/a.png", "image_b": "img/b.png"}
    path = write_lines(status_media / "items.jsonl", [partial, raw])
    errors = refused(status_project, path, verified=True)
    assert errors[0] == "line 1: field change: required for a labeled item"
    assert errors[1:] == [
        f"line 2: field {f}: required for a verified import"
        for f in ("state_a", "state_b", "change", "change_distractors")
    ]
    assert_nothing_written(_media_root)


def test_protocol_specific_answer_checks(make_project, data_dir, _media_root):
    project = make_project("vt", "visualtrans")
    write_sample_dataset(data_dir, "visualtrans", 3)
    choice = sample_line("visualtrans", 0)
    choice["answer"] = "D"  # only three options
    count = sample_line("visualtrans", 1)
    count["answer"] = "one"
    path = write_lines(data_dir / "bad.jsonl", [choice, count])
    assert refused(project, path) == [
        "line 1: field answer: must be one option letter A–C",
        "line 2: field answer: must be a non-negative integer when format is count",
    ]
    assert_nothing_written(_media_root)


def test_raw_qa_items_carry_their_question_and_options(make_project, data_dir, _media_root):
    # A QA item's question defines the task: a raw item (no answer yet) still needs it.
    vt, m3 = make_project("vt", "visualtrans"), make_project("m3", "m3verse")
    write_sample_dataset(data_dir / "vt", "visualtrans", 3, complete=False)
    write_sample_dataset(data_dir / "m3", "m3verse", 1, complete=False)
    no_question = sample_line("visualtrans", 1, complete=False)
    del no_question["question"]
    no_options = sample_line("visualtrans", 0, complete=False)
    del no_options["options"]
    bare = {"id": "bare", "images": sample_line("visualtrans", 2)["images"]}
    path = write_lines(data_dir / "vt" / "bad.jsonl", [no_question, no_options, bare])
    assert refused(vt, path) == [
        "line 1: field question: required",
        "line 2: field options: required when format is choice",
        "line 3: field question: required",
        "line 3: field format: required",
    ]
    m3_line = sample_line("m3verse", 0, complete=False)
    del m3_line["options"]
    assert refused(m3, write_lines(data_dir / "m3" / "bad.jsonl", [m3_line])) == ["line 1: field options: required"]
    assert_nothing_written(_media_root)

    items_import(project=vt, path=data_dir / "vt" / "items.jsonl")
    items_import(project=m3, path=data_dir / "m3" / "items.jsonl")
    assert sorted(Item.objects.values_list("project__slug", "status").distinct()) == [
        ("m3", "pending"),
        ("vt", "pending"),
    ]
    choice = Item.objects.get(project=vt, external_id=sample_line("visualtrans", 0)["id"]).payload
    assert choice["format"] == "choice" and len(choice["options"]) == 3 and "answer" not in choice


def test_box_outside_the_image_is_refused(make_project, data_dir, _media_root):
    project = make_project("ci", "changeit")
    write_sample_dataset(data_dir, "changeit", 1)
    line = sample_line("changeit", 0)
    line["bbox"] = [100, 10, 80, 20]  # image is 160 wide
    path = write_lines(data_dir / "bad.jsonl", [line])
    assert refused(project, path) == ["line 1: field bbox: box [100, 10, 80, 20] leaves the 160×120 image"]
    assert_nothing_written(_media_root)


def test_one_bad_line_after_many_good_ones_writes_nothing(status_project, status_media, _media_root):
    lines = [status_line(i) for i in range(300)] + [status_line(300, image_a="img/none.png")]
    path = write_lines(status_media / "items.jsonl", lines)
    assert refused(status_project, path) == [
        "line 301: field image_a: img/none.png: file not found under the media root"
    ]
    assert_nothing_written(_media_root)


def test_zip_with_a_symlink_member_is_refused(status_project, status_media, tmp_path, _media_root):
    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("items.jsonl", json.dumps(status_line(0, image_b="img/link.png")) + "\n")
        zf.write(status_media / "img/a.png", "img/a.png")
        link = zipfile.ZipInfo("img/link.png")
        link.external_attr = 0o120777 << 16
        zf.writestr(link, "/etc/passwd")
    assert refused(status_project, archive) == [
        "line 1: field image_b: img/link.png: symlinks inside the zip are refused"
    ]
    assert_nothing_written(_media_root)


def test_zip_without_items_is_refused(status_project, tmp_path, _media_root):
    archive = tmp_path / "empty.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("readme.txt", "nothing here")
    [message] = refused(status_project, archive)
    assert message.startswith(
        "file: field -: the zip must hold items.jsonl (or exactly one .jsonl, or one .json of items) at its top "
        'level; found readme.txt; expected JSONL of item objects, a JSON array of items, {"items": [...]}, '
        "or a zip with items.jsonl"
    )
    assert_nothing_written(_media_root)


def test_failure_while_writing_rolls_back_items_assets_and_files(status_project, data_dir, monkeypatch, _media_root):
    from annotation.importing.copy_spool import CopySpool as _CopySpool

    path = write_sample_dataset(data_dir, "status", 5)
    copy_into_db = _CopySpool.copy_into_db

    def copy_then_fail(self):
        copy_into_db(self)  # the rows and the media are in; then the connection "drops"
        assert Item.objects.count() == 5 and MediaAsset.objects.count() == 8 and stored_files(_media_root)
        raise RuntimeError("database went away")

    monkeypatch.setattr(_CopySpool, "copy_into_db", copy_then_fail)
    with pytest.raises(RuntimeError, match="database went away"):
        items_import(project=status_project, path=path)
    assert_nothing_written(_media_root)


def test_file_above_the_byte_limit_is_refused(status_project, status_media, settings, _media_root):
    settings.IMPORT_MAX_FILE_BYTES = 300
    assert (status_media / "img/b.png").stat().st_size > 300
    path = write_lines(status_media / "items.jsonl", [status_line(0)])
    assert refused(status_project, path) == [
        "line 1: field image_a: img/a.png: file is larger than 300 bytes",
        "line 1: field image_b: img/b.png: file is larger than 300 bytes",
    ]
    assert_nothing_written(_media_root)


def test_m3verse_answer_and_capability_checks(make_project, data_dir, _media_root):
    project = make_project("m3", "m3verse")
    outside = sample_line("m3verse", 0)
    outside["answer"] = ["A", "D"]  # three options: A-C
    repeated = sample_line("m3verse", 1)
    repeated["answer"] = ["B", "B"]
    unknown = sample_line("m3verse", 2)
    unknown["capabilities"] = ["spatial", "smell"]
    path = write_lines(data_dir / "bad.jsonl", [outside, repeated, unknown])
    assert refused(project, path) == [
        "line 1: field answer: letters must lie in A–C",
        "line 2: field answer: lists a letter twice",
        "line 3: field capabilities: unknown value 'smell'; allowed: spatial, temporal, attribute, reasoning",
    ]
    assert_nothing_written(_media_root)


def test_oscbench_unknown_scenario_is_refused(osc_project, data_dir, _media_root):
    make_video(data_dir / "clip.mp4", 1)
    line = osc_line("clip.mp4")
    line["scenario"] = "futuristic"
    path = write_lines(data_dir / "items.jsonl", [osc_line("clip.mp4") | {"id": "ok"}, line])
    assert refused(osc_project, path) == ["line 2: field scenario: must be one of regular, novel, compositional"]
    assert_nothing_written(_media_root)


# --- JSON documents (the default release export) ---------------------------------------------------


def json_document(path: Path, items: list, *, indent=None, **header) -> Path:
    path.write_text(json.dumps({**header, "items": items}, indent=indent), encoding="utf-8")
    return path


def test_json_document_imports_with_its_header(status_project, status_media):
    lines = [status_line(i) for i in range(3)]
    path = json_document(status_media / "doc.json", lines, indent=2, protocol="status", option_seed=4, version="v1")
    report = items_import(project=status_project, path=path)
    assert (report.lines, report.created) == (3, 3)
    assert report.header == {"protocol": "status", "option_seed": 4, "version": "v1"}
    item = status_project.items.get(external_id="status-00002")
    assert item.payload == {k: v for k, v in lines[2].items() if k not in ("id", "split", "tags")}
    again = items_import(project=status_project, path=path)
    assert (again.created, again.unchanged) == (0, 3)


def test_json_document_errors_name_the_line_the_item_starts_on(status_project, status_media, _media_root):
    # One item per line, as the export writes it: item N starts on line N + 1.
    good, bad = json.dumps(status_line(0)), json.dumps(status_line(1, category="diagonal"))
    (status_media / "doc.json").write_text(f'{{"protocol":"status","items":[\n{good},\n{bad}\n]}}\n')
    assert refused(status_project, status_media / "doc.json") == [
        "line 3: field category: must be one of positional, functional, other"
    ]
    # A syntax error ends the items: nothing after it can be read.
    (status_media / "doc.json").write_text(f'{{"items":[\n{good}\n{good}\n]}}\n')
    [message] = refused(status_project, status_media / "doc.json")
    assert message == "line 3: field -: invalid JSON (expected ',' or ']' after an item at line 3 column 1, found '{')"
    (status_media / "doc.json").write_text(f'{{"items":[\n{good[:-1]}, "x": ]\n]}}\n')
    assert refused(status_project, status_media / "doc.json") == [
        f"line 2: field -: invalid JSON (Expecting value at line 2 column {len(good) + 7})"
    ]
    (status_media / "doc.json").write_text(f'{{"items":[\n{good}\n]}} trailing\n')
    assert refused(status_project, status_media / "doc.json") == [
        "line 3: field -: invalid JSON (extra data after the document at line 3 column 4)"
    ]
    json_document(status_media / "doc.json", [])
    assert refused(status_project, status_media / "doc.json") == ["file: field -: holds no items"]
    assert_nothing_written(_media_root)


def test_json_document_of_another_protocol_is_refused(status_project, status_media, _media_root):
    path = json_document(status_media / "doc.json", [status_line(0)], protocol="changeit")
    assert refused(status_project, path) == [
        "file: field protocol: the file is a release export of protocol changeit, project st uses status"
    ]
    assert_nothing_written(_media_root)


def test_json_document_is_read_a_piece_at_a_time(tmp_path, monkeypatch):
    import tracemalloc

    from annotation.importing import documents, sources

    items = [
        {"id": f"x{i}", "n": i * 1001, "f": 1.5e-3, "t": True, "s": 'é ✓ \\"q\\"', "l": [None, i]} for i in range(30)
    ]
    path = json_document(tmp_path / "small.json", items, indent=1, option_seed=12)
    monkeypatch.setattr(documents, "DOC_READ_CHARS", 3)  # every number and literal crosses a chunk border
    source = sources.DirectorySource(path, tmp_path, max_bytes=1)
    assert source.header == {"option_seed": 12}
    got = list(source.lines())
    assert [json.loads(text) for _line, text in got] == items
    assert [line for line, _text in got[:2]] == [4, 15]  # indent=1: 3 opening lines, 11 lines per item

    # Memory does not follow the file: an 11 MB document is walked with a few MB at most.
    monkeypatch.setattr(documents, "DOC_READ_CHARS", 1024 * 1024)
    big = tmp_path / "big.json"
    with open(big, "w") as fh:
        fh.write('{"protocol":"status","items":[\n')
        fh.write(",\n".join(json.dumps(status_line(i, id=f"item-{i:07d}")) for i in range(40_000)))
        fh.write("\n]}\n")
    assert big.stat().st_size > 10_000_000
    source = sources.DirectorySource(big, tmp_path, max_bytes=1)
    tracemalloc.start()
    try:
        count = sum(1 for _ in source.lines())
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 40_000 and peak < 8_000_000, peak


def test_jsonl_header_line_is_read_as_the_header(status_project, status_media):
    header = {"release": {"protocol": "status", "option_seed": 9, "checksum": "abc"}}
    path = write_lines(status_media / "export.jsonl", [header, status_line(0)])
    report = items_import(project=status_project, path=path)
    assert report.lines == 1 and report.header == header["release"]


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


def test_the_readme_error_example_is_a_real_refusal(status_project, status_media):
    lines = [status_line(i, id=f"s{i}") for i in range(11)] + [status_line(11, id="s11", image_b="img/b12.png")]
    [message] = refused(status_project, write_lines(status_media / "items.jsonl", lines))
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert message == "line 12: field image_b: img/b12.png: file not found under the media root"
    assert f"`{message}`" in readme
