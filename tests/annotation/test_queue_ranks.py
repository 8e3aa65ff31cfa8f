"""Queue ranks (annotation/queue/ranks.py): a protocol that matches pairs has its open items
ranked from the votes so far, and the claim hands items out by that rank within a level; every
other protocol keeps id order (all ranks 0)."""

from __future__ import annotations

import pytest

from annotation.models import Annotation, Item, ItemStatus, Role
from annotation.queue import ranks
from annotation.queue.ranks import queue_ranks_refresh, queue_ranks_refresh_soon
from protocols import registry
from tests.helpers.clients import session_client
from tests.protocols.arena.helpers import clips, make_pair

pytestmark = pytest.mark.django_db

MODELS = ("gen-strong", "gen-middle", "gen-weak", "gen-new")


@pytest.fixture
def arena(settings, tmp_path, make_user, make_project):
    settings.MEDIA_ROOT = tmp_path / "media"
    voter = make_user("voter")
    project = make_project(
        "duel",
        "arena",
        members={voter: Role.ANNOTATOR},
        annotations_per_item=3,
        option_seed=5,
        settings={"arena_min_view_seconds": 0},  # the vote comes at once, through the API
    )
    media = clips(tmp_path)
    # Three known models met often (their pairs are settled); "gen-new" has never been voted on.
    settled = [(MODELS[0], MODELS[1]), (MODELS[1], MODELS[2]), (MODELS[0], MODELS[2])]
    done = []
    for n in range(30):
        a, b = settled[n % 3]
        item = make_pair(project, f"done-{n:02d}", media, models=(a, b))
        done.append(item)
    open_settled = [make_pair(project, f"open-{n:02d}", media, models=settled[n % 3]) for n in range(6)]
    open_new = [make_pair(project, f"new-{n:02d}", media, models=(MODELS[3], MODELS[n % 3])) for n in range(3)]
    raters = [make_user(f"rater{i}") for i in range(3)]
    for item in done:  # the first model of each settled pair wins every vote
        for rater in raters:
            Annotation.objects.create(item=item, annotator=rater, result={"winner": "a"}, source="import")
        Item.objects.filter(pk=item.pk).update(status=ItemStatus.ANNOTATED, annotation_count=3)
    return project, voter, open_settled, open_new


def pending_ranks(project) -> dict[int, int]:
    return dict(Item.objects.filter(project=project, status=ItemStatus.PENDING).values_list("pk", "queue_rank"))


def test_a_refresh_ranks_the_open_pairs_and_the_claim_follows_the_ranks(arena):
    project, voter, open_settled, open_new = arena
    assert set(pending_ranks(project).values()) == {0}  # before any refresh: id order

    assert queue_ranks_refresh(project_id=project.pk) > 0

    by_rank = pending_ranks(project)
    assert sorted(by_rank.values()) == list(range(len(open_settled) + len(open_new)))
    # The model nobody has voted on is the most uncertain comparison: its pairs come first.
    first_three = sorted(by_rank, key=by_rank.get)[:3]
    assert set(first_three) == {item.pk for item in open_new}

    # The claim hands out the rank-0 item, not the lowest id (the lowest id is a settled pair).
    data = session_client(voter).post("/api/projects/duel/tasks/next/", {}, format="json").json()
    assert data["item"]["id"] == min(by_rank, key=by_rank.get)
    assert data["item"]["id"] != min(by_rank)


def test_the_ranks_are_the_protocols_own_and_done_items_keep_theirs(arena):
    project, _, open_settled, open_new = arena
    queue_ranks_refresh(project_id=project.pk)
    items = [ranks._Item(i.pk, i.payload) for i in Item.objects.filter(project=project).order_by("pk")]
    votes: dict[int, list] = {}
    answers = Annotation.objects.order_by("item_id", "pk").values_list("item_id", "annotator_id", "result")
    for item_id, annotator_id, result in answers:
        votes.setdefault(item_id, []).append((str(annotator_id), result))
    open_keys = [i.pk for i in open_settled + open_new]
    expected = registry.get("arena").matchmaking.item_priorities(
        items, votes, open_keys=open_keys, seed=sum(len(v) for v in votes.values())
    )
    assert pending_ranks(project) == expected
    assert set(
        Item.objects.filter(project=project, status=ItemStatus.ANNOTATED).values_list("queue_rank", flat=True)
    ) == {0}


def test_a_protocol_without_matchmaking_is_left_in_id_order(make_project):
    project = make_project("plain", "status")
    Item.objects.create(project=project, external_id="x", payload={}, media={})
    assert registry.get("status").matchmaking is None
    assert queue_ranks_refresh(project_id=project.pk) == 0
    assert queue_ranks_refresh_soon(project=project) is False
    assert set(Item.objects.filter(project=project).values_list("queue_rank", flat=True)) == {0}


def test_a_burst_of_votes_asks_for_one_refresh(arena, django_capture_on_commit_callbacks, monkeypatch):
    project, *_ = arena
    sent = []
    monkeypatch.setattr(ranks, "enqueue_on_commit", lambda name, *args: sent.append((name, args)))
    from django.core.cache import cache

    cache.delete(ranks._PENDING_KEY.format(project=project.pk))
    assert queue_ranks_refresh_soon(project=project) is True
    assert queue_ranks_refresh_soon(project=project) is False
    assert sent == [(ranks.REFRESH_TASK, (project.pk,))]
    cache.delete(ranks._PENDING_KEY.format(project=project.pk))


def test_a_submitted_vote_asks_for_a_refresh(arena, monkeypatch):
    project, voter, *_ = arena
    sent = []
    monkeypatch.setattr(ranks, "enqueue_on_commit", lambda name, *args: sent.append((name, args)))
    from django.core.cache import cache

    cache.delete(ranks._PENDING_KEY.format(project=project.pk))
    client = session_client(voter)
    data = client.post("/api/projects/duel/tasks/next/", {}, format="json").json()
    r = client.post(
        f"/api/tasks/{data['task']}/submit/",
        {"result": {"shown": data["item"]["shown"], "votes": {"overall": "tie"}}},
        format="json",
    )
    assert r.status_code == 201, r.content
    assert sent == [(ranks.REFRESH_TASK, (project.pk,))]
    cache.delete(ranks._PENDING_KEY.format(project=project.pk))


def test_the_celery_task_runs_the_refresh_and_a_second_run_changes_nothing(arena):
    from annotation.tasks import refresh_queue_ranks

    project, *_ = arena
    assert refresh_queue_ranks(project.pk) > 0
    assert refresh_queue_ranks(project.pk) == 0  # the same votes give the same ranks: nothing to write
    assert refresh_queue_ranks(10**9) == 0  # a project gone
