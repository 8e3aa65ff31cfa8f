"""STATUS_Bench.json read as the authors publish it and written back so that their code reads it
(protocols/status/formats.py; docs/protocols/status.md, "The authors' release"). Small releases
in the authors' shape, written by the tests."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image

from protocols import registry
from protocols.kit.releases import FormatRefused
from protocols.status import formats

from .authors import KEY_ORDER, author_row, authors_read, write_release

FORMAT = formats.FORMATS[0]


def folder_opener(root: Path):
    """open_media over a folder, as a release export opens its stored files."""
    return lambda relpath: open(root / relpath, "rb")


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


# --- the protocol names its format -----------------------------------------------------------------


def test_the_status_protocol_lists_the_format():
    proto = registry.get("status")
    assert proto.formats == formats.FORMATS
    assert proto.format_named("status-bench", "items") is FORMAT
    assert (FORMAT.name, FORMAT.kind, FORMAT.writes) == ("status-bench", "items", True)


# --- reading ---------------------------------------------------------------------------------------


def test_a_row_becomes_a_complete_item_line_with_its_provenance_under_extra(tmp_path):
    write_release(tmp_path / "Bench", [author_row(0, answer=1), author_row(7, answer=3)])

    conversion = FORMAT.read(tmp_path / "Bench")

    lines = list(conversion.lines)
    assert lines[0] == {
        "id": "0",
        "image_a": "images/ex_0000_0.png",
        "image_b": "images/ex_0000_1.png",
        "state_a": "a closed box 0",
        "state_b": "an open box 0",
        "change": "open the box fully",
        "change_distractors": ["lift the lid halfway", "shake the box", "tape the box shut"],
        "extra": {
            "id": 0,
            "dataset": "Ego4D",
            "video_id": "00000000-7a7c-41ce-8266-83a9f00cacec",
            "frame_0": 6000,
            "frame_1": 6060,
            "image_0": "ex_0000_0",
            "image_1": "ex_0000_1",
            "diff_cap": {"answer": 1},
        },
    }
    assert (lines[1]["id"], lines[1]["change"]) == ("7", "tape the box shut")
    assert lines[1]["change_distractors"] == ["lift the lid halfway", "open the box fully", "shake the box"]
    assert "category" not in lines[0] and "difference" not in lines[0]
    assert conversion.media_root == tmp_path / "Bench"
    assert conversion.notes[0] == "read 2 rows of STATUS_Bench.json, the authors' STATUS Bench release"
    assert any("category and difference are not in the release" in n for n in conversion.notes)
    # No images/ beside the file: the report says how to get them.
    assert any("extract_frames.py --bench" in n for n in conversion.notes)


def test_the_path_may_be_the_file_its_folder_or_the_repository_and_media_root_may_be_given(tmp_path):
    path = write_release(tmp_path / "repo" / "Bench", [author_row(0)], images=True)
    for given in (path, path.parent, tmp_path / "repo"):
        conversion = FORMAT.read(given)
        assert conversion.media_root == path.parent
        assert not any("extract_frames" in n for n in conversion.notes)
    elsewhere = tmp_path / "frames"
    assert FORMAT.read(path, media_root=elsewhere).media_root == elsewhere


def test_detect_knows_the_release_by_its_content(tmp_path):
    path = write_release(tmp_path / "Bench", [author_row(0)])
    renamed = tmp_path / "mine.json"
    renamed.write_bytes(path.read_bytes())
    assert FORMAT.detect(path) and FORMAT.detect(path.parent) and FORMAT.detect(tmp_path) and FORMAT.detect(renamed)

    jsonl = tmp_path / "items.jsonl"
    jsonl.write_text(json.dumps({"id": "a", "image_a": "a.png", "image_b": "b.png"}) + "\n")
    visualtrans_like = tmp_path / "VisualTrans.json"
    visualtrans_like.write_text(
        json.dumps([{"task_type": "count", "images": ["a.png"], "question": "q", "label": "2"}])
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    for other in (jsonl, visualtrans_like, empty, tmp_path / "missing.json"):
        assert not FORMAT.detect(other), other


def test_a_caption_repeated_and_keys_the_format_does_not_name_are_kept_and_reported(tmp_path):
    repeated = ["cut the pea", "cut the pea", "cut the pea in two", "peel the pea"]
    row = author_row(
        3, answer=2, captions=repeated, annotator="k", diff_cap={"answer": 2, "captions": repeated, "v": 2}
    )
    write_release(tmp_path, [row])

    conversion = FORMAT.read(tmp_path)

    line = list(conversion.lines)[0]
    assert (line["change"], line["change_distractors"]) == (
        "cut the pea in two",
        ["cut the pea", "cut the pea", "peel the pea"],
    )
    assert line["extra"]["annotator"] == "k" and line["extra"]["diff_cap"] == {"answer": 2, "v": 2}
    assert "keys the authors' format does not name, kept under extra: annotator, diff_cap.v" in conversion.notes
    assert "1 row(s) list one caption twice in diff_cap.captions (id 3); kept as published" in conversion.notes


# --- refusals: one message naming what was found and what was expected -------------------------------


@pytest.mark.parametrize(
    ("content", "found"),
    [
        (
            '[{"id": 0,',
            "STATUS_Bench.json: not valid JSON (Expecting property name enclosed in double quotes at line 1",
        ),
        (
            '{"items": []}',
            "STATUS_Bench.json: a JSON object (keys: items) found; expected the authors' STATUS_Bench.json",
        ),
        ("[]", "STATUS_Bench.json: an empty JSON array; expected the authors' STATUS_Bench.json"),
        (
            '[{"task_type": "count", "question": "q"}]',
            "STATUS_Bench.json: a JSON array whose first row is a JSON object (keys: task_type, question); expected",
        ),
        (
            json.dumps(
                [{"id": 0, "img_0": "ex_0000_0.png", "img_1": "ex_0000_1.png", "caption_0": "a", "diff_cap": {}}]
            ),
            "STATUS_Bench.json: rows name their images img_0 / img_1 (an earlier revision of the release",
        ),
    ],
)
def test_a_file_of_another_shape_is_refused_with_one_message(tmp_path, content, found):
    (tmp_path / "STATUS_Bench.json").write_text(content)
    with pytest.raises(FormatRefused) as exc:
        FORMAT.read(tmp_path / "STATUS_Bench.json")
    message = str(exc.value)
    assert message.startswith(found), message
    assert "id, caption_0, caption_1, dataset, video_id, frame_0, frame_1, diff_cap, image_0, image_1" in message


def test_a_folder_without_the_release_is_refused(tmp_path):
    with pytest.raises(FormatRefused, match="a folder without STATUS_Bench.json"):
        FORMAT.read(tmp_path)


def test_every_problem_of_every_row_comes_in_one_message(tmp_path):
    rows = [
        author_row(0),
        author_row(1, caption_1="  ", diff_cap={"answer": 4, "captions": ["a", "b", "c"]}),
        author_row(2, image_0="../escape", id=True),
        "not a row",
    ]
    write_release(tmp_path, rows)
    with pytest.raises(FormatRefused) as exc:
        FORMAT.read(tmp_path)
    assert str(exc.value) == (
        "STATUS_Bench.json: 6 problem(s) in its rows: "
        "row 2 (id 1): caption_1: must be a non-empty text; "
        "row 2 (id 1): diff_cap.captions: must hold 4 texts (the change and three distractors), found 3 texts; "
        "row 2 (id 1): diff_cap.answer: must be the index (0-3) of the right caption, found 4; "
        "row 3 (id True): id: must be the row's number; "
        "row 3 (id True): image_0: path leaves the media root ('..'); "
        "row 4 (no id): a JSON string found, expected an object"
    )


def test_a_long_list_of_problems_is_cut_after_ten(tmp_path):
    write_release(tmp_path, [author_row(i, caption_0="") for i in range(14)])
    with pytest.raises(FormatRefused) as exc:
        FORMAT.read(tmp_path)
    assert str(exc.value).startswith("STATUS_Bench.json: 14 problem(s) in its rows: row 1 (id 0): caption_0")
    assert str(exc.value).endswith("row 10 (id 9): caption_0: must be a non-empty text; and 4 more")


# --- writing ---------------------------------------------------------------------------------------


def test_an_unedited_release_writes_the_authors_bytes_and_images_back(tmp_path):
    rows = [author_row(i, answer=i % 4) for i in range(5)]
    source = write_release(tmp_path / "in", rows, images=True)
    lines = list(FORMAT.read(source).lines)

    written = FORMAT.write(lines, tmp_path / "out", open_media=folder_opener(tmp_path / "in"))

    out = tmp_path / "out"
    assert (out / "STATUS_Bench.json").read_bytes() == source.read_bytes()
    assert written[0] == out / "STATUS_Bench.json" and len(written) == 11
    for row in rows:
        for k in (0, 1):
            name = f"images/{row[f'image_{k}']}.png"
            assert (out / name).read_bytes() == (tmp_path / "in" / name).read_bytes()
    assert files_under(out) == files_under(tmp_path / "in")  # no staging folder left behind
    samples = authors_read(out)
    assert [(s["id"], s["change"]) for s in samples] == [
        (r["id"], r["diff_cap"]["captions"][r["diff_cap"]["answer"]]) for r in rows
    ]


def test_an_edited_and_extended_release_reads_with_the_authors_logic(tmp_path):
    source = write_release(tmp_path / "in", [author_row(0, answer=2), author_row(1)], images=True)
    lines = list(FORMAT.read(source).lines)
    lines[0]["change_distractors"][0] = "lift the lid a little"  # a lab corrects a distractor
    # An item the lab added in the project: no extra, its image a JPEG in its own folder.
    Image.new("RGB", (5, 5), "blue").save(tmp_path / "in" / "new_a.jpg", "JPEG")
    Image.new("RGB", (5, 5), "red").save(tmp_path / "in" / "new_b.png")
    added = {
        "id": "lab/1",
        "image_a": "new_a.jpg",
        "image_b": "new_b.png",
        "state_a": "a shut jar",
        "state_b": "an open jar",
        "change": "open the jar",
        "change_distractors": ["shake the jar", "fill the jar", "close the jar"],
        "category": "positional",
        "split": "test",
        "tags": [],
        "resolved": {},
    }
    header = {"release": {"protocol": "status", "version": "v2"}}

    FORMAT.write([header, *lines, added], tmp_path / "out", open_media=folder_opener(tmp_path / "in"))

    written = json.loads((tmp_path / "out" / "STATUS_Bench.json").read_text())
    assert [list(row) for row in written] == [KEY_ORDER] * 3
    assert written[0]["diff_cap"] == {
        "answer": 2,
        "captions": ["lift the lid a little", "open the box fully", "shake the box", "tape the box shut"],
    }
    new = written[2]
    assert new["id"] == "lab/1"
    assert (new["dataset"], new["video_id"], new["frame_0"], new["frame_1"]) == (None, None, None, None)
    assert new["diff_cap"] == {
        "answer": 2,
        "captions": ["close the jar", "fill the jar", "open the jar", "shake the jar"],
    }
    assert new["image_0"] == new["image_1"][:-1] + "0" and new["image_0"].startswith("lab_1-")
    samples = authors_read(tmp_path / "out")
    assert [s["change"] for s in samples] == ["shake the box", "open the box fully", "open the jar"]
    assert samples[2]["states"] == ("a shut jar", "an open jar")


def test_a_release_that_cannot_be_written_writes_nothing(tmp_path):
    source = write_release(tmp_path / "in", [author_row(0), author_row(1)], images=True)
    lines = list(FORMAT.read(source).lines)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    raw = {"id": "r1", "image_a": "a.png", "image_b": "b.png"}

    with pytest.raises(FormatRefused) as exc:
        FORMAT.write([*lines, raw], out, open_media=folder_opener(tmp_path / "in"))

    assert str(exc.value) == (
        "release: 1 problem(s) in its lines: line 3 (id 'r1'): a STATUS_Bench.json row needs "
        "state_a, state_b, change, change_distractors (three texts)"
    )
    assert files_under(out) == ["keep.txt"]


def test_two_images_under_one_name_and_unreadable_media_refuse_the_whole_release(tmp_path):
    source = write_release(tmp_path / "in", [author_row(0), author_row(1)], images=True)
    first, second = FORMAT.read(source).lines
    Image.new("RGB", (4, 4), "red").save(tmp_path / "in" / "lab.png")
    # An item made in the project whose id gives its images the name of a release image.
    lab = dict(first, id="ex_0000", image_a="lab.png", extra=None)
    out = tmp_path / "out"

    with pytest.raises(FormatRefused) as exc:
        FORMAT.write([first, second, lab], out, open_media=folder_opener(tmp_path / "in"))

    assert str(exc.value) == (
        "release: 1 problem(s) in its lines: line 3 (id 'ex_0000'): image_0 'ex_0000_0' names lab.png "
        "while an earlier line's 'ex_0000_0' is images/ex_0000_0.png; two images cannot share one name"
    )
    assert not out.exists()

    (tmp_path / "in" / "images" / "ex_0001_1.png").unlink()
    first, second = FORMAT.read(source).lines
    with pytest.raises(FormatRefused, match=r"images/ex_0001_1.png: the release's image cannot be read"):
        FORMAT.write([first, second], out, open_media=folder_opener(tmp_path / "in"))
    assert files_under(out) == []  # the folder was made, nothing is left in it


def test_a_folder_holding_a_release_already_is_refused(tmp_path):
    source = write_release(tmp_path / "in", [author_row(0)], images=True)
    lines = list(FORMAT.read(source).lines)
    with pytest.raises(
        FormatRefused, match="holds STATUS_Bench.json and images already; write a release into a new folder"
    ):
        FORMAT.write(lines, tmp_path / "in", open_media=folder_opener(tmp_path / "in"))
    # Without open_media only the file is written (the images are where they are).
    assert FORMAT.write(lines, tmp_path / "json-only") == [tmp_path / "json-only" / "STATUS_Bench.json"]
    assert files_under(tmp_path / "json-only") == ["STATUS_Bench.json"]


def test_a_png_is_copied_as_it_is_and_another_image_converted(tmp_path):
    png = io.BytesIO()
    Image.new("RGB", (3, 2), "green").save(png, "PNG")
    jpeg = io.BytesIO()
    Image.new("RGB", (3, 2), "green").save(jpeg, "JPEG")
    store = {"a.png": png.getvalue(), "b.jpg": jpeg.getvalue()}
    line = {
        "id": "x",
        "image_a": "a.png",
        "image_b": "b.jpg",
        "state_a": "s",
        "state_b": "t",
        "change": "c",
        "change_distractors": ["d", "e", "f"],
    }
    FORMAT.write([line], tmp_path, open_media=lambda p: io.BytesIO(store[p]))
    assert (tmp_path / "images" / "x_0.png").read_bytes() == store["a.png"]
    with Image.open(tmp_path / "images" / "x_1.png") as img:
        assert (img.format, img.size) == ("PNG", (3, 2))
