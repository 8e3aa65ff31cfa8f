"""The task-queue HTTP API: auth, shapes, status codes, isolation, and no ground-truth leaks."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.models import Annotation, Item, Suggestion, Task
from tests.annotation.work_factories import make_item, make_people, valid_result
from tests.helpers.clients import session_client, token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(make_project):
    a, b, outsider = make_people(3)
    project = make_project("boxes", "changeit", members={a: "annotator", b: "annotator"}, annotations_per_item=2)
    other = make_project("other", "changeit", members={outsider: "annotator"})
    return project, other, a, b, outsider


def test_next_returns_the_task_with_media_urls_and_204_when_done(setup):
    project, _other, a, _b, _outsider = setup
    item = make_item(project)
    client = token_client(a)

    r = client.post("/api/projects/boxes/tasks/next/", {}, format="json")

    assert r.status_code == 200
    body = r.json()
    task = Task.objects.get()
    asset_sha = item.media["image"]
    assert body["task"] == task.pk
    assert body["draft"] == {} and body["version"] == 0
    assert body["lease_expires"] == task.lease_expires.isoformat()
    assert body["item"] == {
        "id": item.pk,
        "workflow": "box",
        "protocol": "changeit",
        "image": {
            "url": f"/media/assets/{asset_sha[:2]}/{asset_sha}.jpg",
            "width": 640,
            "height": 480,
            "kind": "image",
        },
        "object": "apple",
        "candidates": ["peeled apple", "sliced apple", "whole apple"],
        "proposed_state": "peeled apple",
        "outcomes": ["nothing_to_label", "cannot_determine"],
    }
    # A reload gets the same task back.
    assert client.post("/api/projects/boxes/tasks/next/").json()["task"] == task.pk
    r = client.post(f"/api/tasks/{task.pk}/submit/", {"result": valid_result("box")}, format="json")
    assert r.status_code == 201
    assert client.post("/api/projects/boxes/tasks/next/").status_code == 204


def test_session_auth_works_like_tokens(setup):
    project, _other, a, _b, _outsider = setup
    make_item(project)
    client = session_client(a)

    r = client.post("/api/projects/boxes/tasks/next/", {}, format="json")

    assert r.status_code == 200 and r.json()["task"] == Task.objects.get().pk


def test_annotators_only_reach_their_own_projects_and_tasks(setup):
    project, other, a, b, outsider = setup
    make_item(project)
    make_item(other)
    task = Task.objects.create(
        item=Item.objects.get(project=project), annotator=a, lease_expires=timezone.now() + timedelta(minutes=5)
    )

    assert token_client(outsider).post("/api/projects/boxes/tasks/next/").status_code == 404
    assert APIClient().post("/api/projects/boxes/tasks/next/").status_code in (401, 403)
    for path, method, data in (
        (f"/api/tasks/{task.pk}/submit/", "post", {"result": valid_result("box")}),
        (f"/api/tasks/{task.pk}/draft/", "put", {"draft": {"x": 1}, "version": 0}),
        (f"/api/tasks/{task.pk}/renew/", "post", {}),
        (f"/api/tasks/{task.pk}/skip/", "post", {}),
    ):
        assert getattr(token_client(b), method)(path, data, format="json").status_code == 404
    assert token_client(a).get("/api/projects/boxes/review/").status_code == 403
    assert token_client(a).get("/api/projects/boxes/agreement/").status_code == 403
    task.refresh_from_db()
    assert (task.status, task.draft, Annotation.objects.count(), Task.objects.count()) == ("active", {}, 0, 1)


def test_removed_member_loses_their_task(setup):
    project, _other, a, _b, _outsider = setup
    make_item(project)
    client = token_client(a)
    task_id = client.post("/api/projects/boxes/tasks/next/").json()["task"]
    project.memberships.filter(user=a).delete()

    r = client.post(f"/api/tasks/{task_id}/submit/", {"result": valid_result("box")}, format="json")

    assert r.status_code == 404 and Annotation.objects.count() == 0


def test_draft_autosave_and_stale_version_409(setup):
    project, _other, a, _b, _outsider = setup
    make_item(project)
    client = token_client(a)
    task_id = client.post("/api/projects/boxes/tasks/next/").json()["task"]

    ok = client.put(f"/api/tasks/{task_id}/draft/", {"draft": {"bbox": [1, 2, 3, 4]}, "version": 0}, format="json")
    stale = client.put(f"/api/tasks/{task_id}/draft/", {"draft": {"bbox": [0, 0, 1, 1]}, "version": 0}, format="json")
    bad = client.put(f"/api/tasks/{task_id}/draft/", {"draft": [1], "version": 1}, format="json")

    assert ok.status_code == 200 and ok.json()["version"] == 1
    assert stale.status_code == 409
    assert stale.json()["detail"].startswith("This draft was saved from another tab or window")
    assert (stale.json()["version"], stale.json()["draft"]) == (1, {"bbox": [1, 2, 3, 4]})
    assert bad.status_code == 400 and list(bad.json()["errors"]) == ["draft"]
    again = client.post("/api/projects/boxes/tasks/next/").json()
    assert (again["draft"], again["version"]) == ({"bbox": [1, 2, 3, 4]}, 1)


def test_submit_idempotency_key_gives_201_then_200_with_the_same_annotation(setup):
    project, _other, a, _b, _outsider = setup
    make_item(project)
    client = token_client(a)
    task_id = client.post("/api/projects/boxes/tasks/next/").json()["task"]
    body = {"result": {"bbox": [600, 400, 100, 200], "state": "whole apple"}, "time_spent_ms": 4100}

    first = client.post(f"/api/tasks/{task_id}/submit/", body, format="json", HTTP_IDEMPOTENCY_KEY="abc")
    second = client.post(f"/api/tasks/{task_id}/submit/", body, format="json", HTTP_IDEMPOTENCY_KEY="abc")
    third = client.post(f"/api/tasks/{task_id}/submit/", body, format="json")

    assert (first.status_code, second.status_code, third.status_code) == (201, 200, 200)
    assert first.json() == second.json() == third.json()
    # Clipped to the 640x480 image.
    assert first.json()["result"] == {"bbox": [600.0, 400.0, 40.0, 80.0], "state": "whole apple"}
    # The time is the server's (claim to submit, here milliseconds), never the client's 4100.
    assert first.json()["time_spent_ms"] == Annotation.objects.get().time_spent_ms < 4100
    assert Annotation.objects.count() == 1 and Item.objects.get().annotation_count == 1


def test_a_second_tab_with_a_different_answer_and_the_same_key_gets_409_with_the_stored_annotation(setup):
    # The page keeps its Idempotency-Key in localStorage, so two tabs of one task send the same key.
    project, _other, a, _b, _outsider = setup
    make_item(project)
    tab1, tab2 = token_client(a), session_client(a)
    task_id = tab1.post("/api/projects/boxes/tasks/next/").json()["task"]
    assert tab2.post("/api/projects/boxes/tasks/next/").json()["task"] == task_id

    first = tab1.post(
        f"/api/tasks/{task_id}/submit/", {"result": valid_result("box")}, format="json", HTTP_IDEMPOTENCY_KEY="page-key"
    )
    other = tab2.post(
        f"/api/tasks/{task_id}/submit/",
        {"result": valid_result("box", 7)},
        format="json",
        HTTP_IDEMPOTENCY_KEY="page-key",
    )
    unkeyed = tab2.post(f"/api/tasks/{task_id}/submit/", {"result": valid_result("box", 7)}, format="json")
    same = tab2.post(f"/api/tasks/{task_id}/submit/", {"result": valid_result("box")}, format="json")

    assert (first.status_code, other.status_code, unkeyed.status_code, same.status_code) == (201, 409, 409, 200)
    assert other.json()["detail"].startswith("This task was already submitted with a different answer")
    assert other.json()["annotation"] == unkeyed.json()["annotation"] == first.json() == same.json()
    assert list(Annotation.objects.values_list("result", flat=True)) == [valid_result("box")]
    assert Item.objects.get().annotation_count == 1


def test_two_annotators_may_send_the_same_idempotency_key(setup):
    project, _other, a, b, _outsider = setup
    make_item(project)
    answers = {}
    for user, variant in ((a, 0), (b, 1)):
        client = token_client(user)
        task_id = client.post("/api/projects/boxes/tasks/next/").json()["task"]
        body = {"result": valid_result("box", variant)}
        first = client.post(f"/api/tasks/{task_id}/submit/", body, format="json", HTTP_IDEMPOTENCY_KEY="1")
        retry = client.post(f"/api/tasks/{task_id}/submit/", body, format="json", HTTP_IDEMPOTENCY_KEY="1")
        assert (first.status_code, retry.status_code) == (201, 200)
        assert first.json() == retry.json()
        answers[user.username] = first.json()["result"]

    assert answers == {a.username: valid_result("box", 0), b.username: valid_result("box", 1)}
    item = Item.objects.get()
    assert (item.annotation_count, item.status) == (2, "annotated")


def test_a_retried_draft_save_is_not_a_conflict(setup):
    project, _other, a, _b, _outsider = setup
    make_item(project)
    client = token_client(a)
    task_id = client.post("/api/projects/boxes/tasks/next/").json()["task"]
    body = {"draft": {"bbox": [1, 2, 3, 4]}, "version": 0}

    first = client.put(f"/api/tasks/{task_id}/draft/", body, format="json")
    retry = client.put(f"/api/tasks/{task_id}/draft/", body, format="json")
    other = client.put(f"/api/tasks/{task_id}/draft/", {"draft": {"bbox": [0, 0, 1, 1]}, "version": 0}, format="json")

    assert (first.status_code, retry.status_code, other.status_code) == (200, 200, 409)
    assert first.json()["version"] == retry.json()["version"] == 1
    task = Task.objects.get(pk=task_id)
    assert (task.draft, task.draft_version) == ({"bbox": [1, 2, 3, 4]}, 1)


def test_bad_result_is_400_naming_the_field_and_nothing_is_written(setup):
    project, _other, a, _b, _outsider = setup
    make_item(project)
    client = token_client(a)
    task_id = client.post("/api/projects/boxes/tasks/next/").json()["task"]

    r = client.post(
        f"/api/tasks/{task_id}/submit/", {"result": {"bbox": [1, 2, 30, 40], "state": "rotten pear"}}, format="json"
    )
    missing = client.post(f"/api/tasks/{task_id}/submit/", {}, format="json")

    assert r.status_code == 400
    assert r.json()["errors"] == {"state": "Pick the state label from the listed candidates."}
    assert missing.status_code == 400 and list(missing.json()["errors"]) == ["result"]
    assert Annotation.objects.count() == 0 and Task.objects.get().status == "active"


def test_skip_then_next_gives_another_item(setup):
    project, _other, a, _b, _outsider = setup
    first, second = make_item(project), make_item(project)
    client = token_client(a)
    task_id = client.post("/api/projects/boxes/tasks/next/").json()["task"]

    r = client.post(f"/api/tasks/{task_id}/skip/")

    assert r.status_code == 200 and r.json() == {"task": task_id, "status": "skipped"}
    assert client.post("/api/projects/boxes/tasks/next/").json()["item"]["id"] == second.pk
    assert first.pk != second.pk


def test_expired_lease_item_goes_to_someone_else_and_late_submit_is_409(setup):
    project, _other, a, b, _outsider = setup
    item = make_item(project)
    task_a = token_client(a).post("/api/projects/boxes/tasks/next/").json()["task"]
    Task.objects.filter(pk=task_a).update(lease_expires=timezone.now() - timedelta(seconds=1))

    got = token_client(b).post("/api/projects/boxes/tasks/next/")
    late = token_client(a).post(f"/api/tasks/{task_a}/submit/", {"result": valid_result("box")}, format="json")
    renew = token_client(a).post(f"/api/tasks/{task_a}/renew/")

    assert got.status_code == 200 and got.json()["item"]["id"] == item.pk
    assert late.status_code == 409 and "another annotator took the item" in late.json()["detail"]
    assert renew.status_code == 409
    assert Annotation.objects.count() == 0


def test_renew_extends_the_lease(setup):
    project, _other, a, _b, _outsider = setup
    project.settings = {"lease_seconds": 30}
    project.save()
    make_item(project)
    client = token_client(a)
    task_id = client.post("/api/projects/boxes/tasks/next/").json()["task"]
    Task.objects.filter(pk=task_id).update(lease_expires=timezone.now() + timedelta(seconds=2))

    r = client.post(f"/api/tasks/{task_id}/renew/")

    assert r.status_code == 200
    assert Task.objects.get(pk=task_id).lease_expires > timezone.now() + timedelta(seconds=25)


# --- ground truth never reaches an annotator ---------------------------------------------------

TRUTH_KEYS = {
    "answer",
    "subtask",
    "scene",
    "context",
    "capabilities",
    "hallucination",
    "generator",
    "scenario",
    "action_category",
    "object_category",
    "state",
    "bbox",
    "state_a",
    "state_b",
    "change",
    "change_distractors",
    "category",
    "difference",
    "distractors",
    "gold_scores",
    "is_gold",
    "external_id",
}


def _keys(value, skip_result: bool):
    if isinstance(value, dict):
        for k, v in value.items():
            # The annotator's own words, suggestions, field names of errors, criterion names.
            if skip_result and k in ("result", "draft", "errors", "rubric"):
                continue
            yield k
            yield from _keys(v, skip_result)
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v, skip_result)


LEAK_CASES = [
    ("status", {}, valid_result("quintuplet")),
    ("changeit", {"bbox": [111, 222, 33, 44]}, {"outcome": "cannot_determine"}),
    ("visualtrans", {}, {"answer": "A", "flags": ["ambiguous"]}),
    ("visualtrans", {"format": "count", "options": [], "answer": 7919}, {"answer": 3, "flags": []}),
    ("visualtrans", {"format": "set", "options": [], "answer": ["TRUTH-bowl", "TRUTH-ladle"]}, {"answer": ["cup"]}),
    ("m3verse", {}, {"answer": ["B"], "flags": []}),
    ("oscbench", {"gold_scores": {"object": 5}}, valid_result("rating")),
]


@pytest.mark.parametrize("protocol,extra,result", LEAK_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(LEAK_CASES)])
@pytest.mark.parametrize("gold", [False, True], ids=["normal", "gold"])
def test_no_annotator_response_carries_ground_truth_or_metadata(make_project, protocol, extra, result, gold):
    from tests.annotation.work_factories import PAYLOADS

    (annotator,) = make_people(1)
    project = make_project(
        "leak",
        protocol,
        members={annotator: "annotator"},
        annotations_per_item=1,
        settings={"gold_share": 1.0} if gold else {},
    )
    payload = {**PAYLOADS[protocol](), **extra}
    make_item(project, "TRUTH-external-id-1", payload=payload, is_gold=gold)
    make_item(project, "TRUTH-external-id-2", payload=payload, is_gold=gold)
    if protocol == "status":
        Suggestion.objects.create(
            item=Item.objects.first(),
            source="job:1 tiny-vlm",
            result={"state_a": "a jar with a lid", "change": "unscrew the lid"},
        )
    client = token_client(annotator)
    responses = []
    first = client.post("/api/projects/leak/tasks/next/", {}, format="json")
    responses.append(first)
    task_id = first.json()["task"]
    responses.append(client.put(f"/api/tasks/{task_id}/draft/", {"draft": {"note": "x"}, "version": 0}, format="json"))
    responses.append(client.post(f"/api/tasks/{task_id}/renew/"))
    responses.append(client.post(f"/api/tasks/{task_id}/submit/", {"result": {"nonsense": 1}}, format="json"))
    responses.append(client.post(f"/api/tasks/{task_id}/submit/", {"result": result}, format="json"))
    second = client.post("/api/projects/leak/tasks/next/", {}, format="json")
    responses.append(second)
    responses.append(client.post(f"/api/tasks/{second.json()['task']}/skip/"))
    responses.append(client.post("/api/projects/leak/tasks/next/", {}, format="json"))
    responses.append(client.get("/api/projects/"))
    responses.append(client.get("/api/me/"))
    responses.append(client.get("/api/projects/leak/review/"))
    responses.append(client.get(f"/api/items/{Item.objects.first().pk}/review/"))
    responses.append(client.get("/api/projects/leak/agreement/"))

    assert [r.status_code for r in responses] == [200, 200, 200, 400, 201, 200, 200, 204, 200, 200, 403, 403, 403]
    for r in responses:
        text = r.content.decode()
        # Every free-text truth and metadata value of the payloads carries this marker.
        assert "TRUTH-" not in text
        # The count answer, as a number of its own (not digits inside a timestamp's fraction).
        assert not re.search(r"(?<![\d.])7919(?!\d)", text)
        body = r.json() if text else None
        # OSCBench's "scene" is a rating criterion, not metadata.
        leaked = set(_keys(body, skip_result=True)) & (TRUTH_KEYS - ({"scene"} if protocol == "oscbench" else set()))
        assert not leaked, (r.request["PATH_INFO"], leaked)
    if protocol == "changeit":
        # Boxes are not blind: the listed label comes as proposed_state for the annotator to
        # confirm or correct; the candidates stay in alphabetical order and the box is never sent.
        item = first.json()["item"]
        assert item["candidates"] == sorted(item["candidates"]) and item["proposed_state"] == "peeled apple"
        assert "bbox" not in item
    if protocol == "status":
        assert first.json()["item"]["suggestions"] == [
            {
                "source": "job:1 tiny-vlm",
                "machine_made": True,
                "result": {"state_a": "a jar with a lid", "change": "unscrew the lid"},
            }
        ]


def test_quintuplet_submit_returns_format_warnings_and_suggestions_are_marked(make_project):
    (a,) = make_people(1)
    project = make_project("quint", "status", members={a: "annotator"})
    item = make_item(project)
    Suggestion.objects.create(item=item, source="job:7 qwen", result={"change": "open the jar"})
    client = token_client(a)
    body = client.post("/api/projects/quint/tasks/next/").json()
    result = {**valid_result("quintuplet"), "state_a": "closed", "change": "the jar opens"}

    r = client.post(f"/api/tasks/{body['task']}/submit/", {"result": result}, format="json")

    assert body["item"]["suggestions"] == [
        {"source": "job:7 qwen", "machine_made": True, "result": {"change": "open the jar"}}
    ]
    assert set(body["item"]) == {"id", "workflow", "protocol", "image_a", "image_b", "suggestions"}
    assert r.status_code == 201
    assert r.json()["warnings"] == {
        "state_a": "A state description should name the object and its state, e.g. 'a slightly opened door'.",
        "change": "A change description should start with a verb, e.g. 'open the door'.",
    }


def test_rating_payload_has_criteria_na_and_the_projects_rubric(make_project):
    (a,) = make_people(1)
    project = make_project(
        "rate", "oscbench", members={a: "annotator"}, settings={"rubric": {"realism": "Our own realism wording."}}
    )
    make_item(project)

    item = token_client(a).post("/api/projects/rate/tasks/next/").json()["item"]

    assert [(c["key"], c["allows_na"]) for c in item["criteria"]] == [
        ("subject", True),
        ("object", False),
        ("action", False),
        ("osc_accuracy", False),
        ("osc_consistency", False),
        ("scene", True),
        ("realism", False),
        ("aesthetics", False),
    ]
    assert item["rubric"]["realism"] == "Our own realism wording."
    assert item["criteria"][6]["rubric"] == "Our own realism wording."
    assert item["prompt"] == "A hand slices a tomato on a board" and item["scale"] == [1, 2, 3, 4, 5]
    assert item["video"]["kind"] == "video" and item["video"]["url"].startswith("/media/assets/")


def test_qa_payloads_say_format_and_how_many_answers(make_project):
    (a,) = make_people(1)
    vt = make_project("vt", "visualtrans", members={a: "annotator"})
    m3 = make_project("m3", "m3verse", members={a: "annotator"})
    make_item(vt)
    make_item(m3)
    client = token_client(a)

    vt_item = client.post("/api/projects/vt/tasks/next/").json()["item"]
    m3_item = client.post("/api/projects/m3/tasks/next/").json()["item"]

    assert (vt_item["question"], vt_item["format"], vt_item["multiple"]) == ("Which tool was used?", "choice", False)
    assert vt_item["options"] == [
        {"letter": "A", "text": "knife"},
        {"letter": "B", "text": "spoon"},
        {"letter": "C", "text": "fork"},
    ]
    assert len(vt_item["images"]) == 2 and all(i["url"].startswith("/media/") for i in vt_item["images"])
    assert (m3_item["format"], m3_item["multiple"]) == ("choice", True)
    assert m3_item["video_before"]["kind"] == m3_item["video_after"]["kind"] == "video"
    assert m3_item["flags"] == ["missing_correct_option", "wrong_ground_truth", "ambiguous", "insufficient_evidence"]


def test_preload_with_exclude_over_the_api(setup):
    project, _other, a, _b, _outsider = setup
    first, second = make_item(project), make_item(project)
    client = token_client(a)
    current = client.post("/api/projects/boxes/tasks/next/").json()

    preload = client.post("/api/projects/boxes/tasks/next/", {"exclude": [current["task"]]}, format="json").json()
    reload = client.post("/api/projects/boxes/tasks/next/").json()

    assert (current["item"]["id"], preload["item"]["id"]) == (first.pk, second.pk)
    assert reload["task"] == current["task"]
    assert client.post("/api/projects/boxes/tasks/next/", {"exclude": ["x"]}, format="json").status_code == 400


def test_submitted_task_cannot_be_renewed_skipped_or_drafted(setup):
    project, _other, a, _b, _outsider = setup
    make_item(project)
    client = token_client(a)
    task_id = client.post("/api/projects/boxes/tasks/next/").json()["task"]
    client.post(f"/api/tasks/{task_id}/submit/", {"result": valid_result("box")}, format="json")

    codes = [
        client.post(f"/api/tasks/{task_id}/renew/").status_code,
        client.post(f"/api/tasks/{task_id}/skip/").status_code,
        client.put(f"/api/tasks/{task_id}/draft/", {"draft": {}, "version": 0}, format="json").status_code,
    ]

    assert codes == [409, 409, 409]
    assert Task.objects.get(pk=task_id).status == "submitted" and Annotation.objects.count() == 1
