"""Excluding raters from an arena board (evaluation/rater_exclusion.py): the rater screen in the
board's JSON, a researcher's exclusion through the service and the API (audited, the board fitted
again without the rater's votes, a new cache key), and what is refused (bad bodies, raters with no
vote, other protocols, roles below researcher)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from annotation.models import AuditEvent, Project, Role
from annotation.project_setup import project_settings_check
from evaluation import board_cache, leaderboard, rater_exclusion
from protocols.arena import scoring
from tests.helpers.clients import session_client
from tests.protocols.arena.helpers import clips

from .arena_raters import HONEST, N_ITEMS, STRONG, WEAK, seed_votes, strong_wins

pytestmark = pytest.mark.django_db

URL = "/api/projects/{}/raters/exclusions/"


@pytest.fixture
def arena(settings, tmp_path, make_project, make_user):
    settings.MEDIA_ROOT = tmp_path / "media"
    researcher = make_user("res")
    annotator = make_user("anna")
    carol = make_user("carol")
    project = make_project(
        "raters",
        "arena",
        members={researcher: Role.RESEARCHER, annotator: Role.ANNOTATOR, carol: Role.ANNOTATOR},
        annotations_per_item=6,
    )
    items = seed_votes(project, clips(tmp_path), carol)
    return project, researcher, annotator, carol, items


def _board(client, project) -> dict:
    r = client.get(f"/api/projects/{project.slug}/leaderboard/")
    assert r.status_code == 200, r.content
    return r.json()


def _row(board: dict, model: str) -> dict:
    return next(row for row in board["rows"] if row["model"] == model)


def test_the_board_json_carries_the_screen_and_the_contrarian_is_flagged(arena):
    project, researcher, _annotator, carol, _items = arena
    board = _board(session_client(researcher), project)
    screen = {row["rater"]: row for row in board["rater_screen"]}
    assert set(screen) == {f"ext:{h}" for h in HONEST} | {f"user:{carol.pk}"}
    bad = screen[f"user:{carol.pk}"]
    assert bad["label"] == "carol" and bad["flagged"] is True and bad["excluded"] is False
    assert (bad["votes"], bad["misses"]) == (N_ITEMS, N_ITEMS)
    assert bad["p_holm"] < 0.05
    for h in HONEST:
        row = screen[f"ext:{h}"]
        assert (row["votes"], row["misses"], row["flagged"], row["label"]) == (N_ITEMS, 2, False, h)
    assert board["excluded_raters"] == [] and board["excluded_votes"] == 0
    wins, battles = strong_wins(with_contrarian=True)
    assert _row(board, STRONG)["metrics"]["battles"] == battles
    # The win rate counts the contrarian's votes: 110 of 144.
    assert _row(board, STRONG)["metrics"]["win_rate"] == round(wins / battles, 4)


def test_excluding_the_flagged_rater_refits_the_board_and_is_audited(arena):
    project, researcher, _annotator, carol, items = arena
    client = session_client(researcher)
    before = _board(client, project)
    key = f"user:{carol.pk}"
    r = client.post(URL.format(project.slug), {"rater": key, "excluded": True}, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["changed"] is True and body["excluded_raters"] == [key]
    assert body["screen"]["flagged"] is True

    after = _board(client, project)
    wins, battles = strong_wins(with_contrarian=False)
    assert _row(after, STRONG)["metrics"]["battles"] == battles
    assert _row(after, STRONG)["metrics"]["win_rate"] == round(wins / battles, 4)
    # The ratings are the fit of the honest raters' votes alone.
    votes = {
        item.pk: [
            (f"ext:{a.external_rater}", a.result) for a in item.annotations.order_by("pk") if a.annotator_id is None
        ]
        for item in items
    }
    units = [SimpleNamespace(key=item.pk, payload=item.payload) for item in items]
    expected = {row["model"]: row["metrics"]["rating"] for row in scoring.vote_board(units, votes)["rows"]}
    assert {row["model"]: row["metrics"]["rating"] for row in after["rows"]} == expected
    assert _row(after, STRONG)["metrics"]["rating"] > _row(before, STRONG)["metrics"]["rating"]
    assert after["excluded_raters"] == [{"rater": key, "label": "carol"}]
    assert after["excluded_votes"] == N_ITEMS
    # The screen still lists the excluded rater, marked so.
    assert next(row for row in after["rater_screen"] if row["rater"] == key)["excluded"] is True
    detailed = client.get(f"/api/projects/{project.slug}/leaderboard/?details=1").json()
    assert "1 rater excluded by a researcher: 24 votes left out of the ratings" in detailed["notes"]

    event = AuditEvent.objects.get(action="project_settings", project=project)
    assert event.actor == researcher and event.object_id == str(project.pk)
    assert event.details["setting"] == "arena_excluded_raters"
    assert event.details["rater"] == key and event.details["rater_label"] == "carol"
    assert event.details["excluded"] is True and event.details["excluded_raters"] == [key]
    assert event.details["screen"]["flagged"] is True
    assert event.details["screen"]["p_holm"] == body["screen"]["p_holm"] < 0.05
    project.refresh_from_db()
    assert project.settings["arena_excluded_raters"] == [key]

    # Included again: the board is the first one again, and that change is audited too.
    r = client.post(URL.format(project.slug), {"rater": key, "excluded": False}, format="json")
    assert r.status_code == 200 and r.json()["excluded_raters"] == []
    again = _board(client, project)
    assert again["rows"] == before["rows"] and again["excluded_raters"] == []
    events = list(AuditEvent.objects.filter(action="project_settings", project=project).order_by("pk"))
    assert [e.details["excluded"] for e in events] == [True, False]
    project.refresh_from_db()
    assert "arena_excluded_raters" not in project.settings


def test_asking_for_what_is_stored_changes_nothing(arena):
    project, researcher, _annotator, carol, _items = arena
    for _ in range(2):
        outcome = rater_exclusion.rater_exclusion_set(
            project=project, actor=researcher, rater=f"user:{carol.pk}", excluded=True
        )
    assert outcome["changed"] is False and outcome["excluded_raters"] == [f"user:{carol.pk}"]
    assert AuditEvent.objects.filter(action="project_settings").count() == 1
    # Including a rater who is not excluded: nothing to record either.
    outcome = rater_exclusion.rater_exclusion_set(project=project, actor=researcher, rater="ext:h0", excluded=False)
    assert outcome["changed"] is False
    assert AuditEvent.objects.filter(action="project_settings").count() == 1


def test_a_change_of_the_list_is_a_new_cache_key(arena, monkeypatch):
    project, researcher, _annotator, carol, _items = arena
    builds = []
    real = leaderboard.build

    def counting(*args, **kwargs):
        builds.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(leaderboard, "build", counting)
    first = board_cache.board(Project.objects.get(pk=project.pk), None)
    assert board_cache.board(Project.objects.get(pk=project.pk), None) == first and len(builds) == 1  # cached
    rater_exclusion.rater_exclusion_set(project=project, actor=researcher, rater=f"user:{carol.pk}", excluded=True)
    second = board_cache.board(Project.objects.get(pk=project.pk), None)
    assert len(builds) == 2  # the stale board is not served
    assert _row(second, STRONG)["metrics"]["battles"] == strong_wins(with_contrarian=False)[1]
    assert second["excluded_raters"] == [{"rater": f"user:{carol.pk}", "label": "carol"}]
    rater_exclusion.rater_exclusion_set(project=project, actor=researcher, rater=f"user:{carol.pk}", excluded=False)
    assert board_cache.board(Project.objects.get(pk=project.pk), None) == first
    assert len(builds) == 2  # the list is as it was: the first key again


@pytest.mark.parametrize(
    "body, field, words",
    [
        ([1, 2], "body", "A JSON object"),
        ({"excluded": True}, "rater", "Required"),
        ({"rater": "carol", "excluded": True}, "rater", "Got 'carol'; expected a rater key"),
        ({"rater": "user:abc", "excluded": True}, "rater", "Got 'user:abc'"),
        ({"rater": "ext:h0", "excluded": "yes"}, "excluded", "got 'yes'"),
        ({"rater": "ext:h0"}, "excluded", "missing"),
        ({"rater": "ext:h0", "excluded": True, "why": "x"}, "why", "Not a field"),
        ({"rater": "ext:nobody", "excluded": True}, "rater", "'ext:nobody' has no vote in project raters"),
    ],
)
def test_bad_bodies_are_a_400_naming_the_field(arena, body, field, words):
    project, researcher, *_ = arena
    r = session_client(researcher).post(URL.format(project.slug), body, format="json")
    assert r.status_code == 400, r.content
    assert words in r.json()["errors"][field]
    assert not AuditEvent.objects.filter(action="project_settings").exists()
    project.refresh_from_db()
    assert "arena_excluded_raters" not in project.settings


def test_who_may_exclude(arena, make_user, make_project):
    project, _researcher, annotator, carol, _items = arena
    body = {"rater": f"user:{carol.pk}", "excluded": True}
    assert session_client(annotator).post(URL.format(project.slug), body, format="json").status_code == 403
    assert session_client(make_user("stranger")).post(URL.format(project.slug), body, format="json").status_code == 404
    assert session_client(carol).post(URL.format(project.slug), body, format="json").status_code == 403
    # A project of another protocol has no rater screen: 404 naming it, for its researcher too.
    boss = make_user("boss")
    other = make_project("statuses", "status", members={boss: Role.RESEARCHER})
    r = session_client(boss).post(URL.format(other.slug), {"rater": "ext:h0", "excluded": True}, format="json")
    assert r.status_code == 404
    assert "this project's protocol has no rater screen: project statuses is status" in r.json()["detail"]
    # A bad body there gets the same 404: the protocol is looked at first, so the body is not read.
    r = session_client(boss).post(URL.format(other.slug), {"rater": 7}, format="json")
    assert r.status_code == 404 and "has no rater screen" in r.json()["detail"]
    with pytest.raises(rater_exclusion.NoRaterScreen, match="protocol has no rater screen"):
        rater_exclusion.rater_exclusion_set(project=other, actor=boss, rater="ext:h0", excluded=True)
    assert not AuditEvent.objects.filter(action="project_settings").exists()
    project.refresh_from_db()
    assert "arena_excluded_raters" not in project.settings


def test_the_setting_is_checked_like_every_project_setting():
    clean, errors = project_settings_check(protocol="arena", settings={"arena_excluded_raters": ["user:3", "ext:r"]})
    assert clean == {"arena_excluded_raters": ["ext:r", "user:3"]} and errors == {}
    _, errors = project_settings_check(protocol="arena", settings={"arena_excluded_raters": ["bob"]})
    assert "'bob': not a rater key" in errors["arena_excluded_raters"]
    _, errors = project_settings_check(protocol="status", settings={"arena_excluded_raters": []})
    assert "Only Arena (pairwise votes) projects read it." == errors["arena_excluded_raters"]


def test_a_bad_stored_list_is_read_as_none(arena):
    project, researcher, *_ = arena
    Project.objects.filter(pk=project.pk).update(settings={"arena_excluded_raters": "everyone"})
    board = _board(session_client(researcher), Project.objects.get(pk=project.pk))
    assert board["excluded_raters"] == [] and _row(board, WEAK)["metrics"]["battles"] == 6 * N_ITEMS
