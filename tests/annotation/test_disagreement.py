"""Adjudication: items whose annotators disagree beyond the project's thresholds are marked when they
become annotated, come first in the review queue, show the disagreement; a box edit keeps to the
candidate labels."""

from __future__ import annotations

import json

import pytest

from annotation.amend import annotation_amend
from annotation.disagreement import Thresholds, field_label, find_disagreement, thresholds_from
from annotation.importing import annotations_import
from annotation.models import Item, Review
from annotation.queue import annotation_submit, queue_claim_next
from annotation.selectors import review_queue_for
from tests.annotation.work_factories import make_item, make_people, valid_result
from tests.helpers.clients import session_client
from tests.helpers.work import RATING_SCORES, rating_result

pytestmark = pytest.mark.django_db


@pytest.fixture
def team():
    return make_people(3)


def project_for(make_project, protocol, team, **settings):
    a, b, reviewer = team
    return make_project(
        "adj",
        protocol,
        annotations_per_item=2,
        settings=settings,
        members={a: "annotator", b: "annotator", reviewer: "reviewer"},
    )


def annotate(project, item, people, results):
    ids = []
    for person, result in zip(people, results):
        task = queue_claim_next(project=project, user=person)
        assert task.item_id == item.pk
        ids.append(annotation_submit(task_id=task.pk, user=person, result=result).annotation.pk)
    item.refresh_from_db()
    return ids


# --- each kind, through the submit that completes the item --------------------------------------


def test_different_qa_answers_mark_the_item_and_equal_ones_do_not(make_project, team):
    a, b, _rev = team
    project = project_for(make_project, "visualtrans", team)
    split, same = make_item(project, "split"), make_item(project, "same")

    ids = annotate(project, split, [a, b], [{"answer": "A"}, {"answer": "b"}])
    annotate(project, same, [a, b], [{"answer": "C"}, {"answer": "c"}])

    assert split.status == "annotated"
    assert split.disagreement == {
        "fields": [
            {
                "field": "answer",
                "kind": "answer",
                "values": [{"annotation": ids[0], "value": "A"}, {"annotation": ids[1], "value": "B"}],
            }
        ]
    }
    assert (same.status, same.disagreement) == ("annotated", None)


def test_a_rating_spread_of_two_marks_the_criterion_and_one_point_does_not(make_project, team):
    a, b, _rev = team
    project = project_for(make_project, "oscbench", team)
    wide, close, na = make_item(project, "wide"), make_item(project, "close"), make_item(project, "na")

    ids = annotate(project, wide, [a, b], [rating_result(realism=1, object=5), rating_result(realism=3, object=4)])
    annotate(project, close, [a, b], [rating_result(realism=2), rating_result(realism=3)])
    na_ids = annotate(project, na, [a, b], [rating_result(scene=None), rating_result(scene=4)])

    assert wide.disagreement == {
        "fields": [
            {
                "field": "scores.realism",
                "kind": "spread",
                "spread": 2,
                "values": [{"annotation": ids[0], "value": 1}, {"annotation": ids[1], "value": 3}],
            }
        ]
    }
    assert close.disagreement is None
    assert na.disagreement == {
        "fields": [
            {
                "field": "scores.scene",
                "kind": "na",
                "values": [{"annotation": na_ids[0], "value": None}, {"annotation": na_ids[1], "value": 4}],
            }
        ]
    }


def test_the_project_sets_the_rating_spread(make_project, team):
    a, b, _rev = team
    project = project_for(make_project, "oscbench", team, disagreement={"rating_spread": 3})
    item = make_item(project)

    annotate(project, item, [a, b], [rating_result(realism=1), rating_result(realism=3)])

    assert item.disagreement is None


def test_boxes_below_iou_half_or_with_different_states_are_marked(make_project, team):
    a, b, _rev = team
    project = project_for(make_project, "changeit", team)
    apart, close, states, outcome = (make_item(project, n) for n in ("apart", "close", "states", "outcome"))

    ids = annotate(
        project,
        apart,
        [a, b],
        [{"bbox": [0, 0, 100, 100], "state": "peeled apple"}, {"bbox": [60, 0, 100, 100], "state": "peeled apple"}],
    )
    annotate(
        project,
        close,
        [a, b],
        [{"bbox": [0, 0, 100, 100], "state": "peeled apple"}, {"bbox": [10, 0, 100, 100], "state": "peeled apple"}],
    )
    annotate(
        project,
        states,
        [a, b],
        [{"bbox": [0, 0, 100, 100], "state": "peeled apple"}, {"bbox": [0, 0, 100, 100], "state": "whole apple"}],
    )
    annotate(
        project, outcome, [a, b], [{"bbox": [0, 0, 100, 100], "state": "peeled apple"}, {"outcome": "nothing_to_label"}]
    )

    # IoU of the first pair: 40x100 overlap / (2 * 100x100 - 4000) = 0.25.
    assert apart.disagreement == {
        "fields": [
            {
                "field": "bbox",
                "kind": "iou",
                "min_iou": 0.25,
                "values": [
                    {"annotation": ids[0], "value": [0.0, 0.0, 100.0, 100.0]},
                    {"annotation": ids[1], "value": [60.0, 0.0, 100.0, 100.0]},
                ],
            }
        ]
    }
    assert close.disagreement is None
    assert [(f["field"], f["kind"]) for f in states.disagreement["fields"]] == [("state", "state")]
    assert [(f["field"], f["kind"], [v["value"] for v in f["values"]]) for f in outcome.disagreement["fields"]] == [
        ("outcome", "outcome", ["box", "nothing_to_label"])
    ]


