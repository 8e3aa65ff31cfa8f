"""Fixtures of the annotation tests: the folder an item import reads (data_dir), a status project
with the two images its sample lines name (status_project, status_media) and an OSCBench project
(osc_project), and four annotators (people: the queue tests,
tests/annotation/test_tasks_queue.py and test_tasks_queue_conflicts.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotation.importing.samples import make_image
from tests.annotation.work_factories import make_people


@pytest.fixture
def data_dir(tmp_path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


@pytest.fixture
def status_project(make_project):
    return make_project("st", "status")


@pytest.fixture
def status_media(data_dir) -> Path:
    make_image(data_dir / "img/a.png", 0, 0)
    make_image(data_dir / "img/b.png", 0, 2)
    return data_dir


@pytest.fixture
def osc_project(make_project):
    return make_project("osc", "oscbench")


@pytest.fixture
def people(db):
    return make_people(4)
