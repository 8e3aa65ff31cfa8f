"""Item import refusals, one bad file per rule: paths leaving the media root, missing, unreadable,
truncated or oversized media, files that are no video or claim another container, duplicate or
changed ids, every field error listed, protocol-specific answer checks, bad zips, a failure while
writing rolled back. Every refused import asserts the exact "line N: field F: reason" message and
that nothing was written: no item, no media asset, no file under MEDIA_ROOT; the README's example
error is a real one."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest
from PIL import Image

from annotation.importing import items_import
from annotation.importing.samples import make_image, make_video, sample_line, write_sample_dataset
from annotation.models import Item, MediaAsset
from tests.helpers.files import write_lines
from tests.helpers.item_import import assert_nothing_written, osc_line, refused, status_line, stored_files

pytestmark = pytest.mark.django_db

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


def test_the_readme_error_example_is_a_real_refusal(status_project, status_media):
    lines = [status_line(i, id=f"s{i}") for i in range(11)] + [status_line(11, id="s11", image_b="img/b12.png")]
    [message] = refused(status_project, write_lines(status_media / "items.jsonl", lines))
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert message == "line 12: field image_b: img/b12.png: file not found under the media root"
    assert f"`{message}`" in readme
