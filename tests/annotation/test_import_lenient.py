"""The item importer, lenient where it is safe: a JSON array of items is read as items, fields the
protocol does not know are kept (in the item's extra: shown to reviewers, exported back, never
sent to annotators) and named once, --strict refuses them; a file in the wrong shape gets one
message naming the shape found and the shapes expected; a line's errors come in one round.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.urls import get_resolver

from annotation.importing import ImportRefused, items_import
from annotation.importing.samples import make_image
from annotation.models import Item, MediaAsset, Role
from annotation.releases import release_freeze, release_lines
from protocols import registry
from tests.helpers.clients import logged_in, token_client
from tests.helpers.files import write_lines

get_resolver().url_patterns  # noqa: B018  (loaded before the setting changes, as in a server)

pytestmark = pytest.mark.django_db

EXPECTED = (
    'expected JSONL of item objects, a JSON array of items, {"items": [...]}, or a zip with items.jsonl, or one of '
    "the authors' formats: lid-sheet (lids.json (the lid check sheet))"
)


@pytest.fixture(autouse=True)
def _sample_protocol(settings):
    settings.STATELAB_PROTOCOLS = [*registry.BUILT_IN, "tests.protocols.sample_protocol"]


@pytest.fixture
def lids(make_project, tmp_path):
    make_image(tmp_path / "pics/a.png", 0, 0)
    return make_project("lids", "lidcheck")


def lid(i: int, **more) -> dict:
    line = {
        "id": f"lid-{i}",
        "image": "pics/a.png",
        "object": "jar",
        "question": "Is the jar's lid open?",
        "options": ["yes", "no"],
    }
    return {**line, **more}


def refused(project, path, **kw) -> list[str]:
    with pytest.raises(ImportRefused) as exc:
        items_import(project=project, path=path, **kw)
    assert not Item.objects.exists() and not MediaAsset.objects.exists()
    return exc.value.errors


def test_a_json_array_of_items_is_read_as_items(lids, tmp_path):
    path = tmp_path / "items.json"
    path.write_text(json.dumps([lid(0), lid(1, answer="B")], indent=2))
    report = items_import(project=lids, path=path)
    assert (report.lines, report.created, report.by_status) == (2, 2, {"annotated": 1, "pending": 1})
    assert report.format == "statelab" and report.kept_fields == []
    # {"items": [...]} as before.
    path.write_text(json.dumps({"items": [lid(0), lid(1, answer="B")]}))
    assert items_import(project=lids, path=path).unchanged == 2


def test_an_error_in_an_array_is_named_by_its_line_and_a_broken_array_once(make_project, tmp_path):
    project = make_project("other", "lidcheck")
    make_image(tmp_path / "pics/a.png", 0, 0)
    path = tmp_path / "items.json"
    path.write_text("[\n" + json.dumps(lid(0)) + ",\n" + json.dumps(lid(1, options=["no"])) + "\n]\n")
    assert refused(project, path) == ['line 3: field options: must be ["yes", "no"]']
    path.write_text("[\n" + json.dumps(lid(0)) + "\n" + json.dumps(lid(1)) + "\n]\n")
    assert refused(project, path) == [
        "line 3: field -: invalid JSON (expected ',' or ']' after an item at line 3 column 1, found '{')"
    ]


@pytest.mark.parametrize(
    ("body", "found"),
    [
        (b'["a", "b"]', "a JSON array of strings, not of item objects"),
        (b"[[1, 2], [3]]", "a JSON array of arrays, not of item objects"),
        (
            json.dumps({"info": {}, "images": [], "annotations": []}, indent=2).encode(),
            'a JSON object with the keys "info", "images", "annotations" and no "items" list',
        ),
        (
            json.dumps({"items": {"a": 1}}, indent=2).encode(),
            'a JSON object whose "items" is an object, not a list of items',
        ),
        (b"id,image,question\n1,a.png,Open?\n2,b.png,Shut?\n", "a CSV table (first line: 'id,image,question')"),
        (b"id\timage\n1\ta.png\n", "a tab-separated table (first line: 'id\\timage')"),
        (b'"a"\n"b"\n3\n', "JSON lines of numbers and strings, not item objects"),
        (b"<items>\n<item/>\n</items>\n", "XML or HTML markup (first line: '<items>')"),
        (b"items:\n  - id: 1\n", "YAML or other 'key: value' text (first line: 'items:')"),
        (b"%PDF-1.7\n%binary", "a PDF document"),
        (b"PAR1\x00\x00", "an Apache Parquet file"),
        (b"\x1f\x8b\x08\x00", "a gzip-compressed file (decompress it first)"),
    ],
)
def test_a_file_in_the_wrong_shape_gets_one_message_naming_it(lids, tmp_path, body, found):
    path = tmp_path / "items.jsonl"
    path.write_bytes(body * (1 if body.startswith((b"%", b"PAR", b"\x1f", b"{", b"[")) else 500))
    assert refused(lids, path) == [f"file: field -: found {found}; {EXPECTED}"]


def test_lines_that_are_mostly_good_keep_their_line_errors(lids, tmp_path):
    # A broken first line among objects, or a one-line file, is not a wrong shape: its line says why.
    path = write_lines(tmp_path / "items.jsonl", ["not json", lid(1), lid(2)])
    assert refused(lids, path) == ["line 1: field -: invalid JSON (Expecting value at column 1)"]
    (tmp_path / "one.jsonl").write_text("not json\n")
    assert refused(lids, tmp_path / "one.jsonl") == ["line 1: field -: invalid JSON (Expecting value at column 1)"]


def test_unknown_fields_are_kept_named_once_and_strict_refuses_them(lids, tmp_path):
    lines = [lid(0, dataset="ego4d", video_id="v1"), lid(1, frame_0=12, extra={"source": "sheet 2"}), lid(2)]
    path = write_lines(tmp_path / "items.jsonl", lines)
    assert refused(lids, path, strict=True) == [
        "line 1: field dataset: unknown field for protocol lidcheck (refused by --strict)",
        "line 1: field video_id: unknown field for protocol lidcheck (refused by --strict)",
        "line 2: field frame_0: unknown field for protocol lidcheck (refused by --strict)",
        "line 2: field extra: unknown field for protocol lidcheck (refused by --strict)",
    ]

    report = items_import(project=lids, path=path)

    assert report.kept_fields == ["dataset", "frame_0", "source", "video_id"]
    assert report.kept_sentence() == "kept 4 fields not in the protocol: dataset, frame_0, source, video_id"
    extras = dict(Item.objects.values_list("external_id", "payload__extra"))
    assert extras == {
        "lid-0": {"dataset": "ego4d", "video_id": "v1"},
        "lid-1": {"source": "sheet 2", "frame_0": 12},
        "lid-2": None,
    }
    again = items_import(project=lids, path=path)
    assert (again.created, again.unchanged) == (0, 3)


def test_an_extra_that_is_no_object_or_repeats_a_field_is_refused(lids, tmp_path):
    path = write_lines(
        tmp_path / "items.jsonl", [lid(0, extra=["a"]), lid(1, shelf=2, extra={"shelf": 3}), lid(2, extra={})]
    )
    assert refused(lids, path) == [
        "line 1: field extra: must be an object of the fields kept from the source",
        "line 2: field shelf: given both at the top level and inside extra; keep one",
    ]


def test_a_lines_errors_come_in_one_round_checks_across_fields_included(make_project, tmp_path):
    project = make_project("vt", "visualtrans")
    line = {
        "id": 7,
        "images": ["a.png", "b.png"],
        "question": "Which?",
        "format": "choice",
        "options": ["x", "y"],
        "answer": "Z",
        "subtask": "global",
    }
    assert refused(project, write_lines(tmp_path / "items.jsonl", [line])) == [
        "line 1: field id: must be a string (quote numeric ids)",
        "line 1: field answer: must be one option letter A–B",
    ]


@pytest.mark.django_db(transaction=True)
def test_kept_fields_reach_reviewers_and_the_release_but_never_annotators(lids, tmp_path, make_user):
    annotator, reviewer = make_user("ann"), make_user("rev")
    lids.memberships.create(user=annotator, role=Role.ANNOTATOR)
    lids.memberships.create(user=reviewer, role=Role.REVIEWER)
    path = write_lines(tmp_path / "items.jsonl", [lid(0, video_id="secret-video-7", extra={"frame": 3})])
    items_import(project=lids, path=path)
    item = Item.objects.get()

    page = logged_in(reviewer).get(f"/projects/lids/review/{item.pk}/").content.decode()
    assert "kept-fields" not in page and "secret-video-7" not in page  # pending: may still be answered blind

    task = token_client(annotator).post("/api/projects/lids/tasks/next/", {}, format="json")
    assert task.status_code == 200, task.content
    shown = task.json()
    assert shown["item"]["question"] == "Is the jar's lid open?"
    assert "extra" not in shown["item"] and "secret-video-7" not in json.dumps(shown)
    submitted = token_client(annotator).post(
        f"/api/tasks/{shown['task']}/submit/", {"result": {"answer": "A", "flags": []}}, format="json"
    )
    assert submitted.status_code == 201, submitted.content

    detail = token_client(reviewer).get(f"/api/items/{item.pk}/review/").json()
    assert detail["item"]["payload"]["extra"] == {"frame": 3, "video_id": "secret-video-7"}
    page = logged_in(reviewer).get(f"/projects/lids/review/{item.pk}/").content.decode()
    assert '<section class="card" id="kept-fields" data-kept-fields>' in page
    assert "<dt>video_id</dt><dd><code>secret-video-7</code></dd>" in page
    assert "<dt>frame</dt><dd><code>3</code></dd>" in page

    Item.objects.update(status="verified", payload={**item.payload, "answer": "A"})
    release = release_freeze(project=lids, version="v1")
    [line] = list(release_lines(release))
    assert line["extra"] == {"frame": 3, "video_id": "secret-video-7"}
    reimport = Path(tmp_path / "export.jsonl")
    write_lines(reimport, [line])
    report = items_import(project=lids, path=reimport, verified=True)
    assert (report.unchanged + report.promoted, report.kept_fields) == (1, ["frame", "video_id"])
