"""Boards are cached under a fingerprint of their data (shared through Redis) and a finished job
leaves its project's boards computed by a worker task, so the first page view pays no scoring."""

import pytest

from annotation.models import Item, ItemStatus, Membership, Role
from evaluation import board_cache, leaderboard
from inference import services
from inference.models import JobStatus
from tests.inference import factories

pytestmark = pytest.mark.django_db(transaction=True)


def refuse_to_score(monkeypatch) -> list:
    calls = []

    def build(*args, **kwargs):
        calls.append(kwargs)
        raise AssertionError("the board was computed again")

    monkeypatch.setattr(leaderboard, "build", build)
    return calls


def test_a_finished_job_leaves_its_boards_computed_and_new_data_gives_a_new_board(
    eager, make_project, make_user, client, tmp_path, monkeypatch
):
    researcher = make_user("res")
    project = make_project("st", "status")
    Membership.objects.create(project=project, user=researcher, role=Role.RESEARCHER)
    items = factories.status_items(project, 6, tmp_path)
    release = factories.release_of(project, items)
    endpoint = services.endpoint_create(name="rnd", backend="random", options={"seed": 1})
    job = services.job_create(endpoint=endpoint, project=project, release=release)
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED

    calls = refuse_to_score(monkeypatch)  # from here on, a page that had to score would fail
    client.force_login(researcher)
    for url in (
        "/projects/st/leaderboard/?release=v1",
        "/projects/st/leaderboard/",
        "/api/projects/st/leaderboard/?release=v1",
    ):
        page = client.get(url)
        assert page.status_code == 200, url
    assert 'data-model="rnd"' in client.get("/projects/st/leaderboard/?release=v1").content.decode()
    assert calls == []

    # One more verified item changes what the live board scores: its key changes, so it is scored again.
    Item.objects.create(project=project, external_id="late", payload=items[0].payload, status=ItemStatus.VERIFIED)
    with pytest.raises(AssertionError, match="computed again"):
        client.get("/projects/st/leaderboard/")
    assert len(calls) == 1
    # The release's board does not depend on it and is still served from the cache.
    assert client.get("/projects/st/leaderboard/?release=v1").status_code == 200


def test_the_cache_key_changes_with_the_data_a_board_reads(make_project, tmp_path):
    project = make_project("st", "status")
    items = factories.status_items(project, 3, tmp_path)
    before = board_cache.selectors.data_fingerprint(project, None)
    Item.objects.filter(pk=items[0].pk).update(status=ItemStatus.DISCARDED)
    assert board_cache.selectors.data_fingerprint(project, None) != before
