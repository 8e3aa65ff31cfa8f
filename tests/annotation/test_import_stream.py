"""Stream mode of a small import (annotation/importing/items.py `stream_if_free`, copy_stream.py):
rows go to a COPY while the lines are checked when the file's ids are distinct and the project's
import lock is free. It must store what the check-first path stores, report the same, leave
nothing of a refused file (even once rows were sent), and end its COPY before any query of pass 1.
"""

from __future__ import annotations

import io
import json

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.importing import copy_stream, items
from annotation.importing.media_cache import media_cache_clear
from annotation.importing.runs import import_media_root
from annotation.importing.samples import sample_line, sample_media_paths, write_sample_media
from annotation.models import AuditAction, AuditEvent, ImportRun, Item, Role

URL = "/api/projects/{}/imports/"
ITEM_FIELDS = ("external_id", "payload", "media", "status", "split", "tags", "is_gold", "annotation_count")


def line(i: int, *, distinct: int = 4, **changes) -> dict:
    out = sample_line("changeit", i, media=sample_media_paths("changeit", i, distinct=distinct))
    out.update(changes)
    return out


def body(lines: list[dict]) -> bytes:
    return ("\n".join(json.dumps(x) for x in lines) + "\n").encode()


def upload(data: bytes, name: str) -> io.BytesIO:
    f = io.BytesIO(data)
    f.name = name
    return f


def mixed(start: int, n: int, *, raw: bool = True) -> list[dict]:
    """Lines of every kind pass 1 meets: raw (unless not `raw`) and labelled, tags, splits, kept
    fields, normalised boxes, gold items, a backslash and a tab in a text."""
    out = []
    for i in range(start, start + n):
        x = line(i)
        if raw and i % 7 == 0:
            x.pop("bbox")
        if i % 11 == 0:
            x["box_units"], x["bbox"] = "normalised", [0.1, 0.2, 0.3, 0.25]
        if i % 13 == 0:
            x["split"] = "dev"
        if i % 17 == 0:
            x["source_note"] = {"from": "elsewhere", "n": i}
        if i % 19 == 0 and "bbox" in x:
            x["gold"] = True
        if i % 23 == 0:
            x["state"] = 'a "quoted"\tstate \\ with a backslash é'
        if i % 3 == 0:
            x["tags"] = ["sample", f"t{i % 4}"]
        out.append(x)
    return out


@pytest.fixture
def api(make_user, make_project):
    media_cache_clear()
    write_sample_media(import_media_root(), "changeit")
    res = make_user("res")
    for slug in ("streamed", "checked"):
        make_project(slug, "changeit", members={res: Role.RESEARCHER})
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=res)[0].key}")
    return client


@pytest.fixture
def spy(monkeypatch):
    """What the COPY streams did: (event, whether a COPY was open then)."""
    events: list[tuple[str, bool]] = []
    for name in ("pause", "abort", "end"):
        real = getattr(copy_stream.CopyStream, name)

        def wrapped(self, _real=real, _name=name):
            events.append((_name, self.open))
            return _real(self)

        monkeypatch.setattr(copy_stream.CopyStream, name, wrapped)
    return events


def post(api, slug: str, files: list[tuple[str, bytes]], **options):
    data = {"files": [upload(content, name) for name, content in files], **options}
    return api.post(URL.format(slug), data, format="multipart")


def items_of(slug: str) -> list[tuple]:
    return list(Item.objects.filter(project__slug=slug).order_by("pk").values_list(*ITEM_FIELDS))


def without_ids(report: dict) -> dict:
    skip = ("id", "project", "url", "page", "created_at", "started_at", "finished_at")
    return {k: v for k, v in report.items() if k not in skip}


