"""Many small item files in one API request, all or nothing (annotation/importing/batch.py), and
the fixed cost of an import run: a small file is one transaction on the importing connection (no
writer thread, no second connection), and a media file an earlier import inspected is not
looked up again (annotation/importing/media_cache.py).
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.importing import copy_spool, items, items_import
from annotation.importing.media_cache import media_cache_clear
from annotation.importing.runs import import_media_root
from annotation.importing.samples import sample_line, sample_media_paths, write_sample_media
from annotation.models import AuditAction, AuditEvent, ImportRun, Item, MediaAsset, Role

URL = "/api/projects/{}/imports/"


def api_as(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def jsonl(start: int, n: int, **changes) -> bytes:
    lines = []
    for i in range(start, start + n):
        line = sample_line("changeit", i, media=sample_media_paths("changeit", i))
        line.update(changes)
        lines.append(json.dumps(line))
    return ("\n".join(lines) + "\n").encode()


def upload(body: bytes, name: str) -> io.BytesIO:
    f = io.BytesIO(body)
    f.name = name
    return f


def state() -> tuple:
    return (
        Item.objects.count(),
        ImportRun.objects.count(),
        MediaAsset.objects.count(),
        AuditEvent.objects.filter(action=AuditAction.IMPORT).count(),
    )


def stored_files(media_root: Path) -> set[Path]:
    """Files stored under MEDIA_ROOT, the import folder (where uploads' media come from) left out."""
    incoming = import_media_root()
    return {p for p in media_root.rglob("*") if p.is_file() and not p.is_relative_to(incoming)}


@pytest.fixture
def world(make_user, make_project):
    media_cache_clear()
    write_sample_media(import_media_root(), "changeit")
    res, ann = make_user("res"), make_user("ann")
    project = make_project("cit", "changeit", members={res: Role.RESEARCHER, ann: Role.ANNOTATOR})
    return {"res": res, "ann": ann, "project": project}


def test_several_files_in_one_request_each_get_a_finished_run(world):
    api = api_as(world["res"])
    files = [upload(jsonl(0, 30), "a.jsonl"), upload(jsonl(30, 20), "b.jsonl"), upload(jsonl(50, 10), "c.jsonl")]
    r = api.post(URL.format("cit"), {"files": files}, format="multipart")
    assert r.status_code == 201, r.content
    body = r.json()
    assert (body["all_or_nothing"], body["files"], body["created"]) == (True, 3, 60)
    runs = body["runs"]
    assert [(x["file_name"], x["status"], x["done"], x["report"]["created"]) for x in runs] == [
        ("a.jsonl", "finished", True, 30),
        ("b.jsonl", "finished", True, 20),
        ("c.jsonl", "finished", True, 10),
    ]
    assert all(x["created_by"] == "res" and x["progress"] == 1 for x in runs)
    assert Item.objects.filter(project=world["project"]).count() == 60
    # Each file is a run of its own, listed and fetched like a queued one, and audited as its import.
    listed = api.get(URL.format("cit")).json()
    assert sorted(x["id"] for x in listed) == sorted(x["id"] for x in runs)
    assert api.get(runs[1]["url"]).json()["report"]["created"] == 20
    audited = AuditEvent.objects.filter(action=AuditAction.IMPORT).order_by("pk")
    assert [(e.object_repr, e.details["run"], e.details["created"]) for e in audited] == [
        ("a.jsonl", runs[0]["id"], 30),
        ("b.jsonl", runs[1]["id"], 20),
        ("c.jsonl", runs[2]["id"], 10),
    ]


def test_several_file_parts_are_a_batch_and_a_later_file_sees_the_earlier_ones(world):
    api = api_as(world["res"])
    r = api.post(
        URL.format("cit"),
        {"file": [upload(jsonl(0, 5), "one.jsonl"), upload(jsonl(0, 8), "two.jsonl")], "verified": "true"},
        format="multipart",
    )
    assert r.status_code == 201, r.content
    reports = [x["report"] for x in r.json()["runs"]]
    # The second file repeats the first's five lines: unchanged (already verified), three created.
    assert [(x["created"], x["unchanged"], x["by_status"]) for x in reports] == [
        (5, 0, {"verified": 5}),
        (3, 5, {"verified": 3}),
    ]
    assert all(x["verified"] for x in r.json()["runs"])
    assert Item.objects.filter(project=world["project"], status="verified").count() == 8


@pytest.mark.django_db(transaction=True)  # the request's own transaction, committed or rolled back for real
def test_one_bad_file_refuses_the_request_naming_it_and_nothing_is_written(world, settings):
    api = api_as(world["res"])
    api.post(URL.format("cit"), {"files": [upload(jsonl(0, 3), "first.jsonl")]}, format="multipart")
    before, files_before = state(), stored_files(Path(settings.MEDIA_ROOT))
    assert MediaAsset.objects.count() == 3  # c0-c2; c3 is new to the request below (stored, then deleted again)
    bad_line = {**json.loads(jsonl(200, 1)), "image": "nowhere/b.png"}
    files = [
        upload(jsonl(10, 50), "good.jsonl"),
        upload(jsonl(103, 1), "new-media.jsonl"),
        upload(jsonl(300, 2) + (json.dumps(bad_line) + "\n").encode(), "bad.jsonl"),
        upload(jsonl(400, 5), "also-good.jsonl"),
    ]
    r = api.post(URL.format("cit"), {"files": files}, format="multipart")
    assert r.status_code == 400, r.content
    body = r.json()
    assert body["all_or_nothing"] is True
    assert "bad.jsonl" in body["detail"] and "nothing from this request was written" in body["detail"]
    assert body["files"] == [
        {
            "index": 2,
            "file_name": "bad.jsonl",
            "error_count": 1,
            "errors": ["line 3: field image: nowhere/b.png: file not found under the media root"],
            "read_as": None,
        }
    ]
    assert state() == before
    assert stored_files(Path(settings.MEDIA_ROOT)) == files_before


def test_every_refused_file_is_named(world):
    api = api_as(world["res"])
    before = state()
    changed = jsonl(0, 2, split="train")
    r = api.post(
        URL.format("cit"),
        {
            "files": [
                upload(b"{not json\n", "broken.jsonl"),
                upload(jsonl(0, 2), "ok.jsonl"),
                upload(changed, "same-ids.jsonl"),
            ]
        },
        format="multipart",
    )
    assert r.status_code == 400, r.content
    refused = {f["file_name"]: f for f in r.json()["files"]}
    assert set(refused) == {"broken.jsonl", "same-ids.jsonl"}
    assert refused["broken.jsonl"]["errors"][0].startswith("line 1: field -: invalid JSON")
    # The same ids as the file before it, with other content: refused against the earlier file's items.
    assert refused["same-ids.jsonl"]["errors"] == [
        "line 1: field id: item 'changeit-00000' already exists in the project with different content (split)"
        "; import with update (import_items --update) to replace the content of existing items",
        "line 2: field id: item 'changeit-00001' already exists in the project with different content (split)"
        "; import with update (import_items --update) to replace the content of existing items",
    ]
    assert state() == before


def test_limits_and_mixed_fields_are_refused_before_anything_is_read(world, settings):
    api = api_as(world["res"])
    before = state()
    settings.IMPORT_BATCH_MAX_BYTES = 1000
    r = api.post(URL.format("cit"), {"files": [upload(jsonl(0, 10), "a.jsonl")]}, format="multipart")
    assert r.status_code == 413
    assert "at most 1000 bytes" in r.json()["files"][0] and "`file`" in r.json()["files"][0]
    settings.IMPORT_BATCH_MAX_BYTES = 10**7
    settings.IMPORT_BATCH_MAX_FILES = 2
    r = api.post(
        URL.format("cit"), {"files": [upload(jsonl(i, 1), f"{i}.jsonl") for i in range(3)]}, format="multipart"
    )
    assert r.status_code == 400 and r.json() == {"files": ["the request holds 3 files; one request imports at most 2"]}
    r = api.post(
        URL.format("cit"),
        {"files": [upload(jsonl(0, 1), "a.jsonl")], "file": upload(jsonl(1, 1), "b.jsonl")},
        format="multipart",
    )
    assert r.status_code == 400 and "not in both" in r.json()["files"][0]
    r = api.post(
        URL.format("cit"), {"files": [upload(jsonl(0, 1), "a.jsonl")], "format": "nonesuch"}, format="multipart"
    )
    assert r.status_code == 400 and "nonesuch" in r.json()["format"][0]
    assert state() == before


def test_a_batch_is_for_researchers_only(world):
    before = state()
    r = api_as(world["ann"]).post(
        URL.format("cit"),
        {"files": [upload(jsonl(0, 2), "a.jsonl"), upload(jsonl(2, 2), "b.jsonl")]},
        format="multipart",
    )
    assert r.status_code == 403
    assert state() == before


@pytest.mark.django_db(transaction=True)  # outside a transaction, as the command and a queued run import
def test_a_small_file_is_written_on_the_importing_connection_and_a_large_one_streams(world, tmp_path, monkeypatch):
    started = []
    real = copy_spool.LiveCopy.start

    def start(self):
        started.append(self)
        real(self)

    monkeypatch.setattr(copy_spool.LiveCopy, "start", start)
    small = tmp_path / "small.jsonl"
    small.write_bytes(jsonl(0, 1000))
    report = items_import(project=world["project"], path=small, media_root=import_media_root())
    assert report.created == 1000 and started == []  # no writer thread, no second connection
    monkeypatch.setattr(items, "LIVE_COPY_MIN_BYTES", small.stat().st_size)
    large = tmp_path / "large.jsonl"
    large.write_bytes(jsonl(1000, 1000))
    report = items_import(project=world["project"], path=large, media_root=import_media_root())
    assert report.created == 1000 and len(started) == 1
    assert Item.objects.filter(project=world["project"]).count() == 2000


def test_media_seen_by_an_earlier_import_are_not_looked_up_again_unless_changed(world, tmp_path, monkeypatch):
    calls = []
    real_known = items.known_media

    def known(path, kind, **kw):
        calls.append(Path(path).name)
        return real_known(path, kind, **kw)

    monkeypatch.setattr(items, "known_media", known)
    for n, start in enumerate((0, 10, 20)):
        path = tmp_path / f"{n}.jsonl"
        path.write_bytes(jsonl(start, 10))
        items_import(project=world["project"], path=path, media_root=import_media_root())
        if n == 0:
            first = sorted(calls)
            assert first == ["c0.png", "c1.png", "c2.png", "c3.png"]  # each file looked up once
            calls.clear()
        elif n == 1:
            assert calls == []  # the same files: known from the first import
            # A file rewritten (other bytes, same name) is a new file: looked up and inspected again.
            target = import_media_root() / sample_media_paths("changeit", 0)["image"]
            other = import_media_root() / sample_media_paths("changeit", 1)["image"]
            target.write_bytes(other.read_bytes())
    assert calls == ["c0.png"]
    # What was found in the rewritten file is what it now holds: the other image's content.
    assert Item.objects.get(external_id="changeit-00020").media == Item.objects.get(external_id="changeit-00001").media


@pytest.mark.django_db(transaction=True)  # another connection holds the project's import lock
def test_a_small_import_checks_its_file_before_its_turn_and_writes_once_the_lock_is_free(world, tmp_path):
    import threading

    from django.db import connections

    from annotation.importing.copy_spool import IMPORT_LOCK_CLASS

    project = world["project"]
    path = tmp_path / "small.jsonl"
    path.write_bytes(jsonl(0, 200))
    checked = []
    real_check = items.check_item

    def counting(*args, **kwargs):
        checked.append(1)
        return real_check(*args, **kwargs)

    result: dict = {}

    def body():
        try:
            result["report"] = items_import(project=project, path=path, media_root=import_media_root())
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            result["error"] = exc
        finally:
            connections.close_all()

    holder = connections.create_connection("default")
    try:
        holder.set_autocommit(False)
        with holder.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", [IMPORT_LOCK_CLASS, project.pk])
        items.check_item = counting
        try:
            worker = threading.Thread(target=body)
            worker.start()
            # Every line is checked while the other import still has its turn; nothing is written.
            deadline = time.monotonic() + 60
            while len(checked) < 200 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(checked) == 200 and worker.is_alive()
            assert not Item.objects.filter(project=project).exists()
        finally:
            items.check_item = real_check
        holder.rollback()  # the other import ends: this one goes on at once
        worker.join(timeout=60)
    finally:
        holder.close()
    assert "error" not in result, result.get("error")
    assert result["report"].created == 200
    assert Item.objects.filter(project=project).count() == 200
