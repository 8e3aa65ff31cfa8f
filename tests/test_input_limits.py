"""Bounded, validated request input (annotation/input_limits.py): uploads refused past
STATELAB_MAX_UPLOAD_BYTES with 413 before the body is read, other bodies past
DATA_UPLOAD_MAX_MEMORY_SIZE, integers checked against their column ranges, NUL bytes refused in
paths, query strings, forms and JSON — each a 4xx with a message, never a 5xx, nothing written."""

from __future__ import annotations

import io

import pytest
from django.conf import settings as django_settings
from django.http.multipartparser import MultiPartParser
from rest_framework.test import APIClient

from annotation.input_limits import CappedUploadHandler, UploadTooLarge
from annotation.models import Annotation, ImportRun, Item, Role, Task
from tests.annotation.work_factories import make_item, make_people

pytestmark = pytest.mark.django_db
GiB = 1024**3
HUGE = 99999999999999999999999
BOUNDARY = "statelab-boundary"


class MultipartStream(io.RawIOBase):
    """A multipart body with one file of `size` bytes, generated as it is read (never in memory);
    `read_bytes` counts what the server took."""

    def __init__(self, size: int, *, field: str = "file", name: str = "items.jsonl"):
        self.head = (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{field}"; filename="{name}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        self.tail = f"\r\n--{BOUNDARY}--\r\n".encode()
        self.size = size
        self.total = len(self.head) + size + len(self.tail)
        self.read_bytes = 0

    def readable(self):
        return True

    def readinto(self, buffer):
        pos = self.read_bytes
        n = min(len(buffer), self.total - pos)
        if n <= 0:
            return 0
        out = bytearray()
        while len(out) < n:
            at = pos + len(out)
            if at < len(self.head):
                out += self.head[at : at + n - len(out)]
            elif at < len(self.head) + self.size:
                out += b"x" * min(n - len(out), len(self.head) + self.size - at)
            else:
                k = at - len(self.head) - self.size
                out += self.tail[k : k + n - len(out)]
        buffer[:n] = out
        self.read_bytes += n
        return n


@pytest.fixture
def researcher(make_project, make_user):
    user = make_user("res")
    project = make_project("p", "changeit", members={user: Role.RESEARCHER})
    return user, project


def test_the_upload_cap_default_is_two_gib_and_uploads_stream_to_disk():
    assert django_settings.STATELAB_MAX_UPLOAD_BYTES == 2 * GiB
    assert django_settings.FILE_UPLOAD_HANDLERS == ["annotation.input_limits.CappedUploadHandler"]
    assert django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE == 10 * 1024**2


@pytest.mark.parametrize("url", ["/api/projects/p/imports/", "/projects/p/import/"])
def test_an_upload_above_the_default_cap_is_refused_413_before_its_body_is_read(client, researcher, url):
    user, _project = researcher
    client.force_login(user)
    body = MultipartStream(2 * GiB + 1)  # just over the real default

    response = client.post(
        url,
        CONTENT_TYPE=f"multipart/form-data; boundary={BOUNDARY}",
        CONTENT_LENGTH=str(body.total),
        **{"wsgi.input": body},
    )

    assert response.status_code == 413
    text = response.json()["detail"] if url.startswith("/api/") else response.content.decode()
    assert text.startswith(
        f"{body.total} bytes is more than the upload limit of {2 * GiB} bytes (2.00 GiB, STATELAB_MAX_UPLOAD_BYTES)"
    )
    assert body.read_bytes == 0 and not ImportRun.objects.exists()


def test_an_upload_under_the_cap_still_goes_through(
    client, researcher, settings, eager, django_capture_on_commit_callbacks
):
    user, _project = researcher
    client.force_login(user)
    body = MultipartStream(3 * 1024**2)  # 3 MiB of "x": a file on disk, refused per line by the importer

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/api/projects/p/imports/",
            CONTENT_TYPE=f"multipart/form-data; boundary={BOUNDARY}",
            CONTENT_LENGTH=str(body.total),
            **{"wsgi.input": body},
        )

    assert response.status_code == 202, response.content
    assert body.read_bytes == body.total
    run = ImportRun.objects.get()
    assert run.file_bytes == 3 * 1024**2 and run.status == "refused"


