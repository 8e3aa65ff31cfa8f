"""The server's own viewing checks on an arena vote (protocols/arena/viewing.py), through the real
API: a vote that comes sooner than the project's minimum viewing time is refused naming the time
seen and the time required; a vote on videos must report both sides played, and no more play than
the time the server saw pass. Nothing refused is stored."""

from __future__ import annotations

import json
import time

import pytest

from annotation.models import Annotation, MediaAsset, Role
from annotation.project_setup import project_settings_check
from protocols.arena import viewing
from tests.helpers.clients import session_client

from .helpers import clips, make_pair, pictures

pytestmark = pytest.mark.django_db


@pytest.fixture
def voter(settings, tmp_path, make_user):
    settings.MEDIA_ROOT = tmp_path / "media"
    return make_user("voter")


def _project(make_project, voter, tmp_path, slug, *, kind="video", **settings):
    project = make_project(slug, "arena", members={voter: Role.ANNOTATOR}, annotations_per_item=1, settings=settings)
    make_pair(project, f"{slug}-0", clips(tmp_path) if kind == "video" else pictures(tmp_path), kind=kind)
    return project


def _claim(client, slug):
    r = client.post(f"/api/projects/{slug}/tasks/next/", {}, format="json")
    assert r.status_code == 200, r.content
    return r.json()


def _vote(client, data, **extra):
    body = {"shown": data["item"]["shown"], "votes": {"overall": "left"}, **extra}
    return client.post(f"/api/tasks/{data['task']}/submit/", {"result": body}, format="json")


def test_a_vote_sooner_than_the_minimum_is_refused_naming_both_times(voter, make_project, tmp_path):
    _project(make_project, voter, tmp_path, "slow", arena_min_view_seconds=30)
    client = session_client(voter)
    data = _claim(client, "slow")
    r = _vote(client, data, played={"left": 0.5, "right": 0.5})
    assert r.status_code == 400, r.content
    message = r.json()["errors"]["viewing"]
    assert "30.0 s" in message and "this project's minimum viewing time" in message
    seen = float(message.split("This vote came ")[1].split(" s")[0])
    assert 0 <= seen < 30
    assert not Annotation.objects.exists()


def test_by_default_the_longer_video_sets_the_minimum_and_both_must_have_played(voter, make_project, tmp_path):
    project = _project(make_project, voter, tmp_path, "clip")
    lengths = sorted(MediaAsset.objects.filter(kind="video").values_list("duration", flat=True))
    assert lengths and all(lengths)  # the import measured the clips: the default is the longer one
    client = session_client(voter)
    data = _claim(client, "clip")
    r = _vote(client, data, played={"left": 5.0, "right": 5.0})
    assert r.status_code == 400
    errors = r.json()["errors"]
    assert f"{max(lengths):.1f} s (the longer video's length)" in errors["viewing"]
    # Play reported beyond the time the server saw pass: refused, whatever the wait.
    assert "but only" in errors["played.left"] and "played.right" in errors
    time.sleep(max(lengths) + 0.2)
    # No report of what played, or one side not played: refused.
    r = _vote(client, data)
    assert r.status_code == 400 and "played" in r.json()["errors"]
    r = _vote(client, data, played={"left": max(lengths), "right": 0})
    assert r.status_code == 400 and "The right video played 0.0 s" in r.json()["errors"]["played.right"]
    r = _vote(client, data, played={"left": "all", "right": 1})
    assert r.status_code == 400 and "played.left" in r.json()["errors"]
    assert not Annotation.objects.filter(item__project=project).exists()
    # Both played through, after the time they take: stored, without the play report.
    r = _vote(client, data, played={"left": max(lengths), "right": max(lengths)})
    assert r.status_code == 201, r.content
    stored = Annotation.objects.get(item__project=project)
    assert stored.result == {"winner": data["item"]["shown"][0], "shown": data["item"]["shown"]}
    assert stored.time_spent_ms >= max(lengths) * 1000


def test_images_need_the_default_minimum_and_no_play_report(voter, make_project, tmp_path):
    _project(make_project, voter, tmp_path, "pics", kind="image")
    client = session_client(voter)
    data = _claim(client, "pics")
    r = _vote(client, data)
    assert r.status_code == 400
    assert f"{viewing.DEFAULT_MIN_VIEW_SECONDS:.1f} s (the default minimum viewing time)" in json.dumps(r.json())
    assert set(r.json()["errors"]) == {"viewing"}


def test_the_setting_is_checked_by_its_key():
    clean, errors = project_settings_check(protocol="arena", settings={"arena_min_view_seconds": 4.5})
    assert clean == {"arena_min_view_seconds": 4.5} and errors == {}
    for bad in (-1, "soon", True, 10_000):
        _clean, errors = project_settings_check(protocol="arena", settings={"arena_min_view_seconds": bad})
        assert "arena_min_view_seconds" in errors and repr(bad) in errors["arena_min_view_seconds"]
    _clean, errors = project_settings_check(protocol="status", settings={"arena_min_view_seconds": 3})
    assert errors == {"arena_min_view_seconds": "Only Arena (pairwise votes) projects read it."}


def test_a_minimum_longer_than_the_lease_asks_no_more_than_the_whole_lease(voter, make_project, tmp_path):
    """The server's measured time stops at one lease: a vote after the whole lease is taken even
    when the project's minimum (or a long video) asks for more; one second less is refused."""
    from annotation.models import Item
    from annotation.queue.viewing import viewing_refusal
    from annotation.results import ResultInvalid

    project = _project(make_project, voter, tmp_path, "long", kind="image", arena_min_view_seconds=3600)
    item = Item.objects.get(project=project)
    from protocols.arena import workflow

    order = workflow.shown_order(project.option_seed, str(item.pk), str(voter.pk))
    result = {"shown": order, "votes": {"overall": "left"}}
    with pytest.raises(ResultInvalid):
        viewing_refusal(item=item, user=voter, result=result, seconds=599)
    viewing_refusal(item=item, user=voter, result=result, seconds=600)  # the default lease: no refusal
