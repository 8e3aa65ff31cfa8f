"""The VisualTrans authors' release (VisualTrans.json) read into item lines and written back, on
files the tests write in the authors' shape (docs/protocols/visualtrans.md, "The authors' files")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from annotation.importing import items_import
from annotation.importing.formats import check_item
from annotation.models import Item, ItemStatus
from annotation.releases import release_freeze, release_lines
from protocols import registry
from protocols.kit.releases import FormatRefused
from protocols.visualtrans.formats import FORMATS, item_id
from protocols.visualtrans.question_text import split_options
from tests.helpers.files import write_lines

from . import authors_eval
from .helpers import CAUSAL_STEM, INTERM_STEM, lego, rows, without_extra, write_images, write_items, write_release

FORMAT = FORMATS[0]


def by_id(lines):
    return {line["id"]: line for line in lines}


# --- reading --------------------------------------------------------------------------------------


def test_the_protocol_lists_the_format():
    assert registry.get("visualtrans").format_named("visualtrans", "items") is FORMAT
    assert (FORMAT.kind, FORMAT.writes) == ("items", True)


def test_every_kind_of_row_becomes_a_typed_item_line(tmp_path):
    release = rows()
    conversion = FORMAT.read(write_release(tmp_path, release))

    lines = list(conversion.lines)
    assert len(lines) == 8  # nine rows, one an exact duplicate
    count, layer, causal, plan, books, objects, interm, nothing = lines
    assert count == {
        "id": item_id("legos", lego(1, "start", "end"), "How many blocks changed their layer?"),
        "images": lego(1, "start", "end"),
        "question": "How many blocks changed their layer?",
        "format": "count",
        "answer": 3,
        "subtask": "quantitative",
        "scene": "legos",
    }
    assert layer["question"].endswith("which layer did the object that was originally above the red block move to?")
    assert (layer["format"], layer["answer"], layer["subtask"]) == ("choice", "B", "fine_grained")
    assert layer["options"] == [f"Layer {n} (from the bottom)" for n in (1, 2, 3, 4)]
    assert layer["extra"] == {"options_layout": "lines"}
    # Inline options, one glued to the previous full stop; the trailing space kept for the export.
    assert causal["question"] == CAUSAL_STEM
    assert causal["options"] == [
        "Stack the green block over the white block.",
        "Place the white block on the green block.",
        "Insert the white block under the yellow block.",
        "Stack the blue block over the yellow block.",
    ]
    assert causal["extra"] == {"options_layout": "inline", "question_text": release[2]["question"]}
    assert (causal["answer"], causal["subtask"], causal["images"]) == ("C", "causal", lego(3, "end", "start"))
    assert plan["options"] == ["blue plate", "red tablecloth"]
    assert (plan["answer"], plan["subtask"], plan["scene"]) == ("A", "planning", "table")
    assert plan["extra"] == {"mask": "first", "options_layout": "lines"}
    assert (books["options"], books["subtask"]) == (["the far left", "the middle", "the far right"], "global")
    assert objects["format"] == "set" and "options" not in objects
    assert objects["answer"] == ["white block", "green block"]
    assert objects["question"] == release[5]["question"]
    assert "extra" not in objects
    assert interm["question"] == INTERM_STEM  # the <imageN> references stay in the text and options
    assert interm["options"] == ["<image3>", "<image4>", "<image5>", "<image6>"]
    assert (interm["subtask"], len(interm["images"])) == ("intermediate", 6)
    assert nothing["answer"] == ["none"]
    assert conversion.notes == [
        "9 rows read into 8 items: 5 choice, 1 count, 2 set questions",
        "options split out of the question text (3 rows with 4 options, 1 row with 3 options, "
        "1 row with 2 options); the <imageN> references kept in the question and options",
        "counts typed as whole numbers; comma-separated labels read as sets of object names",
        "ids made from the content: the scene and a hash of scene, images and question",
        "task_type mapped to subtask; mask and any other field of the authors kept in extra",
        "1 row labelled 'none' (no object matches): the one-name set ['none']",
        "1 row repeating another exactly, imported once (row 8 repeats row 2)",
        "images found under images/",
    ]
    assert conversion.media_root == tmp_path / "images"


def test_every_converted_line_is_a_valid_verified_item(tmp_path):
    lines = list(FORMAT.read(write_release(tmp_path, images=False)).lines)
    for line in lines:
        checked = check_item("visualtrans", without_extra(line), verified=True)
        assert not isinstance(checked, list), (line["id"], checked)
        assert checked.complete


def test_ids_follow_the_content_not_the_position(tmp_path):
    release = rows()
    first = [line["id"] for line in FORMAT.read(write_release(tmp_path / "a", release, images=False)).lines]
    # A later release: rows in another order, another indent, a corrected label, no duplicate.
    later = list(reversed(release[:7] + release[8:]))
    later[-2] = {**later[-2], "label": "A"}
    again = by_id(FORMAT.read(write_release(tmp_path / "b", later, indent=2, images=False)).lines)

    assert sorted(again) == sorted(first)
    assert again[first[1]]["answer"] == "A"
    assert len(set(first)) == len(first) and all(i.startswith(("legos-", "table-", "books-")) for i in first)
    changed = [{**release[0], "question": "How many blocks moved?"}]
    assert [line["id"] for line in FORMAT.read(write_release(tmp_path / "c", changed, images=False)).lines] != first[:1]


def test_the_media_folder_is_the_one_given_else_found_beside_the_file(tmp_path):
    path = write_release(tmp_path / "flat", images=False)
    assert FORMAT.read(path).media_root is None
    assert FORMAT.read(path, media_root=tmp_path / "elsewhere").media_root == tmp_path / "elsewhere"
    write_images(tmp_path / "flat", [p for row in rows() for p in row["images"]])
    assert FORMAT.read(path).media_root == tmp_path / "flat"


def test_detect_knows_the_release_and_nothing_else(tmp_path):
    assert FORMAT.detect(write_release(tmp_path, images=False))
    status_like = tmp_path / "STATUS_Bench.json"
    status_like.write_text(json.dumps([{"id": 1, "caption_0": "a", "caption_1": "b"}]))
    jsonl = write_lines(tmp_path / "items.jsonl", [{"id": "x", "question": "q", "images": [], "label": "A"}])
    assert not FORMAT.detect(status_like)
    assert not FORMAT.detect(jsonl)
    assert not FORMAT.detect(tmp_path)


# --- refusals: one message naming what was found and what was expected -----------------------------


def refusal(tmp_path: Path, content: str | list) -> str:
    path = tmp_path / "VisualTrans.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    with pytest.raises(FormatRefused) as exc:
        FORMAT.read(path)
    return str(exc.value)


def test_a_file_of_another_shape_is_refused_in_one_message(tmp_path):
    assert refusal(tmp_path, "[]") == "VisualTrans.json: an empty array; expected VisualTrans.json's question rows"
    assert refusal(tmp_path, '{"items": []}') == (
        "VisualTrans.json: found a JSON dict, expected VisualTrans.json: one JSON array of question rows"
    )
    assert refusal(tmp_path, '[{"task_type": "count",') == (
        "VisualTrans.json: not JSON (Expecting property name enclosed in double quotes, line 1 column 24); "
        "expected VisualTrans.json: one JSON array of question rows"
    )


def test_rows_that_cannot_be_read_are_named_together(tmp_path):
    good = rows()[1]
    bad = [
        good,
        {**good, "task_type": "spatial"},
        {**good, "label": "E"},
        {**good, "question": "Which layer?", "label": "B"},
        {**rows()[0], "label": "two"},
        {**good, "images": ["only-one.jpg"]},
        "row",
        {**good, "label": "A", "question": good["question"].replace("red block", "red block ")},
    ]
    assert refusal(tmp_path, bad) == (
        "VisualTrans.json: 7 rows cannot be read: "
        "row 2: task_type 'spatial' is none of spatial_fine_grained, spatial_global, procedural_interm, "
        "procedural_causal, procedural_plan, count; "
        "row 3: label 'E' names no option (the question lists A–D); "
        "row 4: label 'B' is a letter but the question text lists no options 'A. …', 'B. …'; "
        "row 5: a count row's label must be a whole number, found 'two'; "
        "row 6: images must be a list of at least 2 relative image paths; "
        "row 7: must be a JSON object, found str; "
        "row 8: asks row 1's question on the same scene and images but differs in label, question"
    )


# --- through the project's importer ------------------------------------------------------------


@pytest.mark.django_db
def test_the_lines_import_as_verified_items_and_a_later_release_updates_the_same_ones(make_project, tmp_path):
    project = make_project("vt", "visualtrans")
    conversion = FORMAT.read(write_release(tmp_path / "release"))
    lines = list(conversion.lines)

    report = items_import(
        project=project,
        path=write_items(tmp_path / "items.jsonl", lines),
        media_root=conversion.media_root,
        verified=True,
    )

    assert (report.lines, report.created, report.media_files) == (8, 8, 20)  # 7 pairs and 6 candidates
    stored = {i.external_id: i for i in Item.objects.filter(project=project)}
    assert set(stored) == {line["id"] for line in lines}
    assert {i.status for i in stored.values()} == {ItemStatus.VERIFIED}
    count, layer, _causal, _plan, _books, objects, *_ = lines
    assert stored[count["id"]].payload["answer"] == 3
    assert stored[layer["id"]].payload["options"] == layer["options"]
    assert stored[objects["id"]].payload["answer"] == ["white block", "green block"]

    # The same release again, its rows in another order: nothing new.
    later = FORMAT.read(write_release(tmp_path / "later", list(reversed(rows()))))
    again = items_import(
        project=project,
        path=write_items(tmp_path / "later.jsonl", list(later.lines)),
        media_root=later.media_root,
        verified=True,
    )
    assert (again.created, again.unchanged) == (0, 8)


# --- writing back ----------------------------------------------------------------------------------


def opener(folder: Path):
    return lambda rel: open(folder / rel, "rb")


def test_the_release_written_back_is_the_authors_file_less_the_duplicate(tmp_path):
    release = rows()
    conversion = FORMAT.read(write_release(tmp_path / "in", release))

    written = FORMAT.write(conversion.lines, tmp_path / "out", open_media=opener(conversion.media_root))

    out = tmp_path / "out"
    assert written[0] == out / "VisualTrans.json"
    assert sorted(p.relative_to(out / "images").as_posix() for p in written[1:]) == sorted(
        {p for row in release for p in row["images"]}
    )
    exported = json.loads((out / "VisualTrans.json").read_text(encoding="utf-8"))
    expected = [dict(row) for i, row in enumerate(release) if i != 7]
    expected[3]["label"] = "A"  # the letter upper-cased
    expected[5]["label"] = "white block, green block"  # the names' spacing
    assert exported == expected
    assert list(exported[3]) == ["task_type", "scene", "images", "question", "label", "mask"]


def test_the_authors_scorer_reads_the_export_as_it_read_the_release(tmp_path):
    release = rows()
    conversion = FORMAT.read(write_release(tmp_path / "in", release))
    FORMAT.write(conversion.lines, tmp_path / "out", open_media=opener(conversion.media_root))

    exported = authors_eval.load(tmp_path / "out/VisualTrans.json", tmp_path / "out/images")
    original = authors_eval.load(tmp_path / "in/VisualTrans.json", tmp_path / "in/images")
    replies = authors_eval.perfect_replies(original)

    assert authors_eval.score(exported, replies) == {
        "Quantitative": (1, 1),
        "Spatial_fine_grained": (3, 3),
        "Procedural_latent_action_reasoning": (1, 1),
        "Procedural_transformation_planning": (1, 1),
        "Spatial_global": (1, 1),
        "Procedural_intermediate_state_recognition": (1, 1),
        "Overall": (8, 8),
    }
    wrong = {key: "<answer>A</answer>" for key in replies}
    assert authors_eval.score(exported, wrong)["Overall"] == (1, 8)  # only the plan row's truth is A


def test_edited_options_are_written_in_the_rows_layout(tmp_path):
    release = rows()
    lines = by_id(FORMAT.read(write_release(tmp_path, release, images=False)).lines)
    causal = next(line for line in lines.values() if line["subtask"] == "causal")
    edited = {**causal, "options": [*causal["options"][:3], "Stack the red block over the yellow block."]}

    FORMAT.write([edited], tmp_path / "out")

    (row,) = json.loads((tmp_path / "out/VisualTrans.json").read_text())
    assert row["question"] == CAUSAL_STEM + (
        "\nA. Stack the green block over the white block. B. Place the white block on the green block. "
        "C. Insert the white block under the yellow block. D. Stack the red block over the yellow block."
    )
    assert split_options(row["question"]).options == tuple(edited["options"])


def test_an_item_without_its_answer_is_not_written(tmp_path):
    line = by_id(FORMAT.read(write_release(tmp_path, images=False)).lines)
    raw = {k: v for k, v in next(iter(line.values())).items() if k not in ("answer", "subtask")}
    with pytest.raises(FormatRefused, match=r"needs a label and a task type on every row"):
        FORMAT.write([raw], tmp_path / "out")
    assert not (tmp_path / "out/VisualTrans.json").exists()


@pytest.mark.django_db
def test_a_frozen_release_exports_as_the_authors_file(make_project, tmp_path):
    project = make_project("vt", "visualtrans")
    conversion = FORMAT.read(write_release(tmp_path / "in"))
    items_import(
        project=project,
        path=write_items(tmp_path / "items.jsonl", list(conversion.lines)),
        media_root=conversion.media_root,
        verified=True,
    )
    release = release_freeze(project=project, version="v1")

    FORMAT.write(release_lines(release), tmp_path / "out", open_media=opener(conversion.media_root))

    exported = authors_eval.load(tmp_path / "out/VisualTrans.json", tmp_path / "out/images")
    original = authors_eval.load(tmp_path / "in/VisualTrans.json", tmp_path / "in/images")
    # Matched by scene and images (without the authors' extra fields the option layout may differ).
    truth = {tuple(r["images"]): r for r in original}
    replies = {authors_eval.row_key(r): f"<answer>{truth[tuple(r['images'])]['label']}</answer>" for r in exported}
    assert authors_eval.score(exported, replies)["Overall"] == (8, 8)
    for row in exported:
        source = truth[tuple(row["images"])]
        assert (row["task_type"], row["scene"]) == (source["task_type"], source["scene"])
        exported_split, source_split = split_options(row["question"]), split_options(source["question"])
        assert (exported_split.stem, exported_split.options) == (source_split.stem, source_split.options)