def test_the_project_sets_the_box_iou(make_project, team):
    a, b, _rev = team
    project = project_for(make_project, "changeit", team, disagreement={"box_iou": 0.2})
    item = make_item(project)

    annotate(
        project,
        item,
        [a, b],
        [{"bbox": [0, 0, 100, 100], "state": "peeled apple"}, {"bbox": [60, 0, 100, 100], "state": "peeled apple"}],
    )

    assert item.disagreement is None


def test_different_quintuplet_fields_are_marked_after_normalisation(make_project, team):
    a, b, _rev = team
    project = project_for(make_project, "status", team)
    item, spelled = make_item(project, "item"), make_item(project, "spelled")
    other = {**valid_result("quintuplet"), "category": "positional", "change": "unscrew the lid"}

    annotate(project, item, [a, b], [valid_result("quintuplet"), other])
    annotate(
        project,
        spelled,
        [a, b],
        [valid_result("quintuplet"), {**valid_result("quintuplet"), "state_a": "The closed JAR!"}],
    )

    assert [(f["field"], [v["value"] for v in f["values"]]) for f in item.disagreement["fields"]] == [
        ("change", ["open the jar", "unscrew the lid"]),
        ("category", ["functional", "positional"]),
    ]
    assert spelled.disagreement is None


def test_the_project_chooses_the_quintuplet_fields(make_project, team):
    a, b, _rev = team
    project = project_for(make_project, "status", team, disagreement={"quintuplet_fields": ["category", "difference"]})
    item = make_item(project)

    annotate(
        project, item, [a, b], [valid_result("quintuplet"), {**valid_result("quintuplet"), "change": "unscrew the lid"}]
    )

    assert item.disagreement is None


def test_thresholds_fall_back_to_defaults_on_bad_settings():
    assert thresholds_from({}) == Thresholds()
    assert (
        thresholds_from({"disagreement": {"rating_spread": "2", "box_iou": 7, "quintuplet_fields": ["nope"]}})
        == Thresholds()
    )
    assert thresholds_from(
        {"disagreement": {"rating_spread": 1, "quintuplet_fields": ["difference", "change"]}}
    ) == Thresholds(rating_spread=1, quintuplet_fields=("change", "difference"))
    assert find_disagreement("qa", [(1, {"answer": "A"})]) is None  # one annotation: nothing to compare


# --- the review queue and page ----------------------------------------------------------------------


def test_disputed_items_come_first_in_the_review_queue_then_oldest_first(make_project, team):
    a, b, reviewer = team
    project = project_for(make_project, "visualtrans", team)
    items = [make_item(project, f"q{i}") for i in range(4)]
    for i, item in enumerate(items):
        second = "B" if i in (1, 3) else "A"
        annotate(project, item, [a, b], [{"answer": "A"}, {"answer": second}])

    queue = review_queue_for(project=project)
    body = session_client(reviewer).get("/api/projects/adj/review/").json()

    expected = [items[1].pk, items[3].pk, items[0].pk, items[2].pk]
    assert [row["id"] for row in queue["items"]] == expected
    assert [(row["id"], row["disagreement"], row["disagreement_labels"]) for row in body["items"]] == [
        (items[1].pk, ["answer"], ["Answer"]),
        (items[3].pk, ["answer"], ["Answer"]),
        (items[0].pk, [], []),
        (items[2].pk, [], []),
    ]