def test_a_body_streamed_past_the_cap_stops_there_whatever_its_content_length_said(settings):
    # An operator's smaller cap, so the stream is short (the default is checked above); the
    # Content-Length understates the body, as a server passing a chunked body on may.
    settings.STATELAB_MAX_UPLOAD_BYTES = 256 * 1024
    body = MultipartStream(64 * 1024**2)
    meta = {"CONTENT_TYPE": f"multipart/form-data; boundary={BOUNDARY}", "CONTENT_LENGTH": "1000"}
    handler = CappedUploadHandler()

    with pytest.raises(UploadTooLarge):
        MultiPartParser(meta, body, [handler]).parse()

    assert body.read_bytes < 256 * 1024 + 4 * 64 * 1024  # stopped within a few chunks of the cap
    assert handler.file.closed  # its temporary file is gone


def test_a_chunked_upload_without_content_length_is_refused_411(client, researcher):
    user, _project = researcher
    client.force_login(user)
    body = MultipartStream(10 * GiB)

    response = client.post(
        "/api/projects/p/imports/",
        CONTENT_TYPE=f"multipart/form-data; boundary={BOUNDARY}",
        CONTENT_LENGTH="",
        HTTP_TRANSFER_ENCODING="chunked",
        **{"wsgi.input": body},
    )

    assert response.status_code == 411
    assert response.json()["detail"] == "an upload needs a Content-Length header (chunked uploads are not taken)"
    assert body.read_bytes == 0


def test_a_json_body_above_the_memory_cap_is_refused_413_unread(client, make_project):
    (annotator,) = make_people(1)
    make_project("q", "changeit", members={annotator: Role.ANNOTATOR})
    client.force_login(annotator)
    body = MultipartStream(1)  # any stream: it must not be read

    response = client.post(
        "/api/projects/q/tasks/next/",
        CONTENT_TYPE="application/json",
        CONTENT_LENGTH=str(10 * 1024**2 + 1),
        **{"wsgi.input": body},
    )

    assert response.status_code == 413
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in response.json()["detail"] and body.read_bytes == 0


# --- integers within their columns' range ----------------------------------------------------------


@pytest.fixture
def work(make_project):
    annotator, reviewer = make_people(2)
    project = make_project("w", "changeit", members={annotator: Role.ANNOTATOR, reviewer: Role.REVIEWER})
    make_item(project)
    a, r = APIClient(), APIClient()
    a.force_login(annotator)
    r.force_login(reviewer)
    return project, a, r


@pytest.mark.parametrize("exclude", [[HUGE], [-HUGE], [2**63], [0]])
def test_next_task_exclude_outside_the_id_range_is_a_400(work, exclude):
    _project, a, _r = work
    response = a.post("/api/projects/w/tasks/next/", {"exclude": exclude}, format="json")
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["exclude"]
    assert not Task.objects.exists()


@pytest.mark.parametrize(
    "query,name",
    [
        ("offset=1e23", "offset"),
        (f"offset={HUGE}", "offset"),
        (f"limit={HUGE}", "limit"),
        ("limit=-" + "9" * 30, "limit"),
        ("offset=abc", "offset"),
    ],
)
def test_review_queue_paging_outside_the_range_is_a_400_naming_the_parameter(work, query, name):
    _project, _a, r = work
    response = r.get(f"/api/projects/w/review/?{query}")
    assert response.status_code == 400
    assert list(response.json()["errors"]) == [name] and name in response.json()["errors"][name]


def test_review_queue_paging_in_range_still_works(work):
    _project, _a, r = work
    assert r.get("/api/projects/w/review/?offset=9223372036854775&limit=5").status_code == 200


def test_draft_version_and_review_annotation_outside_their_columns_are_400(work):
    project, a, r = work
    task = a.post("/api/projects/w/tasks/next/").json()["task"]
    response = a.put(f"/api/tasks/{task}/draft/", {"draft": {}, "version": HUGE}, format="json")
    assert response.status_code == 400 and list(response.json()["errors"]) == ["version"]
    item = Item.objects.get(project=project)
    response = r.post(f"/api/items/{item.pk}/review/", {"decision": "accept", "annotation": HUGE}, format="json")
    assert response.status_code == 400 and list(response.json()["errors"]) == ["annotation"]


@pytest.mark.parametrize(
    "url,method",
    [
        (f"/api/items/{HUGE}/review/", "get"),
        (f"/api/tasks/{HUGE}/renew/", "post"),
        (f"/api/tasks/{HUGE}/skip/", "post"),
        (f"/api/imports/{HUGE}/", "get"),
        (f"/projects/w/review/{HUGE}/", "get"),
    ],
)
def test_ids_in_urls_beyond_the_range_are_404(work, url, method):
    _project, a, r = work
    assert getattr(r, method)(url).status_code == 404


