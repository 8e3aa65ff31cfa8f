"""The audit trail (docs/architecture.md, "Invariants"): each service records one event with the right actor in its
own transaction; the API and page filter, page and export it for researchers only."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.audit.record import audit_record
from annotation.importing import ImportRefused, annotations_import, items_import
from annotation.importing.samples import write_sample_dataset
from annotation.models import AuditEvent, Item, ItemStatus, Role
from annotation.releases import ReleaseRefused, release_freeze
from annotation.services import review_decide
from inference import services as inference
from inference.models import InferenceJob, JobStatus
from tests.annotation.work_factories import make_people, valid_result
from tests.evaluation.factories import make_release
from tests.helpers.items import status_payload

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


def events() -> list[tuple]:
    return list(AuditEvent.objects.order_by("pk").values_list("action", "actor_name", "project__slug", "object_type"))


def api(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@pytest.fixture
def people():
    return dict(zip(("ann", "rev", "res", "adm", "out"), make_people(5, prefix="p")))


@pytest.fixture
def project(make_project, people):
    return make_project(
        "aud",
        "status",
        members={
            people["ann"]: Role.ANNOTATOR,
            people["rev"]: Role.REVIEWER,
            people["res"]: Role.RESEARCHER,
            people["adm"]: Role.ADMIN,
        },
    )


def annotated_item(project, annotator, external_id: str = "x1") -> tuple[Item, int]:
    item = Item.objects.create(
        project=project, external_id=external_id, payload=status_payload(1), status=ItemStatus.ANNOTATED
    )
    annotation = item.annotations.create(annotator=annotator, result=valid_result("quintuplet"))
    return item, annotation.pk


# --- one event per action, the right actor, nothing on a refusal --------------------------------------------------


def test_items_import_records_the_importer_and_counts(project, people, tmp_path):
    path = write_sample_dataset(tmp_path / "d", "status", 3)
    items_import(project=project, path=path, actor=people["res"], run_id=7)
    assert events() == [("import", "p2", "aud", "items import")]
    event = AuditEvent.objects.get()
    assert (event.actor, event.object_repr) == (people["res"], "items.jsonl")
    assert event.details == {
        "kind": "items",
        "run": 7,
        "verified": False,
        "lines": 3,
        "created": 3,
        "unchanged": 0,
        "promoted": 0,
    }


def test_a_refused_import_records_nothing(project, people, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    with pytest.raises(ImportRefused):
        items_import(project=project, path=bad, actor=people["res"])
    assert events() == []


def test_annotations_import_records_the_importer(make_project, people, tmp_path):
    osc = make_project("osc", "oscbench", members={people["res"]: Role.RESEARCHER})
    items_import(project=osc, path=write_sample_dataset(tmp_path / "d", "oscbench", 2))
    ratings = tmp_path / "ratings.jsonl"
    ratings.write_text(json.dumps({"item": "oscbench-00000", "rater": "r1", "scores": FULL}) + "\n")
    annotations_import(project=osc, path=ratings, actor=people["res"], run_id=3)
    event = AuditEvent.objects.filter(object_type="annotations import").get()
    assert (event.action, event.actor, event.project, event.object_repr) == (
        "import",
        people["res"],
        osc,
        "ratings.jsonl",
    )
    assert event.details == {
        "kind": "annotations",
        "run": 3,
        "lines": 1,
        "created": 1,
        "unchanged": 0,
        "aggregated": 0,
        "format": "statelab",
    }


@pytest.mark.parametrize("decision, action", [("accept", "verify"), ("edit", "edit"), ("discard", "discard")])
def test_each_review_decision_records_the_reviewer(project, people, decision, action):
    item, annotation = annotated_item(project, people["ann"])
    review = review_decide(
        item_id=item.pk,
        reviewer=people["rev"],
        decision=decision,
        annotation_id=annotation,
        result=valid_result("quintuplet", 1),
    )
    assert events() == [(action, "p1", "aud", "annotation.item")]
    event = AuditEvent.objects.get()
    assert (event.object_id, event.object_repr) == (str(item.pk), "aud/x1")
    started = {"started_from": annotation} if decision == "edit" else {}  # the annotation an edit started from
    assert event.details == {"review": review.pk, "annotation": annotation if decision == "accept" else None, **started}


def test_a_refused_review_records_nothing(project, people):
    item, _annotation = annotated_item(project, people["ann"])
    with pytest.raises(Exception):
        review_decide(item_id=item.pk, reviewer=people["rev"], decision="accept", annotation_id=None)
    assert events() == []


def test_freeze_records_the_researcher_and_a_refused_freeze_nothing(project, people):
    with pytest.raises(ReleaseRefused):
        release_freeze(project=project, version="v1", user=people["res"])
    assert events() == []
    Item.objects.create(project=project, external_id="v", payload=status_payload(2), status=ItemStatus.VERIFIED)
    release = release_freeze(project=project, version="v1", user=people["res"])
    assert events() == [("freeze", "p2", "aud", "annotation.release")]
    assert AuditEvent.objects.get().details == {"split": "test", "items": 1, "checksum": release.checksum}


def test_an_event_rolls_back_with_its_change(project, people):
    from django.db import transaction

    with pytest.raises(RuntimeError):
        with transaction.atomic():
            audit_record(action="freeze", actor=people["res"], project=project, object_type="release")
            raise RuntimeError("the change failed")
    assert events() == []
    with pytest.raises(ValueError):
        audit_record(action="delete-everything", project=project)


def test_job_launch_cancel_and_retry_record_their_actors(project, people):
    release = make_release(project, {"r1": status_payload(1)}, version="r1")
    endpoint = inference.endpoint_create(name="Random", backend="random", options={"seed": 0})
    job = inference.job_create(
        endpoint=endpoint, project=project, release=release, created_by=people["res"], start=False
    )
    assert inference.job_cancel(job=job, actor=people["adm"]) is True
    assert inference.job_cancel(job=job, actor=people["adm"]) is False  # already ended: nothing done, nothing recorded
    inference.job_retry_failed(job=job, actor=people["res"])
    assert events() == [
        ("launch", "p2", "aud", "inference.inferencejob"),
        ("cancel", "p3", "aud", "inference.inferencejob"),
        ("retry", "p2", "aud", "inference.inferencejob"),
    ]
    assert {e.object_id for e in AuditEvent.objects.all()} == {str(job.pk)}


def test_prediction_import_records_the_importer(project, people):
    release = make_release(project, {"r1": status_payload(1)}, version="r1")
    line = json.dumps({"item": "r1", "query": "sci2", "answer": "A"})
    job = inference.predictions_import(
        project=project, lines=[line], model_name="oracle", release=release, actor=people["res"]
    )
    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.object_id) == ("import", people["res"], str(job.pk))
    assert event.details["kind"] == "predictions" and event.details["model"] == "oracle"


# --- through the API: the request's user is the actor ----------------------------------------------------------------


def test_api_import_records_the_uploader(eager, project, people, settings, django_capture_on_commit_callbacks):
    root = settings.MEDIA_ROOT / "incoming"
    path = write_sample_dataset(root, "status", 2)
    upload = SimpleUploadedFile("items.jsonl", path.read_bytes())
    with django_capture_on_commit_callbacks(execute=True):  # the run is sent once its row commits
        r = api(people["res"]).post("/api/projects/aud/imports/", {"file": upload}, format="multipart")
    assert r.status_code in (201, 202), r.content
    event = AuditEvent.objects.get()
    assert (event.action, event.actor, event.details["run"], event.details["created"]) == (
        "import",
        people["res"],
        r.json()["id"],
        2,
    )


def test_api_review_freeze_export_cancel_record_the_caller(project, people):
    item, annotation = annotated_item(project, people["ann"])
    r = api(people["rev"]).post(
        f"/api/items/{item.pk}/review/", {"decision": "accept", "annotation": annotation}, format="json"
    )
    assert r.status_code == 201
    r = api(people["res"]).post("/api/projects/aud/releases/", {"version": "v1"}, format="json")
    assert r.status_code == 201
    r = api(people["adm"]).get("/api/projects/aud/releases/v1/export/?fmt=jsonl")
    assert r.status_code == 200
    b"".join(r.streaming_content)
    endpoint = inference.endpoint_create(name="Random", backend="random", options={})
    job = inference.job_create(endpoint=endpoint, project=project, created_by=people["res"], start=False)
    assert api(people["res"]).post(f"/api/jobs/{job.pk}/cancel/").status_code == 200
    InferenceJob.objects.filter(pk=job.pk).update(status=JobStatus.FAILED)
    assert api(people["adm"]).post(f"/api/jobs/{job.pk}/retry-failed/").status_code == 200
    assert [(a, who) for a, who, _p, _t in events()] == [
        ("verify", "p1"),
        ("freeze", "p2"),
        ("export", "p3"),
        ("launch", "p2"),
        ("cancel", "p2"),
        ("retry", "p3"),
    ]
    assert AuditEvent.objects.get(action="export").details == {"format": "jsonl"}


def test_page_download_records_the_export(project, people):
    make_release(project, {"r1": status_payload(1)}, version="v1")
    client = Client()
    client.force_login(people["res"])
    assert client.get("/projects/aud/releases/v1/download/?fmt=json").status_code == 200
    assert events() == [("export", "p2", "aud", "annotation.release")]


# --- reading: filters, pages, export, roles ---------------------------------------------------------------------------


@pytest.fixture
def trail(project, people, make_project):
    """Six events over three days, and one in another project."""
    now = timezone.now()
    rows = [
        ("import", "res", 3),
        ("verify", "rev", 2),
        ("discard", "rev", 2),
        ("freeze", "res", 1),
        ("export", "adm", 0),
        ("export", "res", 0),
    ]
    for action, who, days_ago in rows:
        event = audit_record(
            action=action, actor=people[who], project=project, object_type="thing", object_repr=f"{action}-{who}"
        )
        AuditEvent.objects.filter(pk=event.pk).update(at=now - timedelta(days=days_ago))
    other = make_project("other", "status", members={people["out"]: Role.RESEARCHER})
    audit_record(action="import", actor=people["out"], project=other, object_type="thing", object_repr="elsewhere")
    return now


def listed(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["object"] for row in response.json()["results"]]


def test_api_lists_newest_first_and_filters(trail, people):
    client = api(people["res"])
    assert listed(client.get("/api/projects/aud/audit/")) == [
        "export-res",
        "export-adm",
        "freeze-res",
        "discard-rev",
        "verify-rev",
        "import-res",
    ]
    assert listed(client.get("/api/projects/aud/audit/?action=export")) == ["export-res", "export-adm"]
    assert listed(client.get("/api/projects/aud/audit/?actor=p1")) == ["discard-rev", "verify-rev"]
    day = lambda n: (trail - timedelta(days=n)).date().isoformat()  # noqa: E731
    assert listed(client.get(f"/api/projects/aud/audit/?since={day(2)}&until={day(1)}")) == [
        "freeze-res",
        "discard-rev",
        "verify-rev",
    ]
    assert listed(client.get(f"/api/projects/aud/audit/?action=import&actor=p2&until={day(3)}")) == ["import-res"]
    page = client.get("/api/projects/aud/audit/?limit=2&offset=2").json()
    assert page["count"] == 6 and [r["object"] for r in page["results"]] == ["freeze-res", "discard-rev"]
    first = client.get("/api/projects/aud/audit/?limit=1").json()["results"][0]
    assert set(first) == {"id", "at", "actor", "action", "object_type", "object_id", "object", "details"}
    assert (first["actor"], first["action"]) == ("p2", "export")


@pytest.mark.parametrize(
    "query, field",
    [("action=nope", "action"), ("since=yesterday", "since"), ("since=2026-02-02&until=2026-02-01", "until")],
)
def test_api_refuses_bad_filters_with_400_naming_them(trail, people, query, field):
    r = api(people["res"]).get(f"/api/projects/aud/audit/?{query}")
    assert r.status_code == 400
    assert list(r.json()["errors"]) == [field]


def test_export_csv_and_jsonl_follow_the_filters(trail, people):
    client = api(people["adm"])
    r = client.get("/api/projects/aud/audit/export/?fmt=csv&action=export")
    assert r.status_code == 200
    assert r["Content-Disposition"] == 'attachment; filename="audit-aud.csv"'
    rows = list(csv.reader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert rows[0] == ["at", "actor", "action", "object_type", "object_id", "object", "details"]
    assert [(row[1], row[2], row[5]) for row in rows[1:]] == [
        ("p2", "export", "export-res"),
        ("p3", "export", "export-adm"),
    ]
    r = client.get("/api/projects/aud/audit/export/?fmt=jsonl&actor=p1")
    assert r["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in b"".join(r.streaming_content).decode().splitlines()]
    assert [(x["actor"], x["action"]) for x in lines] == [("p1", "discard"), ("p1", "verify")]
    assert client.get("/api/projects/aud/audit/export/?fmt=xlsx").status_code == 400


def test_csv_export_defuses_spreadsheet_formulas(project, people):
    audit_record(
        action="import",
        actor=people["res"],
        project=project,
        object_type="items import",
        object_repr='=HYPERLINK("http://x")',
    )
    r = api(people["res"]).get("/api/projects/aud/audit/export/")
    rows = list(csv.reader(io.StringIO(b"".join(r.streaming_content).decode())))
    assert rows[1][5] == '\'=HYPERLINK("http://x")'


@pytest.mark.parametrize("who, status", [("ann", 403), ("rev", 403), ("res", 200), ("adm", 200), ("out", 404)])
def test_only_researchers_and_admins_read_the_trail(trail, people, who, status):
    client = api(people[who])
    before = AuditEvent.objects.count()
    for url in ("/api/projects/aud/audit/", "/api/projects/aud/audit/export/?fmt=jsonl", "/projects/aud/audit/"):
        assert client.get(url).status_code == status, url
    assert AuditEvent.objects.count() == before  # reading the trail writes nothing


def test_superuser_reads_and_anonymous_is_sent_to_login(trail, make_user):
    root = make_user("root", superuser=True)
    assert listed(api(root).get("/api/projects/aud/audit/?action=freeze")) == ["freeze-res"]
    assert Client().get("/projects/aud/audit/").status_code == 302
    assert APIClient().get("/api/projects/aud/audit/").status_code in (401, 403)


def test_page_filters_pages_and_links_exports(trail, people, project):
    client = Client()
    client.force_login(people["res"])
    page = client.get("/projects/aud/audit/?action=export").content.decode()
    assert page.count('data-action="export"') == 2 and 'data-action="freeze"' not in page
    assert "/api/projects/aud/audit/export/?action=export&amp;fmt=csv" in page
    for i in range(60):
        audit_record(action="verify", actor=people["rev"], project=project, object_type="thing", object_repr=f"v{i}")
    first = client.get("/projects/aud/audit/?actor=p1").content.decode()
    assert first.count("<tr data-event=") == 50 and "page 1 of 2" in first and "?actor=p1&amp;page=2" in first
    second = client.get("/projects/aud/audit/?actor=p1&page=2").content.decode()
    assert second.count("<tr data-event=") == 12
    release_freeze_page = audit_record(
        action="freeze",
        actor=people["res"],
        project=project,
        object_type="r",
        details={"items": 3, "split": "test", "none": None},
    )
    assert (
        f'<tr data-event="{release_freeze_page.pk}"'
        in client.get("/projects/aud/audit/?action=freeze").content.decode()
    )
    assert "<code>items=3 split=test</code>" in client.get("/projects/aud/audit/?action=freeze").content.decode()
    bad = client.get("/projects/aud/audit/?since=yesterday")
    assert bad.status_code == 400 and "is not a date" in bad.content.decode()
    overview = client.get("/projects/aud/").content.decode()
    assert 'href="/projects/aud/audit/" id="audit-link"' in overview
    client.force_login(people["rev"])
    assert 'id="audit-link"' not in client.get("/projects/aud/").content.decode()
