"""A QA answer given with a model suggestion on the form is not blind: it is recorded as such and
left out of the Human row; a project can turn suggestions off to keep every answer blind."""

from __future__ import annotations

import pytest
from django.test import Client

from annotation.models import Annotation, Item, Suggestion
from evaluation import leaderboard
from tests.annotation.work_factories import make_item, make_people
from tests.helpers.clients import session_client

pytestmark = pytest.mark.django_db

RIGHT, WRONG = "C", "A"  # visualtrans_payload's answer is C


def answer_everything(project, people) -> None:
    """Each person answers every item through the JSON API: the suggested (wrong) letter when the
    form offers a suggestion, else the right one."""
    for user in people:
        client = session_client(user)
        while (r := client.post(f"/api/projects/{project.slug}/tasks/next/")).status_code == 200:
            body = r.json()
            answer = WRONG if body["item"]["suggestions"] else RIGHT
            done = client.post(
                f"/api/tasks/{body['task']}/submit/", {"result": {"answer": answer, "flags": []}}, format="json"
            )
            assert done.status_code == 201, done.content
        assert r.status_code == 204


def recorded(project) -> list[tuple[str, bool]]:
    return sorted(Annotation.objects.filter(item__project=project).values_list("item__external_id", "with_suggestion"))


def board_of(project) -> dict:
    Item.objects.filter(project=project).update(status="verified")
    return leaderboard.build(project, n_boot=50)


def test_answers_given_with_a_suggestion_on_the_form_are_left_out_of_the_human_row(make_project):
    a, b = make_people(2)
    project = make_project("vt", "visualtrans", members={a: "annotator", b: "annotator"}, annotations_per_item=2)
    hinted = make_item(project, "hinted")
    make_item(project, "plain")
    Suggestion.objects.create(item=hinted, source="job:1 tiny-vlm", result={"answer": WRONG})

    answer_everything(project, (a, b))

    assert recorded(project) == [("hinted", True), ("hinted", True), ("plain", False), ("plain", False)]
    board = board_of(project)
    human = {r["model"]: r for r in board["rows"]}["Human"]
    # Only the two blind answers (both right) on the plain item; the suggested wrong ones are out.
    assert (human["n"], human["metrics"]["overall"]) == (1, 100.0)
    assert board["human"] == {"blind_answers": 2, "items": 1, "left_out_with_suggestion": 2}


def test_a_project_with_suggestions_off_shows_none_and_keeps_every_answer_blind(make_project):
    (a,) = make_people(1)
    project = make_project("vt", "visualtrans", members={a: "annotator"}, settings={"suggestions": False})
    hinted = make_item(project, "hinted")
    Suggestion.objects.create(item=hinted, source="job:1 tiny-vlm", result={"answer": WRONG})

    answer_everything(project, (a,))  # the form offers no suggestion, so the right letter is given

    assert recorded(project) == [("hinted", False)]
    board = board_of(project)
    human = {r["model"]: r for r in board["rows"]}["Human"]
    assert (human["n"], human["metrics"]["overall"]) == (1, 100.0)
    assert board["human"]["left_out_with_suggestion"] == 0


def test_with_only_suggested_answers_there_is_no_human_row_and_the_page_says_why(make_project, make_user):
    (a,) = make_people(1)
    researcher = make_user("res")
    project = make_project("vt", "visualtrans", members={a: "annotator", researcher: "researcher"})
    hinted = make_item(project, "hinted")
    Suggestion.objects.create(item=hinted, source="job:1 tiny-vlm", result={"answer": WRONG})

    answer_everything(project, (a,))

    board = board_of(project)
    assert "Human" not in {r["model"] for r in board["rows"]}
    assert board["human"] == {"blind_answers": 0, "items": 0, "left_out_with_suggestion": 1}
    page = Client()
    page.force_login(researcher)
    html = page.get("/projects/vt/leaderboard/").content.decode()
    assert "1 answer given with a model suggestion on the form is left out (not blind)" in html


def test_a_suggestion_stored_after_the_answer_does_not_mark_it(make_project):
    (a,) = make_people(1)
    project = make_project("vt", "visualtrans", members={a: "annotator"})
    item = make_item(project, "late")

    answer_everything(project, (a,))
    Suggestion.objects.create(item=item, source="job:2 tiny-vlm", result={"answer": WRONG})

    assert recorded(project) == [("late", False)]
    assert {r["model"] for r in board_of(project)["rows"]} >= {"Human"}


def test_agreement_figures_and_auto_verify_use_blind_answers_only(make_project, make_user):
    a, b = make_people(2)
    researcher = make_user("res2")
    project = make_project(
        "vt",
        "visualtrans",
        members={a: "annotator", b: "annotator", researcher: "researcher"},
        annotations_per_item=2,
        settings={"auto_verify": True},
    )
    hinted, plain = make_item(project, "hinted"), make_item(project, "plain")
    Suggestion.objects.create(item=hinted, source="job:1 tiny-vlm", result={"answer": WRONG})

    answer_everything(project, (a, b))  # both keep the suggested letter on "hinted", both answer "plain" blind

    hinted.refresh_from_db()
    plain.refresh_from_db()
    # Two annotators agreeing on a pre-filled model answer is no blind consensus: a reviewer decides.
    assert (hinted.status, plain.status) == ("annotated", "verified")
    body = session_client(researcher).get("/api/projects/vt/agreement/").json()["workflow"]
    assert body["answers_with_suggestion_left_out"] == 2
    assert (body["pairs"], body["pairwise_agreement"]) == (1, 1.0)  # the plain item's pair only
    assert body["answers_scored"] == 2 and body["accuracy"] == 1.0
