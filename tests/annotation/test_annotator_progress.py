"""The claim says where the annotator stands (the annotate page's "n of N left"), never a
database id: each submit moves one item from left to done, gold items like any other (the figures
never tell one apart), other annotators' work shrinks what is left, and a crowd participant's
total is at most their study's number of tasks."""

from __future__ import annotations

import pytest

from annotation.models import Item
from tests.annotation.work_factories import make_item, make_people, valid_result
from tests.helpers.clients import token_client

pytestmark = pytest.mark.django_db


def claim_and_submit(client, slug: str) -> dict:
    body = client.post(f"/api/projects/{slug}/tasks/next/").json()
    submitted = client.post(f"/api/tasks/{body['task']}/submit/", {"result": valid_result("box")}, format="json")
    assert submitted.status_code == 201
    return body


@pytest.mark.parametrize("gold_share", [0.0, 1.0])
def test_each_submit_moves_one_item_from_left_to_done_gold_or_not(make_project, gold_share):
    (a,) = make_people(1)
    project = make_project(
        "boxes", "changeit", members={a: "annotator"}, annotations_per_item=1, settings={"gold_share": gold_share}
    )
    items = [make_item(project) for _ in range(3)]
    Item.objects.filter(pk=items[0].pk).update(is_gold=True)  # offered first when gold_share is 1
    client = token_client(a)

    offered = 3 if gold_share else 2  # a project without gold share never offers its gold items

    shown = [claim_and_submit(client, "boxes") for _ in range(offered)]

    assert [b["progress"] for b in shown] == [{"done": n, "left": offered - n, "capped": False} for n in range(offered)]
    assert (shown[0]["item"]["id"] == items[0].pk) is bool(gold_share)
    assert client.post("/api/projects/boxes/tasks/next/").status_code == 204


def test_other_annotators_work_leaves_less_for_this_one(make_project):
    a, b = make_people(2)
    project = make_project("boxes", "changeit", members={a: "annotator", b: "annotator"}, annotations_per_item=1)
    for _ in range(3):
        make_item(project)
    claim_and_submit(token_client(b), "boxes")

    assert token_client(a).post("/api/projects/boxes/tasks/next/").json()["progress"] == {
        "done": 0,
        "left": 2,
        "capped": False,
    }


def test_a_crowd_participant_has_at_most_their_studys_tasks(make_project, make_user):
    from annotation.studies.setup import study_create
    from tests.helpers.studies import UNGATED_STUDY, joined_participant

    researcher = make_user("res")
    project = make_project("boxes", "changeit", members={researcher: "researcher"}, annotations_per_item=1)
    for _ in range(5):
        make_item(project)
    study = study_create(project=project, actor=researcher, **UNGATED_STUDY)  # 2 tasks each
    client = token_client(joined_participant(study, "P1"))

    shown = [claim_and_submit(client, "boxes") for _ in range(2)]

    assert [b["progress"] for b in shown] == [
        {"done": 0, "left": 2, "capped": False},
        {"done": 1, "left": 1, "capped": False},
    ]


def test_beyond_the_cap_the_figure_is_a_floor_not_a_full_count(make_project, monkeypatch):
    """Every claim asks for progress, so open items are counted up to PROGRESS_CAP only (a project
    of a million pending items pays no full count); the cap is made small here to reach it."""
    from annotation import selectors

    monkeypatch.setattr(selectors, "PROGRESS_CAP", 2)
    (a,) = make_people(1)
    project = make_project("many", "changeit", members={a: "annotator"}, annotations_per_item=1)
    for _ in range(5):
        make_item(project)
    progress = token_client(a).post("/api/projects/many/tasks/next/").json()["progress"]
    assert progress == {"done": 0, "left": 3, "capped": True}