@pytest.mark.django_db(transaction=True)  # the request's transaction is the outermost one
@pytest.mark.parametrize("options", [{}, {"verified": "true"}, {"update": "true"}])
def test_streamed_import_stores_and_reports_what_the_check_first_path_does(api, spy, monkeypatch, options):
    # A verified import refuses raw lines; its first file is imported unverified, so the second
    # promotes what it repeats.
    raw = not options.get("verified")
    first = body(mixed(0, 400, raw=raw))
    first_options = {} if options.get("verified") else options
    # Then: 300 lines the projects hold unchanged, 700 new ones (and, in an import that updates,
    # 100 with other content): more than one chunk of rows, so the COPY runs while lines are
    # still checked.
    again, new = mixed(0, 300, raw=raw), mixed(400, 700, raw=raw)
    changed = [line(i, state=f"another state {i}") for i in range(300, 400)] if options.get("update") else []
    second = body(again + changed + new)
    reports = {}
    for slug in ("streamed", "checked"):
        if slug == "checked":  # the lock looks busy: the lines are checked first, then written
            monkeypatch.setattr(items, "stream_lock", lambda project: False)
        spy.clear()
        assert post(api, slug, [("first.jsonl", first)], **first_options).status_code == 201
        r = post(api, slug, [("second.jsonl", second)], **options)
        assert r.status_code == 201, r.content
        reports[slug] = [without_ids(run) for run in r.json()["runs"]]
        assert (("end", True) in spy) == (slug == "streamed"), spy
    assert reports["streamed"] == reports["checked"]
    report = reports["streamed"][0]["report"]
    assert report["created"] == len(new)
    if options.get("update"):
        assert (report["updated"], report["unchanged"]) == (100, 300)
    elif options.get("verified"):
        gold = sum(1 for x in again if x.get("gold"))  # a gold item stays pending
        assert (report["promoted"], report["unchanged"]) == (300 - gold, gold) and gold
    else:
        assert (report["unchanged"], report["promoted"]) == (300, 0)
    assert items_of("streamed") == items_of("checked")
    assert len(items_of("streamed")) == 400 + len(new)
    details = [
        {k: v for k, v in e.details.items() if k != "run"}
        for e in AuditEvent.objects.filter(action=AuditAction.IMPORT).order_by("project__slug", "pk")
    ]
    assert details[:2] == details[2:]


@pytest.mark.django_db(transaction=True)
def test_a_file_refused_after_its_rows_went_to_postgresql_leaves_nothing(api, spy):
    lines = mixed(0, 1000)
    lines[899]["object"] = ""
    runs = ImportRun.objects.count()
    r = post(api, "streamed", [("late.jsonl", body(lines))])
    assert r.status_code == 400, r.content
    assert r.json()["files"][0]["errors"] == ["line 900: field object: must be a non-empty string"]
    assert ("abort", True) in spy  # rows had gone to the COPY: it was abandoned
    assert (Item.objects.count(), ImportRun.objects.count()) == (0, runs)
    # The connection is usable again: the next request imports.
    ok = post(api, "streamed", [("good.jsonl", body(mixed(0, 1000)))])
    assert ok.status_code == 201 and ok.json()["created"] == 1000


@pytest.mark.django_db(transaction=True)
def test_several_files_one_refused_after_streaming_leaves_nothing_and_names_it(api, spy):
    bad = mixed(600, 600)
    bad[499]["bbox"] = [10, 10, 900, 10]
    r = post(api, "streamed", [("a.jsonl", body(mixed(0, 600))), ("b.jsonl", body(bad))])
    assert r.status_code == 400, r.content
    (refused,) = r.json()["files"]
    assert refused["file_name"] == "b.jsonl" and refused["error_count"] == 1
    assert refused["errors"][0].startswith("line 500: field bbox: box [10, 10, 900, 10] leaves the")
    assert ("abort", True) in spy
    assert Item.objects.count() == 0 and not ImportRun.objects.exists()


def test_a_refused_streamed_file_inside_a_callers_transaction(api, spy):
    """The same refusal where the request's transaction is a savepoint (the test's transaction)."""
    lines = mixed(0, 800)
    lines[700]["state"] = 5
    r = post(api, "streamed", [("x.jsonl", body(lines))])
    assert r.status_code == 400
    assert r.json()["files"][0]["errors"] == ["line 701: field state: must be a non-empty string"]
    assert ("abort", True) in spy
    assert Item.objects.count() == 0
    ok = post(api, "streamed", [("y.jsonl", body(mixed(0, 800)))])
    assert ok.status_code == 201 and ok.json()["created"] == 800


