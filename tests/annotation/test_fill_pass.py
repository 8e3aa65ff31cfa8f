"""A labelling pass over the authors' release (annotation/fill_pass.py): STATUS_Bench.json imported
as verified items without category and difference, a pass started over the API, annotators asked
for just those two fields on the pair, reviewers verifying, the values in the items' payloads and
the board's breakdown tables on a release frozen after; the release frozen before stays as it was."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from annotation.importing import items_import
from annotation.models import Annotation, AuditEvent, Item, ItemStatus, ReleaseItem
from annotation.releases import release_freeze
from evaluation import leaderboard
from tests.annotation.work_factories import make_item, make_people, valid_result
from tests.helpers.clients import token_client
from tests.protocols.status.authors import author_row, write_release

pytestmark = pytest.mark.django_db

SEED = 7


@pytest.fixture
def world(make_project, tmp_path):
    researcher, annotator, reviewer = make_people(3, prefix="fp")
    project = make_project(
        "sb",
        "status",
        option_seed=SEED,
        members={researcher: "researcher", annotator: "annotator", reviewer: "reviewer"},
    )
    rows = [author_row(i, answer=i % 4) for i in range(3)]
    path = write_release(tmp_path / "Bench", rows, images=True)
    report = items_import(project=project, path=path, verified=True)
    assert report.created == 3
    return project, researcher, annotator, reviewer


def claim(client, slug="sb"):
    r = client.post(f"/api/projects/{slug}/tasks/next/", {}, format="json")
    assert r.status_code == 200, r.content
    return r.json()


def test_a_pass_fills_category_and_difference_and_the_breakdowns_appear(world):
    project, researcher, annotator, reviewer = world
    before = release_freeze(project=project, version="v1")
    frozen = {ri.pk: json.dumps(ri.payload, sort_keys=True) for ri in ReleaseItem.objects.filter(release=before)}
    assert leaderboard.breakdown_groups(leaderboard.build(project, release_version="v1")) == {}

    lab = token_client(researcher)
    plan = lab.get("/api/projects/sb/fill-pass/").json()
    assert plan == {
        "fields": ["category", "difference"],
        "items": 3,
        "missing": {"category": 3, "difference": 3},
        "skipped_annotated": 0,
        "in_pass": 0,
    }
    r = lab.post("/api/projects/sb/fill-pass/", {}, format="json")
    assert r.status_code == 201, r.content
    assert r.json()["items"] == 3
    assert set(Item.objects.filter(project=project).values_list("status", flat=True)) == {ItemStatus.PENDING}
    assert all(i.fill_fields == ["category", "difference"] for i in Item.objects.filter(project=project))
    event = AuditEvent.objects.get(project=project, action="fill_pass")
    assert event.actor == researcher and event.details["items"] == 3
    assert sorted(event.details["external_ids"]) == ["0", "1", "2"]

    ann, rev = token_client(annotator), token_client(reviewer)
    chosen = {}
    for n in range(3):
        body = claim(ann)
        item = Item.objects.get(pk=body["item"]["id"])
        fill = body["item"]["fill"]
        assert [f["field"] for f in fill["fields"]] == ["category", "difference"]
        assert [c["value"] for c in fill["fields"][0]["choices"]] == ["positional", "functional", "other"]
        assert {c["field"]: c["value"] for c in fill["context"]} == {
            k: item.payload[k] for k in ("state_a", "state_b", "change", "change_distractors")
        }
        # Nothing else of the item: not its provenance (extra), nor anything a suggestion would add.
        text = json.dumps(body["item"])
        assert "Ego4D" not in text and "video_id" not in text and body["item"]["suggestions"] == []
        assert set(body["item"]) == {"id", "workflow", "protocol", "image_a", "image_b", "fill", "suggestions"}

        task = body["task"]
        # The whole quintuplet is refused: only the fields the pass asks.
        r = ann.post(f"/api/tasks/{task}/submit/", {"result": valid_result("quintuplet")}, format="json")
        assert r.status_code == 400
        errors = r.json()["errors"]
        assert set(errors) == {"state_a", "state_b", "change", "change_distractors"}
        assert "category, difference" in errors["state_a"]
        r = ann.post(
            f"/api/tasks/{task}/submit/", {"result": {"category": "sideways", "difference": "slight"}}, format="json"
        )
        assert r.status_code == 400 and "'sideways'" in r.json()["errors"]["category"]
        assert not Annotation.objects.filter(item=item).exists()

        answer = {"category": ["functional", "positional", "other"][n], "difference": ["slight", "significant"][n % 2]}
        r = ann.post(f"/api/tasks/{task}/submit/", {"result": answer}, format="json")
        assert r.status_code == 201, r.content
        assert r.json()["warnings"] == {}  # no note on texts the annotator was not asked for
        again = ann.post(f"/api/tasks/{task}/submit/", {"result": answer}, format="json")
        assert again.status_code == 200 and again.json()["warnings"] == {}
        chosen[item.pk] = answer

    for item_id, answer in chosen.items():
        detail = rev.get(f"/api/items/{item_id}/review/").json()
        assert detail["item"]["status"] == ItemStatus.ANNOTATED
        assert [f["key"] for f in detail["form"]["review"]["fields"]] == ["category", "difference"]
        (annotation,) = detail["annotations"]
        assert annotation["result"] == answer
        r = rev.post(
            f"/api/items/{item_id}/review/", {"decision": "accept", "annotation": annotation["id"]}, format="json"
        )
        assert r.status_code == 201, r.content
        item = Item.objects.get(pk=item_id)
        assert item.status == ItemStatus.VERIFIED
        assert (item.payload["category"], item.payload["difference"]) == (answer["category"], answer["difference"])
        assert item.payload["state_a"].startswith("a closed box")  # the rest of the payload as it was

    # The release frozen before the pass is as it was; one frozen after carries the labels.
    assert {
        ri.pk: json.dumps(ri.payload, sort_keys=True) for ri in ReleaseItem.objects.filter(release=before)
    } == frozen
    assert leaderboard.breakdown_groups(leaderboard.build(project, release_version="v1")) == {}
    release_freeze(project=project, version="v2")
    groups = leaderboard.breakdown_groups(leaderboard.build(project, release_version="v2"))
    assert list(groups) == [
        "category:positional",
        "category:functional",
        "category:other",
        "difference:slight",
        "difference:significant",
    ]
    # Nothing left to fill: a second pass is refused, nothing changes.
    r = lab.post("/api/projects/sb/fill-pass/", {}, format="json")
    assert r.status_code == 409 and "nothing to fill" in r.json()["errors"]["items"]


def test_a_reviewer_edit_takes_only_the_fields_asked(world):
    project, researcher, annotator, reviewer = world
    r = token_client(researcher).post("/api/projects/sb/fill-pass/", {"fields": ["difference"]}, format="json")
    assert r.status_code == 201 and r.json()["missing"] == {"difference": 3}
    ann, rev = token_client(annotator), token_client(reviewer)
    body = claim(ann)
    assert [f["field"] for f in body["item"]["fill"]["fields"]] == ["difference"]
    r = ann.post(f"/api/tasks/{body['task']}/submit/", {"result": {"category": "other"}}, format="json")
    assert r.status_code == 400 and set(r.json()["errors"]) == {"category", "difference"}
    r = ann.post(f"/api/tasks/{body['task']}/submit/", {"result": {"difference": "slight"}}, format="json")
    assert r.status_code == 201
    item_id = body["item"]["id"]
    url = f"/api/items/{item_id}/review/"
    r = rev.post(url, {"decision": "edit", "result": {"difference": "huge"}}, format="json")
    assert r.status_code == 400 and "difference" in r.json()["errors"]
    r = rev.post(url, {"decision": "edit", "result": {"difference": "significant", "state_a": "x"}}, format="json")
    assert r.status_code == 400 and "state_a" in r.json()["errors"]
    assert Item.objects.get(pk=item_id).status == ItemStatus.ANNOTATED
    r = rev.post(url, {"decision": "edit", "result": {"difference": "significant"}}, format="json")
    assert r.status_code == 201, r.content
    item = Item.objects.get(pk=item_id)
    assert item.status == ItemStatus.VERIFIED
    assert item.payload["difference"] == "significant" and "category" not in item.payload


def test_agreeing_annotators_auto_verify_a_pass_item(make_project, tmp_path):
    researcher, a, b = make_people(3, prefix="av")
    project = make_project(
        "avp",
        "status",
        members={researcher: "researcher", a: "annotator", b: "annotator"},
        annotations_per_item=2,
        settings={"auto_verify": True},
    )
    items_import(project=project, path=write_release(tmp_path / "B", [author_row(1)], images=True), verified=True)
    token_client(researcher).post("/api/projects/avp/fill-pass/", {}, format="json")
    for user in (a, b):
        client = token_client(user)
        body = claim(client, "avp")
        answer = {"category": "positional", "difference": "slight"}
        assert client.post(f"/api/tasks/{body['task']}/submit/", {"result": answer}, format="json").status_code == 201
    item = Item.objects.get(project=project)
    assert item.status == ItemStatus.VERIFIED
    assert (item.payload["category"], item.payload["difference"]) == ("positional", "slight")


def test_refusals_change_nothing(world, make_project):
    project, researcher, annotator, _reviewer = world
    lab = token_client(researcher)
    for body, field in (
        ({"fields": ["state_a"]}, "fields"),
        ({"fields": []}, "fields"),
        ({"fields": "colour"}, "fields"),
        ({"fields": ["category"], "when": "now"}, "when"),
    ):
        r = lab.post("/api/projects/sb/fill-pass/", body, format="json")
        assert r.status_code == 400, body
        assert field in r.json()["errors"]
    assert (
        "Expected a list of one or more of: category, difference"
        in lab.post("/api/projects/sb/fill-pass/", {"fields": []}, format="json").json()["errors"]["fields"]
    )
    assert set(Item.objects.filter(project=project).values_list("status", flat=True)) == {ItemStatus.VERIFIED}
    assert not AuditEvent.objects.filter(action="fill_pass").exists()

    # A protocol that declares no fill fields (boxes) has no pass.
    boxes = make_project("bx", "changeit", members={researcher: "researcher"})
    make_item(boxes).__class__.objects.filter(project=boxes).update(status=ItemStatus.VERIFIED)
    for method in ("get", "post"):
        r = getattr(lab, method)("/api/projects/bx/fill-pass/", {}, format="json")
        assert r.status_code == 400 and "no label fields" in r.json()["errors"]["protocol"]
    assert Item.objects.get(project=boxes).status == ItemStatus.VERIFIED

    # Roles: an annotator may not start one.
    assert token_client(annotator).post("/api/projects/sb/fill-pass/", {}, format="json").status_code == 403


def test_gold_and_annotated_items_stay_out(make_project):
    (researcher,) = make_people(1, prefix="go")
    project = make_project("go", "status", members={researcher: "researcher"})
    bare = {k: v for k, v in make_item(project).payload.items() if k not in ("category", "difference")}
    Item.objects.filter(project=project).update(payload=bare, status=ItemStatus.VERIFIED)
    gold = make_item(project, payload=bare, is_gold=True)
    Item.objects.filter(pk=gold.pk).update(status=ItemStatus.VERIFIED)
    done = make_item(project, payload=bare)
    Annotation.objects.create(item=done, annotator=researcher, result=valid_result("quintuplet"))
    Item.objects.filter(pk=done.pk).update(status=ItemStatus.VERIFIED, annotation_count=1)
    labelled = make_item(project)  # carries both fields
    Item.objects.filter(pk=labelled.pk).update(status=ItemStatus.VERIFIED)

    report = token_client(researcher).post("/api/projects/go/fill-pass/", {}, format="json").json()

    assert (report["items"], report["skipped_annotated"]) == (1, 1)
    statuses = dict(Item.objects.filter(project=project).values_list("pk", "status"))
    assert statuses[gold.pk] == statuses[done.pk] == statuses[labelled.pk] == ItemStatus.VERIFIED


def test_the_command_plans_starts_and_checks_its_actor(world):
    project, researcher, annotator, _reviewer = world
    out = __import__("io").StringIO()
    call_command("start_fill_pass", "sb", "--dry-run", stdout=out)
    assert json.loads(out.getvalue())["items"] == 3
    assert set(Item.objects.filter(project=project).values_list("status", flat=True)) == {ItemStatus.VERIFIED}
    with pytest.raises(CommandError, match="not a researcher"):
        call_command("start_fill_pass", "sb", "--actor", annotator.username, stdout=out)
    with pytest.raises(CommandError, match="Not a field a labelling pass fills: 'state_a'"):
        call_command("start_fill_pass", "sb", "--fields", "state_a", stdout=out)
    out = __import__("io").StringIO()
    call_command("start_fill_pass", "sb", "--fields", "category", "--actor", researcher.username, stdout=out)
    assert json.loads(out.getvalue())["missing"] == {"category": 3}
    event = AuditEvent.objects.get(action="fill_pass")
    assert event.details["source"] == "cli" and event.actor == researcher


def test_the_page_shows_the_plan_and_starts_a_pass(world):
    from tests.helpers.clients import logged_in

    project, researcher, _annotator, _reviewer = world
    client = logged_in(researcher)
    settings_page = client.get("/projects/sb/settings/")
    assert b"/projects/sb/settings/labelling-pass/" in settings_page.content
    page = client.get("/projects/sb/settings/labelling-pass/")
    assert page.status_code == 200 and b'id="fill-pass-count"><b>3</b>' in page.content
    refused = client.post("/projects/sb/settings/labelling-pass/", {"fields": ["state_b"]})
    assert refused.status_code == 400 and b"Not a field a labelling pass fills" in refused.content
    r = client.post("/projects/sb/settings/labelling-pass/", {"fields": ["category", "difference"]})
    assert r.status_code == 302
    assert Item.objects.filter(project=project, status=ItemStatus.PENDING).count() == 3
    after = client.get("/projects/sb/settings/labelling-pass/")
    assert b"Labelling pass started: 3 verified item(s)" in after.content
