"""A live server (pytest-django's live_server, a real HTTP socket) with a status project, its
researcher's and annotator's tokens, and a zip of items to upload. Celery is eager: the live
server's request runs the import or job when its transaction commits, as the API does."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from annotation.importing.samples import write_sample_dataset
from annotation.models import Role


@pytest.fixture
def api_world(live_server, make_user, make_project, eager, tmp_path):
    from rest_framework.authtoken.models import Token

    res, ann = make_user("res"), make_user("ann")
    project = make_project("lemons", "status", members={res: Role.RESEARCHER, ann: Role.ANNOTATOR})
    data = tmp_path / "data"
    lines = write_sample_dataset(data, "status", 3)
    archive = tmp_path / "items.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(lines, "items.jsonl")
        for p in (data / "img").iterdir():
            zf.write(p, f"img/{p.name}")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "image_a": "../a.png", "image_b": "b.png"}\n')
    return {
        "url": live_server.url,
        "project": project,
        "token": Token.objects.create(user=res).key,
        "annotator_token": Token.objects.create(user=ann).key,
        "zip": archive,
        "bad": bad,
        "tmp": tmp_path,
    }


@pytest.fixture
def random_endpoint(db):
    from inference import services

    return services.endpoint_create(name="random-vlm", backend="random", options={"seed": 0})


BAD_IMPORT_ERRORS = [
    "line 1: field image_a: ../a.png: path leaves the media root ('..')",
    "line 1: field image_b: b.png: file not found under the media root",
]


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())
