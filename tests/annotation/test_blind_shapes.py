"""Blind means blind (docs/architecture.md, "Invariants"): nothing an annotator receives differs between a gold item
and a raw one, for every protocol — the next-task API's payload (keys, types, option counts and
values), the annotate page the browser renders, and the submit answer. M3-Verse's single/multiple
choice comes from the item's own `multiple` field or the project's setting, never the answer.
"""

from __future__ import annotations

import re

import pytest

from annotation.importing.formats import check_item
from annotation.models import Item
from annotation.protocols import qa_shape
from protocols import registry
from tests.annotation.work_factories import PAYLOADS, WORKFLOW, make_asset, make_people, valid_result
from tests.helpers.clients import session_client

pytestmark = pytest.mark.django_db

MEDIA_KINDS = {
    "status": {"image_a": "image", "image_b": "image"},
    "changeit": {"image": "image"},
    "visualtrans": {"images": ["image", "image"]},
    "m3verse": {"video_before": "video", "video_after": "video"},
    "oscbench": {"video": "video"},
}
GOLD_EXTRA = {
    "changeit": {"bbox": [1, 2, 30, 40]},
    "visualtrans": {"subtask": "causal"},
    "m3verse": {"context": "inter", "capabilities": ["spatial"]},
    "oscbench": {"scenario": "novel"},
}
# (protocol, changes to the gold payload, project settings)
CASES = [
    ("status", {}, {}),
    ("changeit", {}, {}),
    ("visualtrans", {}, {}),
    ("visualtrans", {"format": "count", "options": None, "answer": 4}, {}),
    ("visualtrans", {"format": "set", "options": None, "answer": ["bowl", "cup"]}, {}),
    ("m3verse", {}, {}),  # the truth lists two letters
    ("m3verse", {"answer": ["B"]}, {}),  # the truth lists one
    ("m3verse", {"answer": ["B"], "multiple": False}, {}),  # the item's own field, raw and gold alike
    ("m3verse", {"answer": ["A", "D"], "multiple": True}, {"multiple": False}),
    ("m3verse", {"answer": ["A", "D"]}, {"multiple": False}),  # the project setting (answer notwithstanding)
    ("oscbench", {}, {}),
]


