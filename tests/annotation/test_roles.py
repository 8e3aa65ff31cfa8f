"""Role checks on the import, release and export endpoints and pages (API and pages).

Non-members get 404 (the project is not revealed), members below researcher get 403, and a
refused request changes nothing.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.conf import settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.importing import items_import
from annotation.importing.samples import write_sample_dataset
from annotation.models import ImportRun, Item, MediaAsset, Release, Role
from annotation.releases import release_freeze

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # Four users per test: the default PBKDF2 hashing would dominate the run time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def world(make_user, make_project, tmp_path):
    people = {name: make_user(name) for name in ("ann", "rev", "res", "outsider")}
    mine = make_project(
        "mine",
        "status",
        members={people["ann"]: Role.ANNOTATOR, people["rev"]: Role.REVIEWER, people["res"]: Role.RESEARCHER},
    )
    other = make_project("other", "status", members={people["outsider"]: Role.RESEARCHER})
    data = tmp_path / "data"
    path = write_sample_dataset(data, "status", 3)
    items_import(project=mine, path=path, verified=True)
    release_freeze(project=mine, version="v1")
    archive = tmp_path / "items.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("items.jsonl", path.read_text().replace("status-0", "new-0"))
        for p in (data / "img").iterdir():
            zf.write(p, f"img/{p.name}")
    return {"people": people, "mine": mine, "other": other, "zip": archive.read_bytes()}


def api_as(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def upload(data: bytes, name="items.zip"):
    f = io.BytesIO(data)
    f.name = name
    return f


def state():
    return (Item.objects.count(), MediaAsset.objects.count(), Release.objects.count(), ImportRun.objects.count())


@pytest.mark.parametrize("who,expected", [("ann", 403), ("rev", 403), ("outsider", 404)])
def test_api_researcher_endpoints_refuse_lower_roles_and_outsiders(world, who, expected):
    client = api_as(world["people"][who])
    before = state()
    assert (
        client.post("/api/projects/mine/imports/", {"file": upload(world["zip"])}, format="multipart").status_code
        == expected
    )
    assert (
        client.post(
            "/api/projects/mine/annotation-imports/", {"file": upload(b"{}", "a.jsonl")}, format="multipart"
        ).status_code
        == expected
    )
    assert client.post("/api/projects/mine/releases/", {"version": "v2"}, format="json").status_code == expected
    assert client.get("/api/projects/mine/releases/").status_code == expected
    assert client.get("/api/projects/mine/releases/v1/export/").status_code == expected
    assert client.get("/api/projects/mine/imports/").status_code == expected
    assert state() == before


@pytest.mark.django_db(transaction=True)  # the import is sent when its run is committed
@pytest.mark.parametrize("who,expected", [("ann", 403), ("rev", 403), ("outsider", 404)])
def test_import_runs_are_shown_to_the_projects_researchers_only(world, client, eager, who, expected):
    res = api_as(world["people"]["res"])
    run = res.post("/api/projects/mine/imports/", {"file": upload(world["zip"])}, format="multipart").json()
    assert api_as(world["people"][who]).get(run["url"]).status_code == expected
    client.force_login(world["people"][who])
    assert client.get(run["page"]).status_code == expected
    assert res.get(run["url"]).status_code == 200
    # A run is reached through its own project only: a researcher of another project gets 404.
    client.force_login(world["people"]["res"])
    assert client.get(run["page"]).status_code == 200
    client.force_login(world["people"]["outsider"])  # researcher of "other"
    assert client.get(run["page"].replace("/mine/", "/other/")).status_code == 404


@pytest.mark.parametrize("who,expected", [("ann", 403), ("rev", 403), ("outsider", 404)])
def test_pages_researcher_views_refuse_lower_roles_and_outsiders(world, client, who, expected):
    client.force_login(world["people"][who])
    before = state()
    assert client.get("/projects/mine/import/").status_code == expected
    assert (
        client.post("/projects/mine/import/", {"file": upload(world["zip"]), "kind": "items"}).status_code == expected
    )
    assert client.get("/projects/mine/releases/").status_code == expected
    assert client.post("/projects/mine/releases/", {"version": "v2", "split": "test"}).status_code == expected
    assert client.get("/projects/mine/releases/v1/download/").status_code == expected
    assert state() == before


def test_annotator_sees_own_project_overview_but_not_others(world, client):
    client.force_login(world["people"]["ann"])
    page = client.get("/projects/mine/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'href="/projects/mine/annotate/"' in html
    # No link to a page the role cannot open (leaderboard: researchers; review: reviewers).
    assert "/projects/mine/leaderboard/" not in html and "/projects/mine/review/" not in html
    assert "/projects/mine/import/" not in html and "/projects/mine/releases/" not in html
    assert client.get("/projects/other/").status_code == 404
    api = api_as(world["people"]["ann"])
    overview = api.get("/api/projects/mine/overview/").json()
    assert overview["status_counts"] == {"pending": 0, "annotated": 0, "verified": 3, "discarded": 0}
    assert overview["role"] == "annotator" and set(overview["links"]) == {"annotate"}
    assert api.get("/api/projects/other/overview/").status_code == 404


def test_anonymous_is_sent_to_login_or_refused(world, client):
    assert client.get("/projects/mine/import/").status_code == 302
    assert APIClient().get("/api/projects/mine/releases/").status_code in (401, 403)


def queued_run(api, response) -> dict:
    """A 202 from an import endpoint, followed to its run (Celery is eager in these tests)."""
    assert response.status_code == 202, response.content
    assert response["Location"] == response.json()["url"]
    run = api.get(response["Location"])
    assert run.status_code == 200
    return run.json()


@pytest.mark.django_db(transaction=True)  # the import is sent when its run is committed
def test_researcher_imports_freezes_and_exports_through_the_api(world, eager):
    api = api_as(world["people"]["res"])
    r = api.post("/api/projects/mine/imports/", {"file": upload(world["zip"])}, format="multipart")
    run = queued_run(api, r)
    assert (run["status"], run["done"], run["file_name"], run["created_by"]) == ("finished", True, "items.zip", "res")
    assert run["report"] == {
        "lines": 3,
        "created": 3,
        "unchanged": 0,
        "promoted": 0,
        "media_files": 6,
        "media_stored": 0,
        "by_status": {"annotated": 3},
        "format": "statelab",
        "format_label": "StateLab item lines (JSONL, a JSON document or array, or a zip with items.jsonl)",
        "notes": [],
        "kept_fields": [],
        "kept": "",
    }
    again = queued_run(api, api.post("/api/projects/mine/imports/", {"file": upload(world["zip"])}, format="multipart"))
    assert again["status"] == "finished" and again["report"]["unchanged"] == 3

    bad = queued_run(
        api,
        api.post(
            "/api/projects/mine/imports/",
            {"file": upload(b'{"id": "x", "image_a": "../a.png", "image_b": "b.png"}\n', "x.jsonl")},
            format="multipart",
        ),
    )
    assert (bad["status"], bad["error_count"], bad["report"]) == ("refused", 2, None)
    assert bad["errors"] == [
        "line 1: field image_a: ../a.png: path leaves the media root ('..')",
        "line 1: field image_b: b.png: file not found under the media root",
    ]
    assert Item.objects.filter(project=world["mine"]).count() == 6
    listed = api.get("/api/projects/mine/imports/").json()
    assert [(x["id"], x["status"]) for x in listed] == [
        (bad["id"], "refused"),
        (again["id"], "finished"),
        (run["id"], "finished"),
    ]
    assert not any((Path(settings.CACHE_ROOT) / "uploads").iterdir())  # staged files are gone

    Item.objects.filter(external_id__startswith="new-").update(status="verified")
    frozen = api.post("/api/projects/mine/releases/", {"version": "v2", "split": "test"}, format="json")
    assert frozen.status_code == 201 and frozen.json()["item_count"] == 6
    dup = api.post("/api/projects/mine/releases/", {"version": "v2"}, format="json")
    assert dup.status_code == 400 and "exists already" in dup.json()["detail"]
    assert [r["version"] for r in api.get("/api/projects/mine/releases/").json()] == ["v2", "v1"]

    export = api.get("/api/projects/mine/releases/v2/export/")
    assert export.status_code == 200 and export.streaming
    doc = json.loads(b"".join(export.streaming_content))
    assert doc["item_count"] == 6 and doc["checksum"] == frozen.json()["checksum"]
    jsonl = api.get("/api/projects/mine/releases/v2/export/?fmt=jsonl")
    assert jsonl["Content-Type"] == "application/x-ndjson"
    assert len(b"".join(jsonl.streaming_content).splitlines()) == 7
    zipped = api.get("/api/projects/mine/releases/v2/export/?fmt=zip")
    assert zipped["Content-Disposition"] == 'attachment; filename="mine-v2.zip"'
    assert "items.jsonl" in zipfile.ZipFile(io.BytesIO(b"".join(zipped.streaming_content))).namelist()


@pytest.mark.django_db(transaction=True)  # the import is sent when its run is committed
def test_researcher_pages_import_freeze_and_download(world, client, eager):
    client.force_login(world["people"]["res"])
    assert b'id="import-form"' in client.get("/projects/mine/import/").content
    bad = client.post(
        "/projects/mine/import/", {"file": upload(b"not json\n", "x.jsonl"), "kind": "items"}, follow=True
    )
    assert bad.status_code == 200 and bad.redirect_chain[0][0].startswith("/projects/mine/imports/")
    assert 'data-status="refused"' in bad.content.decode()
    assert "line 1: field -: invalid JSON (Expecting value at column 1)" in bad.content.decode()
    ok = client.post(
        "/projects/mine/import/", {"file": upload(world["zip"]), "kind": "items", "verified": "on"}, follow=True
    )
    assert ok.status_code == 200 and '<strong id="created">3</strong>' in ok.content.decode()
    assert '<meta http-equiv="refresh"' not in ok.content.decode()  # done: the page stops refreshing
    history = client.get("/projects/mine/import/").content.decode()
    assert (
        history.count("data-run=") == 2 and 'data-status="refused"' in history and "3 created, 0 unchanged" in history
    )
    assert client.post("/projects/mine/import/", {"kind": "items"}).status_code == 400  # no file

    page = client.post("/projects/mine/releases/", {"version": "v2", "split": "test"}, follow=True)
    assert page.status_code == 200
    assert 'data-version="v2"' in page.content.decode() and "Release v2 frozen: 6 items" in page.content.decode()
    assert client.post("/projects/mine/releases/", {"version": "v2", "split": "test"}).status_code == 400
    download = client.get("/projects/mine/releases/v2/download/?fmt=jsonl")
    assert download.status_code == 200
    assert json.loads(b"".join(download.streaming_content).splitlines()[0])["release"]["item_count"] == 6


@pytest.mark.django_db(transaction=True)  # the import is sent when its run is committed
def test_import_page_reports_items_promoted_by_a_verified_reimport(world, client, eager):
    client.force_login(world["people"]["res"])
    first = client.post("/projects/mine/import/", {"file": upload(world["zip"]), "kind": "items"}, follow=True)
    assert first.status_code == 200 and 'id="promoted"' not in first.content.decode()
    assert Item.objects.filter(project=world["mine"], external_id__startswith="new-", status="annotated").count() == 3

    again = client.post(
        "/projects/mine/import/", {"file": upload(world["zip"]), "kind": "items", "verified": "on"}, follow=True
    )
    html = again.content.decode()
    assert again.status_code == 200
    assert '<strong id="promoted">3</strong> promoted to verified' in html
    assert Item.objects.filter(project=world["mine"], external_id__startswith="new-", status="verified").count() == 3
