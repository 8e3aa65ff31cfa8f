"""What a small import no longer pays (bench/README.md, "Small imports, second pass"): the statements of a one-file
request (no savepoint of its own, no question whether the project is empty before the one
comparison with its items), no folder made and removed per uploaded file; and the per-line fast
paths give what the paths they shortcut give (ChangeIt's pixel boxes, the JSON of a row).
"""

from __future__ import annotations

import io
import json
import os
import random
import socket
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.importing.copy_spool import json_container, json_encode
from annotation.importing.media_cache import media_cache_clear
from annotation.importing.runs import import_media_root
from annotation.importing.samples import sample_line, sample_media_paths, write_sample_media
from annotation.models import ImportRun, Item, Role
from protocols.changeit.boxes import box_in_pixels, payload_box_in_pixels
from protocols.fields import Invalid

URL = "/api/projects/{}/imports/"


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


@pytest.fixture
def api(make_user, make_project):
    media_cache_clear()
    write_sample_media(import_media_root(), "changeit")
    res = make_user("res")
    make_project("cit", "changeit", members={res: Role.RESEARCHER})
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=res)[0].key}")
    return client


def _statements(queries) -> list[str]:
    return [q["sql"].split()[0].upper() for q in queries]


@pytest.mark.django_db(transaction=True)  # the request's transaction is the outermost one
def test_a_one_file_request_takes_no_savepoint_and_one_look_at_the_projects_items(api, settings):
    assert (
        api.post(URL.format("cit"), {"files": [upload(jsonl(0, 50), "a.jsonl")]}, format="multipart").status_code == 201
    )
    with CaptureQueriesContext(connection) as first:
        r = api.post(URL.format("cit"), {"files": [upload(jsonl(50, 1000), "b.jsonl")]}, format="multipart")
    assert r.status_code == 201, r.content
    assert r.json()["created"] == 1000
    kinds = _statements(first.captured_queries)
    assert "SAVEPOINT" not in kinds and "RELEASE" not in kinds, kinds
    item_reads = [q["sql"] for q in first.captured_queries if 'FROM "annotation_item"' in q["sql"]]
    assert len(item_reads) == 1 and "unnest(" in item_reads[0], item_reads  # the comparison, no exists() first
    assert Item.objects.filter(project__slug="cit").count() == 1050
    # The same file again: every line is unchanged, nothing is written.
    again = api.post(URL.format("cit"), {"files": [upload(jsonl(50, 1000), "b.jsonl")]}, format="multipart")
    assert again.status_code == 201 and again.json()["created"] == 0
    assert again.json()["runs"][0]["report"]["unchanged"] == 1000
    # Uploads are written one at a time into this thread's folder and deleted after their import.
    folder = Path(settings.CACHE_ROOT) / "request-uploads"
    assert folder.is_dir() and not [p for p in folder.rglob("*") if p.is_file()]
    # One folder per host, process and thread (containers sharing the volume repeat process ids),
    # readable by this user only.
    (mine,) = folder.iterdir()
    assert mine.name.startswith(f"{socket.gethostname()}-{os.getpid()}-")
    assert mine.stat().st_mode & 0o777 == 0o700


def test_a_refused_single_file_leaves_nothing_and_a_later_request_imports(api):
    runs_before = ImportRun.objects.count()
    body = jsonl(0, 20) + b'{"id": "bad", "image": "img/c0.png"}\n'
    r = api.post(URL.format("cit"), {"files": [upload(body, "bad.jsonl")]}, format="multipart")
    assert r.status_code == 400, r.content
    errors = r.json()["files"][0]["errors"]
    assert errors == ["line 21: field object: required", "line 21: field state: required"]
    assert (Item.objects.count(), ImportRun.objects.count()) == (0, runs_before)
    ok = api.post(URL.format("cit"), {"files": [upload(jsonl(0, 20), "good.jsonl")]}, format="multipart")
    assert ok.status_code == 201 and ok.json()["created"] == 20


def test_several_files_still_report_every_refused_one(api):
    files = [
        upload(jsonl(0, 5, object=""), "a.jsonl"),
        upload(jsonl(5, 5), "b.jsonl"),
        upload(jsonl(10, 5, bbox=[0.1, 0.1, 0.2, 0.2]), "c.jsonl"),
    ]
    r = api.post(URL.format("cit"), {"files": files}, format="multipart")
    assert r.status_code == 400, r.content
    refused = {f["file_name"]: f["error_count"] for f in r.json()["files"]}
    assert refused == {"a.jsonl": 5, "c.jsonl": 5}
    assert Item.objects.count() == 0


def _box_by_the_long_path(payload: dict, width, height) -> tuple[dict, str | None]:
    payload = dict(payload)
    units = payload.pop("box_units", "pixels")
    box = payload.get("bbox")
    if not isinstance(box, list) or width is None or height is None:
        return payload, ("unknown" if units == "normalised" and isinstance(box, list) else None)
    try:
        payload["bbox"] = box_in_pixels(box, width, height, units)
    except Invalid as exc:
        return payload, exc.reason
    return payload, None


def test_the_pixel_box_fast_path_gives_what_box_in_pixels_gives():
    rng = random.Random(23)
    values = [0, 1, 0.5, 0.999, 1.0, 2, 10, 40.25, 159.5, -0.0]
    sizes = [(160, 120), (4, 4), (3, 5), (5, 3), (1, 1), (4, 200)]
    for _ in range(3000):
        box = [rng.choice(values) for _ in range(4)]
        width, height = rng.choice(sizes)
        payload = {"image": "a.png", "bbox": box}
        if rng.random() < 0.3:
            payload["box_units"] = rng.choice(["pixels", "normalised"])
        expected, reason = _box_by_the_long_path(payload, width, height)
        got = dict(payload)
        got_reason = payload_box_in_pixels(got, width, height)
        if reason == "unknown":
            continue
        assert (got, got_reason) == (expected, reason), (payload, width, height)
        if got_reason is None:
            assert got["bbox"] is not box  # a copy, as box_in_pixels returns


def test_the_row_json_encoder_writes_what_json_dumps_writes():
    values = [
        {"a": 1.5, "b": [1, 2.0, 1e300, float("inf"), float("-inf")], "c": 'é\u2028"\\\x01\t\n', "d": None},
        {"e": True, "f": False, 3: "int key", 2.5: "float key", None: "null key", True: "bool key"},
        ["x", "y"],
        {},
        [],
        {"n": {"m": [{"k": -0.0, "big": 10**30, "tiny": 5e-324}]}},
        sample_line("changeit", 7, media=sample_media_paths("changeit", 7)),
    ]
    for value in values:
        assert json_container(value) == json_encode(value) == json.dumps(value)
