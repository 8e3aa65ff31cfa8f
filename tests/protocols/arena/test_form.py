"""The arena's annotation form through the real API: what an annotator receives (never a model's
name, never which side is which model), the sides drawn per assignment, and a vote stored about
a and b whichever side each output was shown on."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from annotation.models import Annotation, MediaAsset, Role
from annotation.selectors import item_review_detail, workflow_form
from protocols import registry
from protocols.arena import workflow
from tests.helpers.clients import session_client

from .helpers import MODEL_NAMES, clips, make_pair, pictures

pytestmark = pytest.mark.django_db

SIDE_FIELDS = ("video_a", "video_b", "image_a", "image_b", "model_a", "model_b")


@pytest.fixture
def arena(settings, tmp_path, make_user, make_project):
    settings.MEDIA_ROOT = tmp_path / "media"
    people = [make_user(f"voter{i}") for i in range(3)]
    # No viewing time asked (test_viewing.py checks it): these votes come at once, through the API.
    project = make_project(
        "duel",
        "arena",
        members={p: Role.ANNOTATOR for p in people},
        annotations_per_item=3,
        option_seed=11,
        settings={"arena_min_view_seconds": 0},
    )
    media = clips(tmp_path)
    items = [make_pair(project, f"pair-{i}", media) for i in range(8)]
    return project, people, items, media


def claim(client, slug="duel"):
    r = client.post(f"/api/projects/{slug}/tasks/next/", {}, format="json")
    assert r.status_code == 200, r.content
    return r.json()


def test_the_annotator_receives_two_sides_and_nothing_naming_a_model(arena):
    project, people, items, media = arena
    data = claim(session_client(people[0]))
    item = data["item"]
    text = json.dumps(data)
    for name in MODEL_NAMES:
        assert name not in text
    assert not set(SIDE_FIELDS) & set(item)
    assert set(item) == {"id", "workflow", "protocol", "prompt", "kind", "left", "right", "shown"}
    assert item["kind"] == "video" and item["shown"] in ("ab", "ba")
    urls = {settings.MEDIA_URL + MediaAsset.objects.get(sha256=sha).file.name for sha in media}
    assert {item["left"]["url"], item["right"]["url"]} == urls
    # The page's form description is project-wide: criteria and votes, no item and no model.
    form = workflow_form(project=project)
    assert form["workflow"] == "pairwise"
    assert [c["key"] for c in form["criteria"]] == ["overall", "state_change"]
    assert [c["required"] for c in form["criteria"]] == [True, False]
    assert form["votes"] == ["left", "right", "tie", "both_bad"]
    assert not any(name in json.dumps(form) for name in MODEL_NAMES)


def test_the_page_names_no_model(arena, client):
    project, people, _items, _media = arena
    client.force_login(people[0])
    r = client.get("/projects/duel/annotate/")
    assert r.status_code == 200
    html = r.content.decode()
    # The template and the module come from the protocol's own folder (protocols/arena/templates,
    # protocols/arena/static), served at /static/ like the shared ones.
    assert 'src="/static/arena/arena.js"' in html and "Pairwise comparison" in html
    assert client.get("/static/arena/arena.js").status_code == 200
    for name in MODEL_NAMES:
        assert name not in html


def test_sides_are_drawn_per_assignment_and_the_vote_is_stored_about_a_and_b(arena):
    project, people, items, media = arena
    stored = []
    for person in people:
        client = session_client(person)
        data = claim(client)
        item_id, shown = data["item"]["id"], data["item"]["shown"]
        # The draw is the seeded one of (project seed, item, annotator), the same on every claim.
        assert shown == workflow.shown_order(project.option_seed, str(item_id), str(person.pk))
        # The left output is the asset of the item's side shown first.
        item = next(i for i in items if i.pk == item_id)
        left = MediaAsset.objects.get(sha256=item.media[f"video_{shown[0]}"])
        assert data["item"]["left"]["url"] == settings.MEDIA_URL + left.file.name
        r = client.post(
            f"/api/tasks/{data['task']}/submit/",
            {"result": {"shown": shown, "votes": {"overall": "left", "state_change": "right"}}},
            format="json",
        )
        assert r.status_code == 201, r.content
        stored.append((Annotation.objects.get(pk=r.json()["id"]).result, shown))
    for result, shown in stored:
        # "left" is whichever output was shown first: a when shown "ab", b when "ba".
        assert result == {"winner": shown[0], "criteria": {"state_change": shown[1]}, "shown": shown}
    # Over many assignments both orders occur, about half each (the draw is not fixed per item).
    orders = [workflow.shown_order(project.option_seed, str(i), str(u)) for i in range(200) for u in range(3)]
    assert 240 < orders.count("ab") < 360


def test_a_vote_on_images_and_refusals_name_the_field(arena, tmp_path, make_project):
    project, people, _items, _media = arena
    pics = make_project(
        "pics",
        "arena",
        members={people[0]: Role.ANNOTATOR},
        annotations_per_item=1,
        settings={"arena_min_view_seconds": 0},
    )
    make_pair(pics, "img-0", pictures(tmp_path), kind="image")
    client = session_client(people[0])
    data = claim(client, "pics")
    assert data["item"]["kind"] == "image" and data["item"]["left"]["kind"] == "image"
    url = f"/api/tasks/{data['task']}/submit/"
    for bad, field in (
        ({"shown": data["item"]["shown"], "votes": {"overall": "up"}}, "votes.overall"),
        ({"shown": "aa", "votes": {"overall": "left"}}, "shown"),
        ({"shown": data["item"]["shown"], "votes": {"state_change": "left"}}, "votes.overall"),
        ({"shown": data["item"]["shown"], "votes": {"overall": "left", "colour": "tie"}}, "votes.colour"),
    ):
        r = client.post(url, {"result": bad}, format="json")
        assert r.status_code == 400, r.content
        assert field in json.dumps(r.json())
    assert Annotation.objects.filter(item__project=pics).count() == 0
    r = client.post(url, {"result": {"shown": data["item"]["shown"], "votes": {"overall": "both_bad"}}}, format="json")
    assert r.status_code == 201
    assert Annotation.objects.get(item__project=pics).result == {"winner": "both_bad", "shown": data["item"]["shown"]}


def test_item_lines_take_two_videos_or_two_images(tmp_path):
    from annotation.importing.formats import check_item

    ok = {"id": "x", "prompt": "p", "model_a": "m1", "model_b": "m2", "video_a": "a.mp4", "video_b": "b.mp4"}
    assert not isinstance(check_item("arena", ok), list)
    mixed = {**ok, "video_b": None}
    mixed.pop("video_b")
    mixed["image_b"] = "b.png"
    errors = check_item("arena", mixed)
    assert isinstance(errors, list) and any("two videos" in e.reason for e in errors)
    same = {**ok, "model_b": "m1"}
    errors = check_item("arena", same)
    assert isinstance(errors, list) and any(e.field == "model_b" for e in errors)


def test_the_vote_words_are_the_pairwise_kit_outcomes():
    from protocols.arena.fields import WINNERS
    from protocols.kit.pairwise import OUTCOMES

    assert WINNERS == OUTCOMES
    assert registry.get("arena").workflow_module == "workflow"


def test_a_vote_claiming_other_sides_than_the_server_drew_is_refused(arena):
    """The server drew the sides: a stale or altered form reporting the other order would store
    every vote the wrong way round, so it is refused and nothing is stored."""
    project, people, items, media = arena
    client = session_client(people[0])
    data = claim(client)
    wrong = "ba" if data["item"]["shown"] == "ab" else "ab"
    r = client.post(
        f"/api/tasks/{data['task']}/submit/",
        {"result": {"shown": wrong, "votes": {"overall": "left"}}},
        format="json",
    )
    assert r.status_code == 400, r.content
    assert "shown" in json.dumps(r.json()) and wrong in json.dumps(r.json())
    assert not Annotation.objects.filter(item_id=data["item"]["id"]).exists()


def test_an_annotators_vote_about_a_and_b_is_refused(arena):
    """An annotator saw left and right, never which output is a: a vote in the item's terms (the
    shape of imports and reviewers' edits) is refused from the annotator, and nothing is stored;
    the same vote in screen terms is taken."""
    project, people, items, media = arena
    client = session_client(people[0])
    data = claim(client)
    url = f"/api/tasks/{data['task']}/submit/"
    r = client.post(url, {"result": {"winner": "a"}}, format="json")
    assert r.status_code == 400, r.content
    assert "Vote on what you were shown" in json.dumps(r.json())
    assert not Annotation.objects.filter(item_id=data["item"]["id"]).exists()
    r = client.post(url, {"result": {"shown": data["item"]["shown"], "votes": {"overall": "tie"}}}, format="json")
    assert r.status_code == 201, r.content
    assert Annotation.objects.get(item_id=data["item"]["id"]).result == {
        "winner": "tie",
        "shown": data["item"]["shown"],
    }


def test_the_annotators_form_description_holds_no_field_of_the_items_sides(arena, client):
    """The annotate page's form (and the claim's JSON) carries what an annotator needs: criteria,
    screen votes, the left/right media; never the payload's media or model fields, nor the review
    description. The review API's form has it (a reviewer may see the models)."""
    project, people, items, _media = arena
    client.force_login(people[0])
    html = client.get("/projects/duel/annotate/").content.decode()
    island = html[html.index('id="workflow-form"') :]
    form = json.loads(island[island.index(">") + 1 : island.index("</script>")])
    assert set(form) == {"workflow", "media", "criteria", "votes"}
    assert [m["field"] for m in form["media"]] == ["left", "right"]
    text = json.dumps(form) + json.dumps(claim(session_client(people[0])))
    for name in SIDE_FIELDS:
        assert name not in text
    assert workflow_form(project=project) == form
    review = item_review_detail(item=items[0])["form"]  # what the review API answers with
    assert [m["field"] for m in review["review"]["media"]] == ["video_a", "video_b", "image_a", "image_b"]
