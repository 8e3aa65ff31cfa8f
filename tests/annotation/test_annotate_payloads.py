"""What an annotator's page gets: suggestions, the listed box state, video fps, a one-text rubric,
and, on every page and response an annotator can reach, no ground truth or metadata."""

from __future__ import annotations

import pytest

from annotation.models import Item, MediaAsset, Suggestion, Task
from tests.annotation.work_factories import PAYLOADS, make_item, make_people
from tests.helpers.clients import session_client

pytestmark = pytest.mark.django_db


def next_item(client, slug: str) -> dict:
    r = client.post(f"/api/projects/{slug}/tasks/next/")
    assert r.status_code == 200
    return r.json()


# --- suggestions -------------------------------------------------------------------------------

QA_SUGGESTION_CASES = [
    # protocol, payload changes, stored suggestion answers (oldest first), expected pre-fill answers
    ("visualtrans", {}, ["B", "a"], ["A", "B"]),
    ("visualtrans", {}, ["Z", "B"], ["B"]),  # Z is no option: dropped
    ("visualtrans", {"format": "count", "options": [], "answer": 5}, [2, "4", -1, True], [4, 2]),
    (
        "visualtrans",
        {"format": "set", "options": [], "answer": ["bowl"]},
        [["cup", " lid "], "pan, spoon"],
        [["pan", "spoon"], ["cup", "lid"]],
    ),
    ("m3verse", {}, [["C", "A"], "B,D"], [["B", "D"], ["A", "C"]]),
    (
        "m3verse",
        {"answer": ["B"], "multiple": False},
        [["A", "C"], "b"],
        ["B"],
    ),  # one correct option: a pair does not fit
]


@pytest.mark.parametrize("protocol,extra,stored,expected", QA_SUGGESTION_CASES)
def test_qa_payload_carries_model_suggestions_newest_first_in_the_forms_shape(
    make_project, protocol, extra, stored, expected
):
    (a,) = make_people(1)
    project = make_project("qa", protocol, members={a: "annotator"})
    item = make_item(project, payload={**PAYLOADS[protocol](), **extra})
    for i, answer in enumerate(stored):
        Suggestion.objects.create(
            item=item,
            source=f"job:{i + 1} tiny-vlm",
            result={"answer": answer, "machine": True, "job": i + 1, "model": "tiny-vlm"},
        )

    body = next_item(session_client(a), "qa")["item"]

    kept = body["suggestions"]
    assert [s["result"] for s in kept] == [{"answer": x} for x in expected]
    assert all(s["machine_made"] is True and s["source"].endswith("tiny-vlm") for s in kept)
    # Newest first: the page pre-fills from the first.
    sources = [s["source"] for s in kept]
    assert sources == sorted(sources, reverse=True)


def test_qa_payload_without_suggestions_has_an_empty_list(make_project):
    (a,) = make_people(1)
    project = make_project("vt", "visualtrans", members={a: "annotator"})
    make_item(project)

    assert next_item(session_client(a), "vt")["item"]["suggestions"] == []


def test_quintuplet_suggestions_newest_first(make_project):
    (a,) = make_people(1)
    project = make_project("quint", "status", members={a: "annotator"})
    item = make_item(project)
    Suggestion.objects.create(item=item, source="job:1 old", result={"change": "open the jar"})
    Suggestion.objects.create(item=item, source="job:2 new", result={"change": "close the jar"})

    body = next_item(session_client(a), "quint")["item"]

    assert [s["source"] for s in body["suggestions"]] == ["job:2 new", "job:1 old"]


# --- box: the listed state to confirm or correct -----------------------------------------------


def test_box_payload_sends_the_listed_state_among_the_candidates(make_project):
    (a,) = make_people(1)
    project = make_project("boxes", "changeit", members={a: "annotator"})
    make_item(project, payload={**PAYLOADS["changeit"](), "bbox": [1, 2, 3, 4]})
    make_item(project, payload={"image": "x.jpg", "object": "apple", "distractors": ["whole apple"]})
    client = session_client(a)

    first = next_item(client, "boxes")
    client.post(f"/api/tasks/{first['task']}/submit/", {"result": {"outcome": "cannot_determine"}}, format="json")
    second = next_item(client, "boxes")

    assert first["item"]["proposed_state"] == "peeled apple"
    assert first["item"]["candidates"] == ["peeled apple", "sliced apple", "whole apple"]
    assert "bbox" not in first["item"] and "state" not in first["item"]
    assert second["item"]["proposed_state"] is None  # nothing listed: the annotator picks
    assert second["item"]["candidates"] == ["whole apple"]


# --- rating: fps and the rubric ------------------------------------------------------------------


def test_video_payload_carries_fps_and_duration(make_project):
    (a,) = make_people(1)
    project = make_project("rate", "oscbench", members={a: "annotator"})
    item = make_item(project)
    MediaAsset.objects.filter(sha256=item.media["video"]).update(fps=12.5, duration=4.0)

    video = next_item(session_client(a), "rate")["item"]["video"]

    assert (video["kind"], video["fps"], video["duration"]) == ("video", 12.5, 4.0)


def test_video_payload_fps_is_null_when_unknown_and_images_have_none(make_project):
    (a,) = make_people(1)
    rate = make_project("rate", "oscbench", members={a: "annotator"})
    boxes = make_project("boxes", "changeit", members={a: "annotator"})
    make_item(rate)
    make_item(boxes)
    client = session_client(a)

    assert next_item(client, "rate")["item"]["video"]["fps"] is None
    assert set(next_item(client, "boxes")["item"]["image"]) == {"url", "width", "height", "kind"}


