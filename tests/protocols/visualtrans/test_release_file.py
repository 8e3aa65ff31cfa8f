"""The real VisualTrans.json (tests/fixtures/authors/, byte-identical to the authors' release) read
into item lines, imported, and written back for the authors' scorer
(docs/protocols/visualtrans.md, "The authors' files")."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from annotation.importing import items_import
from annotation.importing.formats import check_item
from annotation.models import Item, ItemStatus
from protocols.base import LETTERS
from protocols.visualtrans.formats import FORMATS

from . import authors_eval
from .helpers import without_extra, write_images, write_items

RELEASE = Path(__file__).resolve().parents[2] / "fixtures/authors/VisualTrans.json"
SHA256 = "a821053c585ca9ea2fa309f359a39701637115058012deadcc4dcd1a85da0374"
FORMAT = FORMATS[0]
DUPLICATE = 307  # row 307 repeats row 301 (rows counted from 1)


@pytest.fixture(scope="module")
def original() -> list[dict]:
    assert hashlib.sha256(RELEASE.read_bytes()).hexdigest() == SHA256
    return json.loads(RELEASE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def lines() -> list[dict]:
    return list(FORMAT.read(RELEASE).lines)


def names(label: str) -> list[str]:
    return [" ".join(part.split()) for part in label.split(",") if part.strip()]


def test_497_rows_give_496_items_and_the_duplicate_is_reported(original, lines):
    conversion = FORMAT.read(RELEASE)

    assert len(original) == 497 and len(lines) == 496
    assert original[DUPLICATE - 1] == original[300]
    assert "1 row repeating another exactly, imported once (row 307 repeats row 301)" in conversion.notes
    assert conversion.notes[:2] == [
        "497 rows read into 496 items: 350 choice, 63 count, 83 set questions",
        "options split out of the question text (340 rows with 4 options, 8 rows with 3 options, "
        "2 rows with 2 options); the <imageN> references kept in the question and options",
    ]
    assert len({line["id"] for line in lines}) == 496
    assert Counter(line["subtask"] for line in lines) == {
        "fine_grained": 167,
        "intermediate": 88,
        "causal": 86,
        "quantitative": 63,
        "global": 50,
        "planning": 42,
    }
    assert sum("mask" in line.get("extra", {}) for line in lines) == 30


def test_every_option_set_count_and_list_is_typed(original, lines):
    rows = [row for i, row in enumerate(original, start=1) if i != DUPLICATE]
    for row, line in zip(rows, lines, strict=True):
        assert line["images"] == row["images"] and line["scene"] == row["scene"]
        if line["format"] == "count":
            assert row["task_type"] == "count" and line["answer"] == int(row["label"])
            assert type(line["answer"]) is int
        elif line["format"] == "set":
            assert "options" not in line and line["answer"] == names(row["label"])
        else:
            options = line["options"]
            assert 2 <= len(options) <= 4 and all(o and o == o.strip() for o in options)
            assert line["answer"] == row["label"].upper() and line["answer"] in LETTERS[: len(options)]
            # The option texts and the stem are the question text, all of it.
            assert all(o in row["question"] for o in options) and row["question"].startswith(line["question"])
            assert not any(f"\n{letter}. " in line["question"] for letter in "ABCD")
    glued = next(line for line in lines if "block.D." in line.get("extra", {}).get("question_text", ""))
    assert glued["options"][2:] == [
        "Insert the white block underneath the yellow block.",
        "Stack the blue block over the yellow block.",
    ]
    assert Counter(len(line.get("options", [])) for line in lines) == {4: 340, 0: 146, 3: 8, 2: 2}


def test_every_line_is_a_valid_verified_item(lines):
    for line in lines:
        checked = check_item("visualtrans", without_extra(line), verified=True)
        assert not isinstance(checked, list), (line["id"], checked)
        assert checked.complete


def test_the_ids_do_not_depend_on_the_rows_order(original, lines, tmp_path):
    reordered = tmp_path / "VisualTrans.json"
    reordered.write_text(json.dumps(list(reversed(original))), encoding="utf-8")
    assert sorted(line["id"] for line in FORMAT.read(reordered).lines) == sorted(line["id"] for line in lines)


@pytest.mark.django_db
def test_the_release_imports_as_496_verified_items(make_project, lines, tmp_path):
    write_images(tmp_path / "images", [p for line in lines for p in line["images"]])
    project = make_project("visualtrans", "visualtrans")

    report = items_import(
        project=project,
        path=write_items(tmp_path / "items.jsonl", lines),
        media_root=tmp_path / "images",
        verified=True,
    )

    assert (report.lines, report.created, report.media_files) == (496, 496, 1193)
    assert Item.objects.filter(project=project, status=ItemStatus.VERIFIED).count() == 496
    by_id = {line["id"]: line for line in lines}
    for external_id, payload in Item.objects.filter(project=project).values_list("external_id", "payload"):
        assert payload == {k: v for k, v in without_extra(by_id[external_id]).items() if k != "id"}


def test_the_export_is_the_release_and_the_authors_scorer_agrees(original, lines, tmp_path):
    images = tmp_path / "images"
    write_images(images, [p for row in original for p in row["images"]])

    FORMAT.write(lines, tmp_path / "out", open_media=lambda rel: open(images / rel, "rb"))

    exported = authors_eval.load(tmp_path / "out/VisualTrans.json", tmp_path / "out/images")
    rows = [row for i, row in enumerate(original, start=1) if i != DUPLICATE]
    assert len(exported) == 496
    for row, back in zip(rows, exported, strict=True):
        # Every field as the authors wrote it; only the spacing inside two name lists differs.
        assert {k: v for k, v in back.items() if k != "label"} == {k: v for k, v in row.items() if k != "label"}
        assert back["label"] == row["label"] or names(back["label"]) == names(row["label"])
    assert sum(back["label"] != row["label"] for row, back in zip(rows, exported, strict=True)) == 2

    replies = authors_eval.perfect_replies(original)
    assert authors_eval.score(exported, replies) == {
        "Quantitative": (63, 63),
        "Procedural_intermediate_state_recognition": (88, 88),
        "Procedural_latent_action_reasoning": (86, 86),
        "Procedural_transformation_planning": (42, 42),
        "Spatial_fine_grained": (167, 167),
        "Spatial_global": (50, 50),
        "Overall": (496, 496),
    }
    # Every choice answered B: right exactly where the truth is B.
    b_replies = {authors_eval.row_key(r): "<answer>B</answer>" for r in original}
    truth_b = sum(row["label"] == "B" for row in rows)
    assert authors_eval.score(exported, b_replies)["Overall"] == (truth_b, 496)