@pytest.mark.django_db(transaction=True)
def test_a_media_file_first_seen_mid_stream_pauses_the_copy_for_its_query(api, spy):
    # Lines 0-599 show 4 images, lines 600-999 4 others: each is looked up (a query) while rows
    # are already streaming; the COPY is ended for it and another one started after.
    write_sample_media(import_media_root(), "changeit", distinct=8)
    media_cache_clear()
    lines = [line(i, distinct=4) for i in range(600)] + [line(i, distinct=8) for i in range(600, 1000)]
    assert {x["image"] for x in lines[600:]} - {x["image"] for x in lines[:600]}
    r = post(api, "streamed", [("media.jsonl", body(lines))])
    assert r.status_code == 201, r.content
    assert ("pause", True) in spy, spy
    assert r.json()["runs"][0]["report"]["media_files"] == 8
    stored = items_of("streamed")
    assert [row[0] for row in stored] == [x["id"] for x in lines]  # every row, in the file's order
    media = {row[0]: row[2] for row in stored}
    assert media[lines[604]["id"]] != media[lines[0]["id"]]


@pytest.mark.django_db(transaction=True)
def test_repeated_ids_are_not_streamed_and_are_refused_as_before(api, spy):
    lines = mixed(0, 500) + [line(3)]
    r = post(api, "streamed", [("dup.jsonl", body(lines))])
    assert r.status_code == 400
    assert r.json()["files"][0]["errors"] == ["line 501: field id: duplicate id 'changeit-00003' (first on line 4)"]
    assert not [event for event in spy if event[1]]  # no COPY was opened
    assert Item.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_file_naming_many_items_the_project_holds_is_not_streamed(api, spy):
    """Streaming reads the items a file names before its first line is checked: past one chunk
    (1,000) of them the file is compared 1,000 ids at a time instead, as a large file is."""
    assert post(api, "streamed", [("first.jsonl", body(mixed(0, 1500)))]).status_code == 201
    spy.clear()
    r = post(api, "streamed", [("again.jsonl", body(mixed(0, 1600)))])
    assert r.status_code == 201, r.content
    report = r.json()["runs"][0]["report"]
    assert (report["created"], report["unchanged"]) == (100, 1500)
    assert not [event for event in spy if event[1]]  # no COPY opened while lines were checked
    assert Item.objects.filter(project__slug="streamed").count() == 1600


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "text,field,reason",
    [
        ('"source_note": NaN', "source_note", "a number out of range"),
        ('"source_note": {"n": [1e400]}', "source_note.n[0]", "a number out of range"),
        ('"source_note": "a\\ud800b"', "source_note", "a lone surrogate"),
        ('"tags": ["ok", "\\udfff"]', "tags[1]", "a lone surrogate"),
    ],
)
def test_a_value_jsonb_cannot_hold_is_refused_naming_line_and_field(api, spy, text, field, reason):
    """Python's JSON reader takes NaN, 1e400 (as infinity) and half of a surrogate pair; PostgreSQL's
    jsonb refuses them, which was a 500 once the row reached the COPY."""
    lines = [json.dumps(x) for x in mixed(0, 5)]
    lines[2] = lines[2][:-1] + ", " + text + "}"
    r = post(api, "streamed", [("odd.jsonl", ("\n".join(lines) + "\n").encode())])
    assert r.status_code == 400, r.content
    (error,) = r.json()["files"][0]["errors"]
    assert error.startswith(f"line 3: field {field}: {reason}"), error
    assert Item.objects.count() == 0
    ok = post(api, "streamed", [("good.jsonl", body(mixed(0, 5)))])
    assert ok.status_code == 201


@pytest.mark.django_db(transaction=True)
def test_an_id_with_half_a_surrogate_pair_is_refused_not_a_500(api, spy):
    lines = [json.dumps(x) for x in mixed(0, 5)]
    lines[1] = lines[1].replace('"id": "changeit-00001"', '"id": "bad-\\ud801"')
    assert '"bad-\\ud801"' in lines[1]
    r = post(api, "streamed", [("id.jsonl", ("\n".join(lines) + "\n").encode())])
    assert r.status_code == 400, r.content
    assert r.json()["files"][0]["errors"][0].startswith("line 2: field id: a lone surrogate")
    assert Item.objects.count() == 0