def test_a_single_text_rubric_reaches_the_rating_page(make_project):
    (a,) = make_people(1)
    text = "Score what you see.\n\nA 3 means acceptable, with visible flaws."
    project = make_project("rate", "oscbench", members={a: "annotator"}, settings={"rubric": text})
    make_item(project)

    item = next_item(session_client(a), "rate")["item"]

    assert item["rubric_text"] == text
    # The per-criterion hints stay (the project's default wording).
    assert item["rubric"]["realism"].startswith("Would the video pass for real footage")


def test_a_per_criterion_rubric_has_no_single_text(make_project):
    (a,) = make_people(1)
    project = make_project("rate", "oscbench", members={a: "annotator"}, settings={"rubric": {"realism": "Own."}})
    make_item(project)

    item = next_item(session_client(a), "rate")["item"]

    assert item["rubric_text"] is None and item["rubric"]["realism"] == "Own."


# --- no ground truth on the pages and responses an annotator reaches ----------------------------

TRUTH_KEYS = {
    "answer",
    "subtask",
    "scene",
    "context",
    "capabilities",
    "hallucination",
    "is_gold",
    "gold",
    "external_id",
    "generator",
    "scenario",
    "action_category",
    "object_category",
}


def _keys(value):
    if isinstance(value, dict):
        for k, v in value.items():
            # The annotator's own words (draft, result) and model suggestions may say "answer".
            if k in ("draft", "result", "suggestions"):
                continue
            yield k
            yield from _keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v)


def assert_no_truth(text: str, body, where: str):
    assert "TRUTH-" not in text, where
    assert "86420975" not in text, where  # the count answer
    leaked = set(_keys(body)) & TRUTH_KEYS
    assert not leaked, (where, leaked)


@pytest.mark.parametrize(
    "protocol,extra",
    [
        ("visualtrans", {}),
        ("visualtrans", {"format": "count", "options": [], "answer": 86420975}),
        ("visualtrans", {"format": "set", "options": [], "answer": ["TRUTH-bowl"]}),
        ("m3verse", {"hallucination": True}),
    ],
)
@pytest.mark.parametrize("gold", [False, True], ids=["normal", "gold"])
def test_annotate_page_overview_and_409_bodies_carry_no_truth(make_project, make_user, protocol, extra, gold):
    annotator = make_user("blind")
    rival = make_user("rival")
    project = make_project(
        "blindqa",
        protocol,
        members={annotator: "annotator", rival: "annotator"},
        annotations_per_item=1,
        settings={"gold_share": 1.0} if gold else {},
        description="Answer from the media alone.",
    )
    payload = {**PAYLOADS[protocol](), **extra}
    items = [make_item(project, f"TRUTH-ext-{i}", payload=payload, is_gold=gold) for i in range(3)]
    Suggestion.objects.create(item=items[0], source="job:3 tiny-vlm", result={"answer": "B", "machine": True})
    client = session_client(annotator)
    seen = []

    page = client.get("/projects/blindqa/annotate/")
    seen.append(("annotate page", page, None))
    overview = client.get("/api/projects/blindqa/overview/")
    seen.append(("overview", overview, overview.json()))
    first = next_item(client, "blindqa")
    task_id = first["task"]
    saved = client.put(f"/api/tasks/{task_id}/draft/", {"draft": {"answer": None}, "version": 0}, format="json")
    # Another tab's save based on the same version (a different draft, so not a replay): stale.
    stale = client.put(f"/api/tasks/{task_id}/draft/", {"draft": {"note": "other tab"}, "version": 0}, format="json")
    seen.append(("stale draft", stale, stale.json()))
    # The hold runs out and the rival takes the item: the late submit is refused (a gold item takes
    # everyone's answer, so there it is stored: annotation/queue/gold.py).
    Task.objects.filter(pk=task_id).update(status="expired")
    Task.objects.create(
        item_id=first["item"]["id"], annotator=rival, status="active", lease_expires="2100-01-01T00:00:00Z"
    )
    flagged = {"answer": None, "flags": ["ambiguous"]}  # valid in every answer format
    lost = client.post(f"/api/tasks/{task_id}/submit/", {"result": flagged}, format="json")
    seen.append(("lost submit", lost, lost.json()))
    second = next_item(client, "blindqa")
    done = client.post(f"/api/tasks/{second['task']}/submit/", {"result": flagged}, format="json")
    again = client.post(f"/api/tasks/{second['task']}/skip/")
    seen.append(("skip after submit", again, again.json()))
    renew = client.post(f"/api/tasks/{second['task']}/renew/")
    seen.append(("renew after submit", renew, renew.json()))

    assert [
        page.status_code,
        overview.status_code,
        saved.status_code,
        stale.status_code,
        lost.status_code,
        done.status_code,
        again.status_code,
        renew.status_code,
    ] == [200, 200, 200, 409, 201 if gold else 409, 201, 409, 409]
    assert b"Answer from the media alone." in page.content  # the guide is there, the truth is not
    for where, response, body in seen:
        assert_no_truth(response.content.decode(), body, where)
    for task in (first, second):
        assert_no_truth(str(task), task, "tasks/next")
    assert Item.objects.filter(project=project).count() == 3