def shape(value):
    """Keys, types and lengths of a JSON value (what a page could tell items apart by)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return type(value).__name__


def raw_of(protocol: str, gold: dict) -> dict:
    """The same item as a raw import line carries it: no labels (the truth) and no label metadata."""
    spec = registry.get(protocol).item_fields
    return {k: v for k, v in gold.items() if k not in spec.labels and k not in spec.labels_required}


def page_text(client, slug: str, user) -> str:
    """The annotate page as the browser gets it, without what differs per request or per user."""
    response = client.get(f"/projects/{slug}/annotate/")
    assert response.status_code == 200
    html = response.content.decode()
    html = re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", html)
    html = re.sub(r'(<meta name="csrf-token"\s+content=")[^"]*"', r"\1", html)
    html = re.sub(r'nonce="[^"]*"', "", html)
    return html.replace(f'data-user="{user.pk}"', "").replace(user.username, "")


def claim(project, user, *, gold: bool) -> dict:
    project.settings = {**project.settings, "gold_share": 1.0 if gold else 0.0}
    project.save(update_fields=["settings"])
    response = session_client(user).post(f"/api/projects/{project.slug}/tasks/next/")
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.parametrize("protocol,changes,project_settings", CASES)
def test_gold_and_raw_items_look_the_same_to_an_annotator(make_project, protocol, changes, project_settings):
    gold_payload = {
        k: v for k, v in {**PAYLOADS[protocol](), **GOLD_EXTRA.get(protocol, {}), **changes}.items() if v is not None
    }
    raw_payload = raw_of(protocol, gold_payload)
    # Both are what an import would accept: a complete gold line (OSCBench has no known answer:
    # its gold items can only be made in the database) and a raw line.
    if protocol != "oscbench":
        assert not isinstance(check_item(protocol, {"id": "g", "gold": True, **gold_payload}), list)
    assert not isinstance(check_item(protocol, {"id": "r", **raw_payload}), list)
    gold_annotator, raw_annotator = make_people(2)
    project = make_project(
        "blind",
        protocol,
        settings=dict(project_settings),
        members={gold_annotator: "annotator", raw_annotator: "annotator"},
    )
    media = {
        name: [make_asset(k).sha256 for k in kind] if isinstance(kind, list) else make_asset(kind).sha256
        for name, kind in MEDIA_KINDS[protocol].items()
    }  # the same files: only the items differ
    gold = Item.objects.create(project=project, external_id="g1", payload=gold_payload, media=media, is_gold=True)
    raw = Item.objects.create(project=project, external_id="r1", payload=raw_payload, media=media)

    seen_gold = claim(project, gold_annotator, gold=True)
    seen_raw = claim(project, raw_annotator, gold=False)

    assert (seen_gold["item"]["id"], seen_raw["item"]["id"]) == (gold.pk, raw.pk)
    assert shape(seen_gold) == shape(seen_raw)
    # progress: these two claims run under different gold shares (claim() sets it), so what is left
    # differs; annotation/selectors.py annotator_progress counts gold like any item under one share.
    per_task = ("task", "lease_expires", "progress")
    assert {k: v for k, v in seen_gold.items() if k not in (*per_task, "item")} == {
        k: v for k, v in seen_raw.items() if k not in (*per_task, "item")
    }
    assert {**seen_gold["item"], "id": None} == {**seen_raw["item"], "id": None}
    # The page the browser renders embeds nothing of the item, so it is the same too.
    gold_client, raw_client = session_client(gold_annotator), session_client(raw_annotator)
    assert page_text(gold_client, "blind", gold_annotator) == page_text(raw_client, "blind", raw_annotator)
    # The same answer is taken and echoed the same way.
    result = valid_result(WORKFLOW[protocol])
    if protocol == "changeit":
        result = {"bbox": [1, 2, 30, 40], "state": "peeled apple"}
    elif gold_payload.get("format") in ("count", "set"):
        result = {"answer": 3 if gold_payload["format"] == "count" else ["cup"], "flags": []}
    answers = [
        c.post(f"/api/tasks/{t['task']}/submit/", {"result": result}, format="json")
        for c, t in ((gold_client, seen_gold), (raw_client, seen_raw))
    ]
    assert [a.status_code for a in answers] == [201, 201], [a.content for a in answers]
    # (The time spent is the server's measure of each submit, annotation/queue/submit.py: it differs by clock.)
    ignore = ("id", "task", "item", "created_at", "time_spent_ms")
    echoed = [{k: v for k, v in a.json().items() if k not in ignore} for a in answers]
    assert echoed[0] == echoed[1]


@pytest.mark.parametrize(
    "answer,own,project_settings,expected",
    [
        (["A", "C"], None, {}, True),  # unsaid: several may be correct (docs/protocols/m3verse.md)
        (["B"], None, {}, True),
        (None, None, {}, True),
        (["A", "C"], None, {"multiple": False}, False),  # the project's setting
        (None, None, {"multiple": False}, False),
        (["B"], True, {"multiple": False}, True),  # the item's own field wins
        (None, False, {}, False),
    ],
)
def test_m3verse_multiple_comes_from_the_item_or_the_project_never_the_answer(answer, own, project_settings, expected):
    payload = {"options": ["x", "y", "z"]}
    if answer is not None:
        payload["answer"] = answer
    if own is not None:
        payload["multiple"] = own
    assert qa_shape(protocol="m3verse", payload=payload, project_settings=project_settings)["multiple"] is expected


def test_m3verse_import_takes_multiple_on_raw_lines_and_checks_it_against_a_known_answer():
    line = {
        "id": "m1",
        "video_before": "a.mp4",
        "video_after": "b.mp4",
        "question": "What?",
        "options": ["x", "y", "z"],
    }
    assert check_item("m3verse", {**line, "multiple": False}).payload["multiple"] is False
    assert [(e.field, e.reason) for e in check_item("m3verse", {**line, "multiple": "no"})] == [
        ("multiple", "must be true or false")
    ]
    refused = check_item(
        "m3verse", {**line, "multiple": False, "answer": ["A", "B"], "context": "intra", "capabilities": ["spatial"]}
    )
    assert [(e.field, e.reason) for e in refused] == [
        ("answer", "lists 2 letters but the item says multiple: false (one correct option)")
    ]
