"""M3-Verse QA lines as the authors' pipeline writes them, read into item lines and written back,
on files the tests write in the pipeline's shape (docs/protocols/m3verse.md, "The authors' files")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from annotation.importing import items_import
from annotation.importing.formats import check_item
from annotation.importing.samples import make_video
from annotation.models import Item, ItemStatus
from annotation.releases import release_freeze, release_lines
from protocols import registry
from protocols.kit.releases import FormatRefused
from protocols.m3verse.formats import FORMATS
from tests.helpers.files import write_lines

FORMAT = FORMATS[0]
NONE_LISTED = "No correct option is listed."
# The fields of one line as the pipeline's filtering step reads them back into its record type.
PIPELINE_KEYS = {
    "scene_id",
    "category",
    "question_id",
    "state_type",
    "question",
    "options",
    "answer",
    "question_type",
    "subcategory",
    "generator_name",
    "hallucination",
}


def qa(scene: str, n: int, **fields: Any) -> dict[str, Any]:
    """One line as the pipeline writes it, its key order included (capabilities come last, from
    the tagging step)."""
    line = {
        "scene_id": scene,
        "category": "object_changes",
        "question_id": f"{scene}-{n}",
        "state_type": "inter-states",
        "question": "Where did the Apple move between the first and the second video?",
        "options": ["A. Apple", "B. DiningTable", "C. Sink", f"D. {NONE_LISTED}"],
        "answer": ["B"],
        "question_type": "single_choice",
        "subcategory": "movement_between_receptacles",
        "generator_name": "object_changes",
        "hallucination": False,
        "capabilities": ["spatial understanding", "temporal understanding"],
    }
    line.update(fields)
    return {k: v for k, v in line.items() if v is not None}


def pipeline_lines() -> list[dict[str, Any]]:
    return [
        qa("scene_800", 1),
        qa(
            "scene_800",
            2,
            category="object_info",
            state_type="intra-state",
            question="Which of these objects are red?",
            options=["A. Apple", "B. Bowl", "C. Tomato", "D. Sink"],
            answer=["A", "C"],
            question_type="multiple_choice",
            subcategory="object_color",
            generator_name="object_info",
            capabilities=["attribute recognition", "reasoning"],
        ),
        qa("scene_800", 3, answer=["D"], hallucination=True, capabilities=["Spatial Understanding", "counting"]),
        qa("scene_801", 1, capabilities=[]),
        qa("scene_801", 2, capabilities=None),  # written before the tagging step
        qa("scene_800", 1),  # an exact repeat
    ]


def write_release(root: Path, lines: list | None = None, *, videos: bool = False) -> Path:
    """The pipeline's layout: QAs/<file>.jsonl beside data/<scene_id>/state_0.mp4, state_1.mp4."""
    lines = pipeline_lines() if lines is None else lines
    path = root / "QAs" / "M3-Verse.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_lines(path, lines)
    for k, scene in enumerate(sorted({line["scene_id"] for line in lines if isinstance(line, dict)})):
        (root / "data" / scene).mkdir(parents=True, exist_ok=True)
        if videos:
            make_video(root / "data" / scene / "state_0.mp4", k, start=0, end=0, frames=4)
            make_video(root / "data" / scene / "state_1.mp4", k, start=2, end=2, frames=4)
    return path


def without_extra(line: dict[str, Any]) -> dict[str, Any]:
    """The line the project's own item format takes: keeping the authors' other fields
    ("extra") is the generic importer's job, tested with it."""
    return {k: v for k, v in line.items() if k != "extra"}


# --- reading --------------------------------------------------------------------------------------


def test_the_protocol_lists_the_format():
    assert registry.get("m3verse").format_named("m3verse-pipeline", "items") is FORMAT


