"""M3-Verse QA lines as the pipeline's QA generator writes them (and as its capability step
extends them), through the commands a researcher runs: import_items detects the format and keeps
the pipeline's own fields with each item (extra), freeze_release, export_release --format
m3verse-pipeline; the pipeline's loading steps (authors_eval.py) read the export, and every
provenance field is back."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from annotation.models import Item, ItemStatus

from . import authors_eval
from .test_formats import qa, write_release

pytestmark = pytest.mark.django_db

PROVENANCE = ("scene_id", "category", "question_id", "subcategory", "generator_name", "question_type")


def generator_lines() -> list[dict]:
    """Lines as the QA generator writes them: no capabilities yet; the intra-state questions of a
    scene numbered before its inter-states ones."""
    return [
        qa(
            "scene_12",
            1,
            category="object_info",
            state_type="intra-state",
            question="How many Mugs are there in the first video?",
            options=["A. 1", "B. 2", "C. 3", "D. No correct option is listed."],
            answer=["B"],
            subcategory="object_count",
            generator_name="object_count",
            capabilities=None,
        ),
        qa("scene_12", 2, capabilities=None),
        qa(
            "scene_7",
            1,
            question="Which objects were opened between the two videos?",
            options=["A. Fridge", "B. Drawer", "C. Laptop"],
            answer=["A", "C"],
            question_type="multiple_choice",
            subcategory="state_changes",
            generator_name="state_changes",
            capabilities=None,
        ),
    ]


def run(tmp_path: Path, lines: list[dict]) -> tuple[Path, str]:
    source = write_release(tmp_path / "M3-Verse", lines, videos=True)
    out = StringIO()
    call_command("import_items", "m3", str(source), "--protocol", "m3verse", "--create", "--verified", stdout=out)
    call_command("freeze_release", "m3", "v1", stdout=StringIO())
    exported = tmp_path / "export"
    call_command("export_release", "m3", "v1", "--format", "m3verse-pipeline", "-o", str(exported), stderr=StringIO())
    return exported, out.getvalue()


def exported_rows(exported: Path) -> list[dict]:
    return [json.loads(t) for t in (exported / "QAs/M3-Verse.jsonl").read_text(encoding="utf-8").splitlines()]


def test_generator_lines_import_with_their_provenance_and_export_back_unchanged(tmp_path):
    lines = generator_lines()
    exported, said = run(tmp_path, lines)

    assert "m3verse-pipeline" in said, said
    items = {i.external_id: i for i in Item.objects.filter(project__slug="m3")}
    assert set(items) == {"scene_12-1", "scene_12-2", "scene_7-1"}
    assert {i.status for i in items.values()} == {ItemStatus.VERIFIED}
    for line in lines:
        extra = items[line["question_id"]].payload.get("extra") or {}
        for key in ("category", "subcategory", "generator_name"):
            assert extra.get(key) == line[key], (line["question_id"], key, extra)

    rows = exported_rows(exported)
    assert sorted(rows, key=lambda r: r["question_id"]) == sorted(lines, key=lambda r: r["question_id"])
    assert all(list(row) == list(qa("s", 1, capabilities=None)) for row in rows)  # the generator's key order
    loaded = authors_eval.load(exported / "QAs/M3-Verse.jsonl", exported / "data")
    assert {r.question_id for r in loaded} == {line["question_id"] for line in lines}
    for scene in ("scene_12", "scene_7"):
        for name in ("state_0.mp4", "state_1.mp4"):
            assert (exported / "data" / scene / name).read_bytes() == (
                tmp_path / "M3-Verse" / "data" / scene / name
            ).read_bytes()


def test_the_capability_steps_names_and_unknown_fields_survive_the_database(tmp_path):
    lines = [
        qa("scene_3", 1, capabilities=["spatial understanding", "counting"], source_file="scene_3_qa.json"),
        qa("scene_3", 2, capabilities=[]),
    ]
    exported, _ = run(tmp_path, lines)

    by_id = {row["question_id"]: row for row in exported_rows(exported)}
    assert by_id["scene_3-1"]["capabilities"] == ["spatial understanding", "counting"]
    assert by_id["scene_3-1"]["source_file"] == "scene_3_qa.json"
    assert by_id["scene_3-2"]["capabilities"] == []
    for line in lines:
        for key in PROVENANCE:
            assert by_id[line["question_id"]][key] == line[key], key