def test_the_queue_names_disputed_fields_as_the_annotation_form_does(make_project, team):
    a, b, reviewer = team
    rating = project_for(make_project, "oscbench", team)
    video = make_item(rating, "video")
    annotate(rating, video, [a, b], [rating_result(osc_accuracy=5, scene=4), rating_result(osc_accuracy=1, scene=None)])
    status = make_project(
        "adj-q", "status", annotations_per_item=2, members={a: "annotator", b: "annotator", reviewer: "reviewer"}
    )
    pair = make_item(status, "pair")
    other = {
        **valid_result("quintuplet"),
        "change_distractors": ["drop it", "kick it", "paint it"],
        "category": "other",
    }
    annotate(status, pair, [a, b], [valid_result("quintuplet"), other])

    rows = {
        slug: session_client(reviewer).get(f"/api/projects/{slug}/review/").json()["items"] for slug in ("adj", "adj-q")
    }

    assert [(r["disagreement"], r["disagreement_labels"]) for r in rows["adj"]] == [
        (["scores.osc_accuracy", "scores.scene"], ["State change: accuracy", "Scene"])
    ]
    assert [(r["disagreement"], r["disagreement_labels"]) for r in rows["adj-q"]] == [
        (["change_distractors", "category"], ["Wrong changes", "Category"])
    ]


def test_field_labels_fall_back_to_the_key():
    assert field_label("box", "bbox") == "Box"
    assert field_label("qa", "answer") == "Answer"
    assert field_label("rating", "scores.action", {"action": "Action"}) == "Action"
    assert field_label("rating", "scores.new_criterion", {"action": "Action"}) == "new_criterion"
    assert field_label("box", "something_new") == "something_new"


def test_the_review_detail_shows_the_disagreement(make_project, team):
    a, b, reviewer = team
    project = project_for(make_project, "oscbench", team)
    item = make_item(project)
    ids = annotate(project, item, [a, b], [rating_result(action=5), rating_result(action=1)])

    body = session_client(reviewer).get(f"/api/items/{item.pk}/review/").json()

    assert body["disagreement"] == {
        "fields": [
            {
                "field": "scores.action",
                "label": "Action",
                "kind": "spread",
                "spread": 4,
                "values": [{"annotation": ids[0], "value": 5}, {"annotation": ids[1], "value": 1}],
            }
        ]
    }
    # The comparison table's rows, labelled as the rating form labels its criteria.
    assert body["field_labels"]["scores.osc_accuracy"] == "State change: accuracy"
    assert list(body["field_labels"]) == [
        f"scores.{c}"
        for c in ("subject", "object", "action", "osc_accuracy", "osc_consistency", "scene", "realism", "aesthetics")
    ]
    assert body["reopened"] is None


def test_an_amendment_that_settles_the_disagreement_clears_the_mark(make_project, team):
    a, b, _rev = team
    project = project_for(make_project, "visualtrans", team)
    item = make_item(project)
    ids = annotate(project, item, [a, b], [{"answer": "A"}, {"answer": "B"}])
    assert item.disagreement is not None

    annotation_amend(annotation_id=ids[1], user=b, result={"answer": "A"})

    item.refresh_from_db()
    assert item.disagreement is None


def test_imported_ratings_that_disagree_mark_their_items(make_project, team, tmp_path):
    project = project_for(make_project, "oscbench", team)
    item = make_item(project, "vid")
    lines = [
        {"item": "vid", "rater": "r1", "scores": {**RATING_SCORES, "aesthetics": 1}},
        {"item": "vid", "rater": "r2", "scores": {**RATING_SCORES, "aesthetics": 5}},
    ]
    path = tmp_path / "ratings.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))

    annotations_import(project=project, path=path)

    item.refresh_from_db()
    assert item.status == "annotated"
    assert [(f["field"], f["spread"]) for f in item.disagreement["fields"]] == [("scores.aesthetics", 4)]


# --- box review: the state comes from the candidates -------------------------------------------------


def test_a_box_edit_refuses_a_state_outside_the_candidate_labels_and_changes_nothing(make_project, team):
    a, b, reviewer = team
    project = project_for(make_project, "changeit", team, state_labels={"apple": ["rotten apple"]})
    item = make_item(project)
    annotate(project, item, [a, b], [valid_result("box"), valid_result("box", 80)])
    before = dict(item.payload)
    client = session_client(reviewer)

    free = client.post(
        f"/api/items/{item.pk}/review/",
        {"decision": "edit", "result": {"bbox": [5, 5, 50, 50], "state": "a purple door"}},
        format="json",
    )

    assert (free.status_code, list(free.json()["errors"])) == (400, ["state"])
    item.refresh_from_db()
    assert (item.status, item.payload, Review.objects.count()) == ("annotated", before, 0)

    # A label of the project's own list for the object is a candidate, so it is taken.
    listed = client.post(
        f"/api/items/{item.pk}/review/",
        {"decision": "edit", "result": {"bbox": [5, 5, 50, 50], "state": "rotten apple"}},
        format="json",
    )

    assert listed.status_code == 201
    item = Item.objects.get(pk=item.pk)
    assert (item.status, item.payload["bbox"], item.payload["state"]) == (
        "verified",
        [5.0, 5.0, 50.0, 50.0],
        "rotten apple",
    )