def test_pipeline_lines_become_item_lines(tmp_path):
    conversion = FORMAT.read(write_release(tmp_path))

    lines = list(conversion.lines)
    assert len(lines) == 5
    first, several, hallucinated, untagged_empty, untagged = lines
    assert first == {
        "id": "scene_800-1",
        "video_before": "scene_800/state_0.mp4",
        "video_after": "scene_800/state_1.mp4",
        "question": "Where did the Apple move between the first and the second video?",
        "options": ["Apple", "DiningTable", "Sink", NONE_LISTED],  # the form adds its own letters
        "answer": ["B"],
        "context": "inter",
        "capabilities": ["spatial", "temporal"],
        "hallucination": False,
        "multiple": False,
        "extra": {
            "scene_id": "scene_800",
            "category": "object_changes",
            "question_id": "scene_800-1",
            "question_type": "single_choice",
            "subcategory": "movement_between_receptacles",
            "generator_name": "object_changes",
            "capabilities": ["spatial understanding", "temporal understanding"],
        },
    }
    assert (several["context"], several["answer"], several["multiple"]) == ("intra", ["A", "C"], True)
    assert several["capabilities"] == ["attribute", "reasoning"]
    assert (hallucinated["hallucination"], hallucinated["answer"]) == (True, ["D"])
    assert hallucinated["capabilities"] == ["spatial"]
    assert hallucinated["extra"]["capabilities"] == ["Spatial Understanding", "counting"]
    assert "capabilities" not in untagged_empty and "capabilities" not in untagged
    assert untagged_empty["video_before"] == "scene_801/state_0.mp4"
    assert conversion.media_root == tmp_path / "data"
    assert conversion.notes == [
        "5 questions read: 1 intra-state, 4 inter-states",
        "state_type mapped to context; the 'A. ' prefixes taken off the options (5 questions had them); "
        "question_type mapped to multiple",
        "videos <scene_id>/state_0.mp4 (before) and state_1.mp4 (after); ids from scene_id and question_id",
        "capability names mapped to spatial, temporal, attribute, reasoning; the authors' names and every "
        "other field kept in extra",
        "1 question carries no capabilities (not yet through the tagging step)",
        "1 question tagged with no known capability",
        "capability names outside the paper's four kept in extra only: 'counting' (1)",
        "1 line repeating another exactly, imported once (line 6 repeats line 1)",
        "videos found under data/<scene_id>/",
    ]


def test_every_line_is_a_complete_item_with_or_without_capabilities(tmp_path):
    for line in FORMAT.read(write_release(tmp_path)).lines:
        checked = check_item("m3verse", without_extra(line), verified=True)
        assert not isinstance(checked, list), (line["id"], checked)
        assert checked.complete


def test_a_question_id_without_its_scene_gets_it(tmp_path):
    (line,) = FORMAT.read(write_release(tmp_path, [qa("scene_9", 1, question_id=17)])).lines
    assert (line["id"], line["extra"]["question_id"]) == ("scene_9-17", 17)


def test_detect_knows_the_pipeline_lines_and_nothing_else(tmp_path):
    assert FORMAT.detect(write_release(tmp_path))
    native = write_lines(tmp_path / "items.jsonl", [{"id": "x", "question": "q", "options": ["a", "b"]}])
    visualtrans = tmp_path / "VisualTrans.json"
    visualtrans.write_text(json.dumps([{"task_type": "count", "images": [], "question": "q", "label": "1"}]))
    assert not FORMAT.detect(native)
    assert not FORMAT.detect(visualtrans)
    assert not FORMAT.detect(tmp_path)


def test_lines_that_cannot_be_read_are_named_together(tmp_path):
    bad = [
        qa("scene_1", 1),
        "{not json",
        qa("scene_1", 2, state_type="cross-state"),
        qa("scene_1", 3, answer=["E"]),
        qa("scene_1", 4, answer=["A", "A"]),
        {"scene_id": "scene_1", "question_id": "scene_1-5"},
        qa("../etc", 6),
        qa("scene_1", 1, answer=["C"]),
    ]
    with pytest.raises(FormatRefused) as exc:
        FORMAT.read(write_release(tmp_path, bad))
    assert str(exc.value) == (
        "M3-Verse.jsonl: 7 QA lines cannot be read: "
        "line 2: not JSON (Expecting property name enclosed in double quotes); "
        "line 3: state_type 'cross-state' is neither intra-state nor inter-states; "
        "line 4: answer must list distinct option letters A–D, found ['E']; "
        "line 5: answer must list distinct option letters A–D, found ['A', 'A']; "
        "line 6: missing state_type, question, options, answer; "
        "line 7: scene_id must be a scene folder's name, found '../etc'; "
        "line 8: question scene_1-1 already came on line 1"
    )


# --- through the project's importer ------------------------------------------------------------