# --- NUL bytes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url,what",
    [
        ("/api/projects/p/releases/%00/export/", "the path"),
        ("/projects/p/releases/v%001/download/", "the path"),
        ("/projects/p/leaderboard/download/csv/?metric=%00", "query parameter 'metric'"),
        ("/projects/p/leaderboard/?release=a%00b", "query parameter 'release'"),
        ("/api/projects/p/leaderboard/?release=%00", "query parameter 'release'"),
    ],
)
def test_a_nul_in_the_path_or_query_is_a_400_that_says_so(client, researcher, url, what):
    user, _project = researcher
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == 400
    text = response.json()["detail"] if url.startswith("/api/") else response.content.decode()
    assert text.startswith(f"{what} contains a NUL byte (%00)")


def test_a_nul_in_a_media_path_is_not_found(client, researcher):
    user, _project = researcher
    client.force_login(user)
    assert client.get("/media/assets/%00.png").status_code == 404  # annotation/views/media.py's own answer


def test_a_nul_in_a_json_body_is_a_400_naming_the_field(work):
    _project, a, _r = work
    task = a.post("/api/projects/w/tasks/next/").json()["task"]
    draft = a.put(f"/api/tasks/{task}/draft/", {"draft": {"note": ["ok", "x\u0000"]}, "version": 0}, format="json")
    submit = a.post(
        f"/api/tasks/{task}/submit/", {"result": {"state": "peeled\u0000apple", "bbox": [1, 1, 2, 2]}}, format="json"
    )
    assert (draft.status_code, submit.status_code) == (400, 400)
    assert draft.json()["detail"].startswith("JSON field draft.note[1] contains a NUL byte")
    assert submit.json()["detail"].startswith("JSON field result.state contains a NUL byte")
    assert Task.objects.get(pk=task).draft in ({}, None)


@pytest.mark.parametrize(
    "body,field,says",
    [
        ('{"draft": {"x": 1e400}, "version": 0}', "draft.x", "a number out of range"),
        ('{"draft": {"x": [-1e400]}, "version": 0}', "draft.x[0]", "a number out of range"),
        ('{"draft": {"note": "a\\ud800b"}, "version": 0}', "draft.note", "a lone surrogate"),
        ('{"draft": {"\\udfff": 1}, "version": 0}', "draft.?", "a key with a lone surrogate"),
    ],
)
def test_a_value_jsonb_cannot_hold_is_a_400_naming_the_field(work, body, field, says):
    """Python's JSON reader takes 1e400 (as infinity) and half of a surrogate pair; PostgreSQL's
    jsonb refuses both, which was a 500 once a draft or a result reached the database."""
    _project, a, _r = work
    task = a.post("/api/projects/w/tasks/next/").json()["task"]
    for url in (f"/api/tasks/{task}/draft/", f"/api/tasks/{task}/submit/"):
        sent = body if url.endswith("draft/") else body.replace('"draft"', '"result"').replace(', "version": 0', "")
        response = a.generic("PUT" if url.endswith("draft/") else "POST", url, sent, content_type="application/json")
        assert response.status_code == 400, (url, response.content)
        named = field if url.endswith("draft/") else field.replace("draft", "result")
        assert response.json()["detail"].startswith(f"JSON field {named} holds {says}")
    assert Task.objects.get(pk=task).draft in ({}, None)
    assert not Annotation.objects.exists()


def test_a_body_nested_too_deep_is_a_400(work):
    _project, a, _r = work
    task = a.post("/api/projects/w/tasks/next/").json()["task"]
    deep = '{"draft": ' + "[" * 5000 + "]" * 5000 + ', "version": 0}'
    response = a.generic("PUT", f"/api/tasks/{task}/draft/", deep, content_type="application/json")
    assert response.status_code == 400 and "nests too deep" in response.json()["detail"]


def test_a_nul_in_a_form_field_is_a_400(client, researcher):
    user, _project = researcher
    client.force_login(user)
    response = client.post("/projects/p/import/", {"kind": "items\u0000", "file": io.BytesIO(b"{}\n")})
    assert response.status_code == 400 and "form field 'kind' contains a NUL byte" in response.content.decode()
    login = client.post("/accounts/login/", {"username": "res\u0000", "password": "pw"})
    assert login.status_code == 400
    assert not ImportRun.objects.exists()
