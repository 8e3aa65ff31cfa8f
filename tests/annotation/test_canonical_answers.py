"""One stored form of QA answers (annotation.canonical): an import stores what a submit of the same
answer stores, item imports store the known answer in the form verification writes, and
migration 0006 rewrote rows stored before (frozen releases untouched)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as django_apps

from annotation import canonical
from annotation.importing import annotations_import
from annotation.importing.formats import check_item
from annotation.models import Annotation, Item, Release, ReleaseItem
from tests.annotation.work_factories import m3verse_payload, make_item, make_people, visualtrans_payload
from tests.helpers.clients import session_client
from tests.helpers.files import write_lines

pytestmark = pytest.mark.django_db

migration = importlib.import_module("annotation.migrations.0006_canonical_qa_answers")


def submit(project, user, answer) -> dict:
    client = session_client(user)
    body = client.post(f"/api/projects/{project.slug}/tasks/next/").json()
    done = client.post(f"/api/tasks/{body['task']}/submit/", {"result": {"answer": answer, "flags": []}}, format="json")
    assert done.status_code == 201, done.content
    return Annotation.objects.get(task_id=body["task"]).result


@pytest.mark.parametrize(
    "protocol,payload,given,stored",
    [
        ("visualtrans", visualtrans_payload(), "b", "B"),
        ("visualtrans", visualtrans_payload(), " c ", "C"),
        ("visualtrans", {**visualtrans_payload(), "format": "count", "options": None, "answer": 3}, 3, 3),
        (
            "visualtrans",
            {**visualtrans_payload(), "format": "set", "options": None, "answer": ["cup"]},
            ["cup", "  big   bowl"],
            ["cup", "big bowl"],
        ),
        ("m3verse", m3verse_payload(), "C,A", ["A", "C"]),
        # an item that says it has one correct option takes one letter (its own field, never its answer)
        ("m3verse", {**m3verse_payload(), "answer": ["B"], "multiple": False}, ["B"], "B"),
        ("m3verse", {**m3verse_payload(), "answer": ["B"]}, ["B"], ["B"]),  # unsaid: several may be correct
    ],
)
def test_importing_and_submitting_the_same_answer_store_the_same_value(
    make_project, tmp_path, protocol, payload, given, stored
):
    (annotator,) = make_people(1)
    project = make_project("qa", protocol, members={annotator: "annotator"}, annotations_per_item=2)
    make_item(project, "q1", payload={k: v for k, v in payload.items() if v is not None})

    submitted = submit(project, annotator, given)
    annotations_import(
        project=project,
        path=write_lines(
            tmp_path / "a.jsonl",
            [
                {"item": "q1", "annotator": "h1", "answer": given, "flags": []},
            ],
        ),
    )
    imported = Annotation.objects.get(external_rater="h1").result

    assert submitted == imported == {"answer": stored, "flags": []}


def test_imported_flags_are_stored_once_in_the_submit_order(make_project, tmp_path):
    project = make_project("vt", "visualtrans")
    make_item(project, "q1")
    annotations_import(
        project=project,
        path=write_lines(
            tmp_path / "a.jsonl",
            [
                {"item": "q1", "annotator": "h1", "answer": None, "flags": ["insufficient_evidence", "ambiguous"]},
            ],
        ),
    )
    assert Annotation.objects.get().result == {"answer": None, "flags": ["ambiguous", "insufficient_evidence"]}


VT_LINE = {
    "id": "v1",
    "images": ["a.png", "b.png"],
    "question": "Which?",
    "format": "choice",
    "options": ["x", "y", "z"],
    "answer": " b",
    "subtask": "global",
}
M3_LINE = {
    "id": "m1",
    "video_before": "a.mp4",
    "video_after": "b.mp4",
    "question": "What?",
    "options": ["x", "y", "z"],
    "answer": ["C", "A"],
    "context": "intra",
    "capabilities": ["spatial"],
}


@pytest.mark.parametrize(
    "protocol,line,answer",
    [
        ("visualtrans", VT_LINE, "B"),
        (
            "visualtrans",
            {**VT_LINE, "format": "set", "options": None, "answer": ["big   bowl", "cup"]},
            ["big bowl", "cup"],
        ),
        ("visualtrans", {**VT_LINE, "format": "count", "options": None, "answer": 2}, 2),
        ("m3verse", M3_LINE, ["A", "C"]),
    ],
)
def test_item_imports_store_the_known_answer_in_the_verified_form(protocol, line, answer):
    line = {k: v for k, v in line.items() if v is not None}
    # check_item (pass 1, whose rows COPY writes) stores the canonical answer.
    assert check_item(protocol, dict(line)).payload["answer"] == answer
    assert canonical.payload_answer(protocol, {**line, "answer": answer}) == answer  # already canonical: unchanged


def test_the_migration_rewrites_raw_rows_and_leaves_canonical_ones_and_frozen_releases(make_project, make_user):
    vt = make_project("vt", "visualtrans")
    m3 = make_project("m3", "m3verse")
    raw_vt = make_item(vt, "raw", payload={**visualtrans_payload(), "answer": " b"})
    raw_m3 = make_item(m3, "raw", payload={**m3verse_payload(), "answer": ["C", "A"]})
    single_m3 = make_item(m3, "single", payload={**m3verse_payload(), "answer": ["B"]})
    done = make_item(vt, "done", payload=visualtrans_payload())  # answer "C": canonical already
    rows = {
        "vt_import": Annotation.objects.create(
            item=raw_vt,
            external_rater="h1",
            source="import",
            result={"answer": "b", "flags": ["insufficient_evidence", "ambiguous"]},
        ),
        "m3_import": Annotation.objects.create(
            item=raw_m3, external_rater="h1", source="import", result={"answer": "C, A", "flags": []}
        ),
        "m3_single": Annotation.objects.create(
            item=single_m3, external_rater="h1", source="import", result={"answer": ["b"], "flags": []}
        ),
        # A submit stored its answer in the canonical form when the item took one letter; the
        # migration leaves submits alone even where the item's shape has changed since.
        "submitted": Annotation.objects.create(
            item=raw_m3, annotator=make_user(), source="task", result={"answer": "A", "flags": []}
        ),
    }
    release = Release.objects.create(
        project=vt, version="v1", split="test", option_seed=0, checksum="abc", item_count=1
    )
    frozen = ReleaseItem.objects.create(release=release, item=raw_vt, position=0, payload={"id": "raw", "answer": " b"})

    assert migration.canonical_item_answers(django_apps, None) == 2
    assert migration.canonical_imported_answers(django_apps, None) == 3

    assert Item.objects.get(pk=raw_vt.pk).payload == {**visualtrans_payload(), "answer": "B"}
    assert Item.objects.get(pk=raw_m3.pk).payload["answer"] == ["A", "C"]
    assert Item.objects.get(pk=single_m3.pk).payload["answer"] == ["B"]
    assert Item.objects.get(pk=done.pk).payload == visualtrans_payload()
    results = {name: Annotation.objects.get(pk=row.pk).result for name, row in rows.items()}
    assert results == {
        "vt_import": {"answer": "B", "flags": ["ambiguous", "insufficient_evidence"]},
        "m3_import": {"answer": ["A", "C"], "flags": []},
        "m3_single": {"answer": "B", "flags": []},
        "submitted": {"answer": "A", "flags": []},
    }
    # The frozen release keeps its lines, so its checksum still holds.
    frozen.refresh_from_db()
    release.refresh_from_db()
    assert (frozen.payload, release.checksum) == ({"id": "raw", "answer": " b"}, "abc")
    # Running it again changes nothing.
    assert migration.canonical_item_answers(django_apps, None) == 0
    assert migration.canonical_imported_answers(django_apps, None) == 0