@pytest.mark.django_db
def test_the_lines_import_with_their_two_videos(make_project, tmp_path):
    project = make_project("m3", "m3verse")
    conversion = FORMAT.read(write_release(tmp_path / "release", videos=True))
    lines = list(conversion.lines)

    report = items_import(
        project=project,
        path=write_lines(tmp_path / "items.jsonl", [without_extra(line) for line in lines]),
        media_root=conversion.media_root,
        verified=True,
    )

    assert (report.lines, report.created, report.media_files) == (5, 5, 4)
    stored = {i.external_id: i for i in Item.objects.filter(project=project)}
    assert {i.status for i in stored.values()} == {ItemStatus.VERIFIED}
    assert stored["scene_800-1"].payload["options"] == ["Apple", "DiningTable", "Sink", NONE_LISTED]
    assert stored["scene_800-2"].payload["answer"] == ["A", "C"]
    assert "capabilities" not in stored["scene_801-2"].payload


# --- writing back ----------------------------------------------------------------------------------


def opener(folder: Path):
    return lambda rel: open(folder / rel, "rb")


def test_the_lines_written_back_are_the_pipelines(tmp_path):
    conversion = FORMAT.read(write_release(tmp_path / "in", videos=True))

    written = FORMAT.write(conversion.lines, tmp_path / "out", open_media=opener(conversion.media_root))

    out = tmp_path / "out"
    assert [p.relative_to(out).as_posix() for p in written] == [
        "QAs/M3-Verse.jsonl",
        "data/scene_800/state_0.mp4",
        "data/scene_800/state_1.mp4",
        "data/scene_801/state_0.mp4",
        "data/scene_801/state_1.mp4",
    ]
    assert (out / "data/scene_801/state_1.mp4").read_bytes() == (
        tmp_path / "in/data/scene_801/state_1.mp4"
    ).read_bytes()
    exported = [json.loads(t) for t in (out / "QAs/M3-Verse.jsonl").read_text(encoding="utf-8").splitlines()]
    originals = pipeline_lines()[:5]
    assert exported == originals
    assert [list(e) for e in exported] == [list(o) for o in originals]  # the pipeline's key order
    for line in exported:
        assert PIPELINE_KEYS <= set(line) <= PIPELINE_KEYS | {"capabilities"}
        # The pipeline's rewriting step takes each option's first three characters as its letter.
        assert [o[:3] for o in line["options"]] == [f"{letter}. " for letter in "ABCD"]


def test_edited_capabilities_are_written_with_the_authors_names(tmp_path):
    first = next(iter(FORMAT.read(write_release(tmp_path)).lines))
    edited = {**first, "capabilities": ["attribute"], "multiple": True}

    FORMAT.write([edited], tmp_path / "out")

    (row,) = [json.loads(t) for t in (tmp_path / "out/QAs/M3-Verse.jsonl").read_text().splitlines()]
    assert (row["capabilities"], row["question_type"]) == (["attribute recognition"], "multiple_choice")


def test_a_line_without_its_answer_is_not_written(tmp_path):
    first = next(iter(FORMAT.read(write_release(tmp_path)).lines))
    with pytest.raises(FormatRefused, match="need an answer and a context"):
        FORMAT.write([{k: v for k, v in first.items() if k != "answer"}], tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.django_db
def test_a_frozen_release_exports_as_pipeline_lines(make_project, tmp_path):
    project = make_project("m3", "m3verse")
    conversion = FORMAT.read(write_release(tmp_path / "in", videos=True))
    items_import(
        project=project,
        path=write_lines(tmp_path / "items.jsonl", [without_extra(line) for line in conversion.lines]),
        media_root=conversion.media_root,
        verified=True,
    )
    release = release_freeze(project=project, version="v1")

    FORMAT.write(release_lines(release), tmp_path / "out", open_media=opener(conversion.media_root))

    exported = {
        row["question_id"]: row
        for row in map(json.loads, (tmp_path / "out/QAs/M3-Verse.jsonl").read_text(encoding="utf-8").splitlines())
    }
    assert sorted(exported) == ["scene_800-1", "scene_800-2", "scene_800-3", "scene_801-1", "scene_801-2"]
    for original in pipeline_lines()[:5]:
        row = exported[original["question_id"]]
        for key in ("scene_id", "state_type", "question", "options", "answer", "question_type", "hallucination"):
            assert row[key] == original[key], key
        assert PIPELINE_KEYS <= set(row)
    # Without the authors' own names (kept in extra), the capabilities come back under the paper's.
    assert exported["scene_800-3"]["capabilities"] == ["spatial understanding"]
    assert "capabilities" not in exported["scene_801-2"]
    assert (tmp_path / "out/data/scene_800/state_0.mp4").is_file()
