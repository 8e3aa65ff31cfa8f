"""Every page and API of an arena project answers (never a 5xx), and what an annotator reads of
their own vote (my work, amending) names no model; an amendment keeps the sides the annotator saw."""

from __future__ import annotations

import json

import pytest

from annotation.models import Annotation, Role
from tests.helpers.clients import session_client

from .helpers import MODEL_NAMES, clips, make_pair

pytestmark = pytest.mark.django_db


@pytest.fixture
def arena(settings, tmp_path, make_user, make_project):
    settings.MEDIA_ROOT = tmp_path / "media"
    voter, lead = make_user("voter"), make_user("lead")
    project = make_project(
        "pages",
        "arena",
        members={voter: Role.ANNOTATOR, lead: Role.ADMIN},
        annotations_per_item=1,
        settings={"arena_min_view_seconds": 0},  # a vote at once through the API (test_viewing.py)
    )
    item = make_pair(project, "p0", clips(tmp_path))
    client = session_client(voter)
    task = client.post("/api/projects/pages/tasks/next/", {}, format="json").json()
    shown = task["item"]["shown"]
    r = client.post(
        f"/api/tasks/{task['task']}/submit/", {"result": {"shown": shown, "votes": {"overall": "right"}}}, format="json"
    )
    assert r.status_code == 201
    return project, voter, lead, item, shown, Annotation.objects.get()


def test_pages_of_an_arena_project_answer(arena, client):
    project, _voter, lead, item, _shown, _annotation = arena
    client.force_login(lead)
    for url in (
        "/projects/pages/",
        "/projects/pages/settings/",
        "/projects/pages/review/",
        f"/projects/pages/review/{item.pk}/",
        "/projects/pages/agreement/",
        "/projects/pages/leaderboard/",
        "/api/projects/pages/agreement/",
        "/api/projects/pages/review/",
        f"/api/items/{item.pk}/review/",
        "/api/projects/pages/leaderboard/",
    ):
        assert client.get(url).status_code == 200, url
    r = client.get("/api/projects/pages/leaderboard/?baseline=SECRET-model-alpha")
    assert r.status_code == 400 and "pairwise votes" in r.content.decode()
    # The arena's form has no disagreement thresholds: setting one is refused, naming it.
    api = session_client(lead)
    assert api.get("/api/projects/pages/settings/disagreement/").json()["settable"] == []
    r = api.patch("/api/projects/pages/settings/disagreement/", {"rating_spread": 2}, format="json")
    assert r.status_code == 400 and "Not a threshold of pairwise projects" in r.content.decode()
    project.refresh_from_db()
    assert "disagreement" not in project.settings


def test_an_annotator_reads_their_vote_in_screen_terms_and_amends_it(arena, client):
    project, voter, _lead, item, shown, annotation = arena
    client.force_login(voter)
    api = session_client(voter)
    mine = api.get("/api/projects/pages/my-annotations/").json()
    text = json.dumps(mine)
    assert "right better" in text
    own = api.get(f"/api/annotations/{annotation.pk}/").json()
    assert own["item"]["shown"] == shown  # the same sides as when they voted
    page = client.get(f"/projects/pages/my-work/{annotation.pk}/").content.decode()
    for name in MODEL_NAMES:
        assert name not in text and name not in json.dumps(own) and name not in page
    r = api.post(
        f"/api/annotations/{annotation.pk}/amend/",
        {"result": {"shown": shown, "votes": {"overall": "tie", "state_change": "left"}}},
        format="json",
    )
    assert r.status_code == 200, r.content
    annotation.refresh_from_db()
    assert annotation.result == {"winner": "tie", "criteria": {"state_change": shown[0]}, "shown": shown}
