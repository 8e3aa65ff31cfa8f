"""import_annotations: Likert ratings and blind QA answers from published human studies."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.importing import ImportRefused, annotations_import, items_import
from annotation.importing.samples import write_sample_dataset
from annotation.models import Annotation, Item
from tests.helpers.files import write_lines

pytestmark = pytest.mark.django_db

FULL = {
    "subject": 4,
    "object": 5,
    "action": 3,
    "osc_accuracy": 2,
    "osc_consistency": 3,
    "scene": None,
    "realism": 4,
    "aesthetics": 5,
}


@pytest.fixture
def osc(make_project, tmp_path):
    project = make_project("osc", "oscbench", annotations_per_item=2)
    items_import(project=project, path=write_sample_dataset(tmp_path / "d", "oscbench", 3))
    return project


@pytest.fixture
def m3(make_project, tmp_path):
    project = make_project("m3", "m3verse")
    items_import(project=project, path=write_sample_dataset(tmp_path / "d", "m3verse", 2), verified=True)
    return project


def snapshot():
    return (
        list(Annotation.objects.order_by("id").values_list("item_id", "external_rater", "result")),
        list(Item.objects.order_by("id").values_list("annotation_count", "status")),
    )


def test_ratings_become_import_annotations_and_count_toward_the_item(osc, tmp_path):
    lines = [
        {"item": "oscbench-00000", "rater": "r1", "scores": FULL},
        {"item": "oscbench-00000", "rater": "r2", "scores": {**FULL, "subject": None}},
        {"item": "oscbench-00001", "rater": "r1", "scores": FULL},
    ]
    report = annotations_import(project=osc, path=write_lines(tmp_path / "r.jsonl", lines))

    assert (report.lines, report.created, report.unchanged, report.items_touched) == (3, 3, 0, 2)
    a = Annotation.objects.get(item__external_id="oscbench-00000", external_rater="r2")
    assert a.annotator is None and a.source == "import"
    assert a.result == {"scores": {**FULL, "subject": None}}
    counts = dict(osc.items.values_list("external_id", "annotation_count"))
    assert counts == {"oscbench-00000": 2, "oscbench-00001": 1, "oscbench-00002": 0}
    statuses = dict(osc.items.values_list("external_id", "status"))
    assert statuses == {"oscbench-00000": "annotated", "oscbench-00001": "pending", "oscbench-00002": "pending"}


def test_reimporting_ratings_changes_nothing(osc, tmp_path):
    path = write_lines(tmp_path / "r.jsonl", [{"item": "oscbench-00002", "rater": "r9", "scores": FULL}])
    annotations_import(project=osc, path=path)
    before = snapshot()
    again = annotations_import(project=osc, path=path)
    assert (again.created, again.unchanged) == (0, 1)
    assert snapshot() == before


def test_bad_ratings_are_refused_whole(osc, tmp_path):
    lines = [
        {"item": "oscbench-00000", "rater": "r1", "scores": FULL},
        {"item": "oscbench-00000", "rater": "r2", "scores": {**FULL, "realism": None, "object": 6}},
        {"item": "oscbench-00001", "rater": "r3", "scores": {k: v for k, v in FULL.items() if k != "action"}},
        {"item": "nope", "rater": "r1", "scores": FULL},
        {"item": "oscbench-00000", "rater": "r1", "scores": FULL},
    ]
    before = snapshot()
    with pytest.raises(ImportRefused) as exc:
        annotations_import(project=osc, path=write_lines(tmp_path / "r.jsonl", lines))
    assert exc.value.errors == [
        "line 2: field scores.object: must be a whole number from 1 to 5",
        "line 2: field scores.realism: may not be null (only subject and scene may be N/A)",
        "line 3: field scores.action: missing: give a whole number from 1 to 5",
        "line 4: field item: no item 'nope' in project osc",
        'line 5: field rater: duplicate (item, rater) pair \'["oscbench-00000", "r1"]\' (first on line 1)',
    ]
    assert snapshot() == before


def test_changed_rating_of_an_existing_pair_is_refused(osc, tmp_path):
    annotations_import(
        project=osc, path=write_lines(tmp_path / "a.jsonl", [{"item": "oscbench-00000", "rater": "r1", "scores": FULL}])
    )
    before = snapshot()
    with pytest.raises(ImportRefused) as exc:
        annotations_import(
            project=osc,
            path=write_lines(
                tmp_path / "b.jsonl", [{"item": "oscbench-00000", "rater": "r1", "scores": {**FULL, "object": 1}}]
            ),
        )
    assert exc.value.errors == ["line 1: field rater: 'r1' already has a different annotation of item 'oscbench-00000'"]
    assert snapshot() == before


def test_blind_qa_answers_are_checked_against_the_item(m3, tmp_path):
    good = [
        {"item": "m3verse-00000", "annotator": "h1", "answer": ["A"], "flags": []},
        {"item": "m3verse-00001", "annotator": "h1", "answer": "B,A", "flags": ["ambiguous"]},
        {"item": "m3verse-00001", "annotator": "h2", "answer": None, "flags": ["insufficient_evidence"]},
    ]
    report = annotations_import(project=m3, path=write_lines(tmp_path / "qa.jsonl", good))
    assert report.created == 3
    # Stored as a submit of the same answer stores it (annotation.canonical), not as written.
    assert Annotation.objects.get(external_rater="h1", item__external_id="m3verse-00001").result == {
        "answer": ["A", "B"],
        "flags": ["ambiguous"],
    }
    bad = [
        {"item": "m3verse-00000", "annotator": "h3", "answer": ["D"], "flags": []},
        {"item": "m3verse-00000", "annotator": "h4", "answer": None},
        {"item": "m3verse-00000", "annotator": "h5", "answer": ["A"], "flags": ["looks_wrong"]},
    ]
    before = snapshot()
    with pytest.raises(ImportRefused) as exc:
        annotations_import(project=m3, path=write_lines(tmp_path / "bad.jsonl", bad))
    assert exc.value.errors == [
        "line 1: field answer: Answer with option letters from A, B, C.",  # the submit's own check and words
        "line 2: field answer: required (null only together with a flag)",
        "line 3: field flags: must be a list drawn from missing_correct_option, wrong_ground_truth, ambiguous, "
        "insufficient_evidence, each once",
    ]
    assert snapshot() == before


def test_an_imported_answer_passes_the_check_a_submit_of_it_passes(make_project, tmp_path):
    # An empty set names no object: no answer, as in a submit (annotation.canonical) — refused without
    # a flag, stored as null with one. A project whose M3-Verse questions have one correct option
    # takes one letter, as its annotators' form does.
    vt = make_project("vt", "visualtrans")
    items_import(project=vt, path=write_sample_dataset(tmp_path / "vt", "visualtrans", 3), verified=True)
    m3 = make_project("m3one", "m3verse", settings={"multiple": False})
    items_import(project=m3, path=write_sample_dataset(tmp_path / "m3", "m3verse", 1), verified=True)
    before = snapshot()
    with pytest.raises(ImportRefused) as exc:
        annotations_import(
            project=vt,
            path=write_lines(
                tmp_path / "bad.jsonl",
                [
                    {"item": "visualtrans-00002", "annotator": "h1", "answer": [], "flags": []},
                    {"item": "visualtrans-00002", "annotator": "h2", "answer": ["  "], "flags": []},
                    {"item": "visualtrans-00002", "annotator": "h3", "answer": ["cup"], "flags": []},
                ],
            ),
        )
    assert exc.value.errors == [
        "line 1: field answer: Answer the question, or set a flag saying why you cannot.",
        "line 2: field answer: Name at least one object, or set a flag.",
    ]
    with pytest.raises(ImportRefused) as exc:
        annotations_import(
            project=m3,
            path=write_lines(
                tmp_path / "two.jsonl",
                [
                    {"item": "m3verse-00000", "annotator": "h1", "answer": "A,C", "flags": []},
                ],
            ),
        )
    assert exc.value.errors == [
        "line 1: field answer: Exactly one option is correct for this question: give one letter."
    ]
    assert snapshot() == before

    annotations_import(
        project=vt,
        path=write_lines(
            tmp_path / "flagged.jsonl",
            [
                {"item": "visualtrans-00002", "annotator": "h1", "answer": [], "flags": ["insufficient_evidence"]},
                {"item": "visualtrans-00002", "annotator": "h2", "answer": ["  "], "flags": ["ambiguous"]},
            ],
        ),
    )
    assert dict(Annotation.objects.values_list("external_rater", "result")) == {
        "h1": {"answer": None, "flags": ["insufficient_evidence"]},
        "h2": {"answer": None, "flags": ["ambiguous"]},
    }


def test_projects_without_imported_annotations_refuse(make_project, tmp_path):
    project = make_project("st", "status")
    with pytest.raises(ImportRefused) as exc:
        annotations_import(project=project, path=write_lines(tmp_path / "x.jsonl", [{"item": "a"}]))
    assert exc.value.errors == [
        "file: field -: project st (status) takes no imported annotations; ratings go to oscbench projects, "
        "blind QA answers to visualtrans and m3verse projects"
    ]


def test_command(osc, tmp_path, capsys):
    path = write_lines(tmp_path / "r.jsonl", [{"item": "oscbench-00000", "rater": "r1", "scores": FULL}])
    call_command("import_annotations", "osc", str(path))
    out = capsys.readouterr().out
    assert "read as StateLab annotation lines (JSONL)" in out
    assert "osc: 1 lines, 1 annotations created (0 aggregated), 0 unchanged, 1 items touched" in out
    bad = write_lines(tmp_path / "bad.jsonl", [{"item": "oscbench-00000", "rater": "r2", "scores": {}}])
    with pytest.raises(CommandError, match="import refused: 8 error"):
        call_command("import_annotations", "osc", str(bad))


@pytest.mark.django_db(transaction=True)  # the import is sent when its run is committed
def test_api_and_page_import_ratings_for_researchers(osc, make_user, client, tmp_path, settings, eager):
    import io

    from rest_framework.test import APIClient

    from annotation.models import Membership, Role

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    res = make_user("res")
    Membership.objects.create(project=osc, user=res, role=Role.RESEARCHER)
    api = APIClient()
    api.force_authenticate(res)
    body = (json.dumps({"item": "oscbench-00001", "rater": "r7", "scores": FULL}) + "\n").encode()
    upload = io.BytesIO(body)
    upload.name = "ratings.jsonl"
    r = api.post("/api/projects/osc/annotation-imports/", {"file": upload}, format="multipart")
    assert r.status_code == 202
    run = api.get(r["Location"]).json()
    assert (run["kind"], run["status"]) == ("annotations", "finished")
    assert run["report"] == {
        "lines": 1,
        "created": 1,
        "unchanged": 0,
        "items_touched": 1,
        "aggregated": 0,
        "format": "statelab",
        "format_label": "StateLab annotation lines (JSONL)",
        "notes": [],
    }

    client.force_login(res)
    bad = io.BytesIO(json.dumps({"item": "oscbench-00001", "rater": "r7", "scores": {**FULL, "object": 2}}).encode())
    bad.name = "ratings.jsonl"
    page = client.post("/projects/osc/import/", {"file": bad, "kind": "annotations"}, follow=True)
    assert page.status_code == 200 and 'data-status="refused"' in page.content.decode()
    assert (
        "line 1: field rater: &#x27;r7&#x27; already has a different annotation of item &#x27;oscbench-00001&#x27;"
        in page.content.decode()
    )
    assert Annotation.objects.get(external_rater="r7").result["scores"]["object"] == 5
