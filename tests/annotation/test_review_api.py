"""Review and agreement API: queue, side-by-side detail, accept / edit / discard, one decision only."""

from __future__ import annotations

import pytest

from annotation.models import Item, Review
from annotation.queue import queue_claim_next
from annotation.selectors_agreement import item_counts, project_agreement
from tests.annotation.work_factories import m3verse_payload, make_item, make_people, valid_result
from tests.helpers.clients import session_client
from tests.helpers.timed import claim_and_submit

pytestmark = pytest.mark.django_db


def annotate(project, item, people, results):
    """Each person claims the item (it must be first in their queue) and submits a result."""
    ids = []
    for person, result in zip(people, results):
        annotation = claim_and_submit(project, person, result, ms=1000 * (len(ids) + 1)).annotation
        assert annotation.item_id == item.pk
        ids.append(annotation.pk)
    item.refresh_from_db()
    return ids


@pytest.fixture
def team():
    a, b, reviewer, reviewer2, researcher = make_people(5)
    return a, b, reviewer, reviewer2, researcher


def project_with(make_project, protocol, team, **kw):
    a, b, reviewer, reviewer2, researcher = team
    return make_project(
        "rev",
        protocol,
        annotations_per_item=2,
        members={a: "annotator", b: "annotator", reviewer: "reviewer", reviewer2: "reviewer", researcher: "researcher"},
        **kw,
    )


def test_review_queue_lists_annotated_items_with_counts(make_project, team):
    a, b, reviewer, _r2, _res = team
    project = project_with(make_project, "changeit", team)
    done = make_item(project, "done")
    make_item(project, "waiting")
    annotate(project, done, [a, b], [valid_result("box"), valid_result("box", 3)])

    r = session_client(reviewer).get("/api/projects/rev/review/")

    assert r.status_code == 200
    body = r.json()
    assert body["counts"] == {"pending": 1, "annotated": 1, "verified": 0, "discarded": 0}
    assert [(i["id"], i["external_id"], i["annotation_count"]) for i in body["items"]] == [(done.pk, "done", 2)]
    assert session_client(a).get("/api/projects/rev/review/").status_code == 403


def test_item_review_shows_truth_annotations_side_by_side_and_disagreements(make_project, team):
    a, b, reviewer, _r2, _res = team
    project = project_with(make_project, "changeit", team)
    item = make_item(project)
    ids = annotate(
        project,
        item,
        [a, b],
        [{"bbox": [0, 0, 100, 100], "state": "peeled apple"}, {"bbox": [60, 0, 100, 100], "state": "whole apple"}],
    )

    body = session_client(reviewer).get(f"/api/items/{item.pk}/review/").json()

    assert body["item"]["payload"]["state"] == "peeled apple"  # reviewers see the truth
    assert body["item"]["candidates"] == ["peeled apple", "sliced apple", "whole apple"]
    assert [(x["id"], x["annotator"], x["time_spent_ms"]) for x in body["annotations"]] == [
        (ids[0], "ann0", 1000),
        (ids[1], "ann1", 2000),
    ]
    assert body["disagreements"]["bbox"]["agree"] is False
    assert body["disagreements"]["bbox"]["min_iou"] == round(4000 / 16000, 4)
    assert body["disagreements"]["state"] == {
        "values": [{"annotation": ids[0], "value": "peeled apple"}, {"annotation": ids[1], "value": "whole apple"}],
        "agree": False,
    }
    assert session_client(a).get(f"/api/items/{item.pk}/review/").status_code == 403


def test_accept_box_updates_payload_and_records_who_and_when(make_project, team):
    a, b, reviewer, _r2, _res = team
    project = project_with(make_project, "changeit", team)
    item = make_item(project)
    ids = annotate(project, item, [a, b], [{"bbox": [0, 0, 100, 100], "state": "whole apple"}, valid_result("box")])

    r = session_client(reviewer).post(
        f"/api/items/{item.pk}/review/", {"decision": "accept", "annotation": ids[0], "comment": "ok"}, format="json"
    )

    assert r.status_code == 201
    item.refresh_from_db()
    assert (item.status, item.payload["bbox"], item.payload["state"]) == (
        "verified",
        [0.0, 0.0, 100.0, 100.0],
        "whole apple",
    )
    review = Review.objects.get()
    assert (review.reviewer, review.decision, review.accepted_annotation_id, review.comment) == (
        reviewer,
        "accept",
        ids[0],
        "ok",
    )
    assert r.json()["created_at"] == review.created_at.isoformat() and r.json()["reviewer"] == "ann2"


def test_second_reviewer_gets_409_and_nothing_changes(make_project, team):
    a, b, reviewer, reviewer2, _res = team
    project = project_with(make_project, "changeit", team)
    item = make_item(project)
    ids = annotate(project, item, [a, b], [valid_result("box"), valid_result("box", 1)])
    session_client(reviewer).post(
        f"/api/items/{item.pk}/review/", {"decision": "accept", "annotation": ids[0]}, format="json"
    )
    before = Item.objects.get(pk=item.pk).payload

    r = session_client(reviewer2).post(f"/api/items/{item.pk}/review/", {"decision": "discard"}, format="json")

    assert r.status_code == 409 and r.json()["detail"] == "This item was already reviewed by ann2: it is verified."
    item.refresh_from_db()
    assert (item.status, item.payload, Review.objects.count()) == ("verified", before, 1)


def test_accept_quintuplet_copies_all_fields(make_project, team):
    a, b, reviewer, _r2, _res = team
    project = project_with(make_project, "status", team)
    item = make_item(project)
    ids = annotate(project, item, [a, b], [valid_result("quintuplet"), valid_result("quintuplet", 1)])

    session_client(reviewer).post(
        f"/api/items/{item.pk}/review/", {"decision": "accept", "annotation": ids[1]}, format="json"
    )

    item.refresh_from_db()
    assert {k: item.payload[k] for k in valid_result("quintuplet")} == valid_result("quintuplet", 1)
    assert item.payload["image_a"] == "a.jpg" and item.status == "verified"


def test_edit_qa_fixes_question_options_and_answer(make_project, team):
    a, b, reviewer, _r2, _res = team
    project = project_with(make_project, "visualtrans", team)
    item = make_item(project)
    annotate(project, item, [a, b], [{"answer": None, "flags": ["missing_correct_option"]}, {"answer": "B"}])
    edit = {"question": "Which tool cut the bread?", "options": ["knife", "spoon", "fork", "saw"], "answer": "d"}

    r = session_client(reviewer).post(
        f"/api/items/{item.pk}/review/", {"decision": "edit", "result": edit}, format="json"
    )

    assert r.status_code == 201
    item.refresh_from_db()
    assert (item.payload["question"], item.payload["options"], item.payload["answer"], item.status) == (
        "Which tool cut the bread?",
        ["knife", "spoon", "fork", "saw"],
        "D",
        "verified",
    )
    assert Review.objects.get().result == {
        "question": "Which tool cut the bread?",
        "options": ["knife", "spoon", "fork", "saw"],
        "answer": "D",
    }


def test_bad_edit_is_400_naming_the_field_and_changes_nothing(make_project, team):
    a, b, reviewer, _r2, _res = team
    project = project_with(make_project, "visualtrans", team)
    item = make_item(project)
    annotate(project, item, [a, b], [{"answer": "A"}, {"answer": "B"}])
    client = session_client(reviewer)

    bad_answer = client.post(
        f"/api/items/{item.pk}/review/", {"decision": "edit", "result": {"answer": "Z"}}, format="json"
    )
    bad_options = client.post(
        f"/api/items/{item.pk}/review/",
        {"decision": "edit", "result": {"options": ["one"], "answer": "A"}},
        format="json",
    )
    foreign = client.post(f"/api/items/{item.pk}/review/", {"decision": "accept", "annotation": 999999}, format="json")
    bad_decision = client.post(f"/api/items/{item.pk}/review/", {"decision": "maybe"}, format="json")

    assert (bad_answer.status_code, list(bad_answer.json()["errors"])) == (400, ["answer"])
    assert (bad_options.status_code, list(bad_options.json()["errors"])) == (400, ["options"])
    assert (foreign.status_code, list(foreign.json()["errors"])) == (400, ["annotation"])
    assert (bad_decision.status_code, list(bad_decision.json()["errors"])) == (400, ["decision"])
    item.refresh_from_db()
    assert (item.status, item.payload["answer"], Review.objects.count()) == ("annotated", "C", 0)


def test_m3verse_accept_keeps_a_letter_list_and_discard_works(make_project, team):
    a, b, reviewer, _r2, _res = team
    project = project_with(make_project, "m3verse", team)
    kept, dropped = make_item(project, "kept"), make_item(project, "dropped")
    ids = annotate(project, kept, [a, b], [{"answer": ["C", "A"]}, {"answer": ["A"]}])
    annotate(project, dropped, [a, b], [{"answer": ["B"]}, {"answer": ["B"]}])
    client = session_client(reviewer)

    client.post(f"/api/items/{kept.pk}/review/", {"decision": "accept", "annotation": ids[0]}, format="json")
    r = client.post(f"/api/items/{dropped.pk}/review/", {"decision": "discard", "comment": "blurry"}, format="json")

    kept.refresh_from_db()
    dropped.refresh_from_db()
    assert (kept.payload["answer"], kept.status) == (["A", "C"], "verified")
    assert (r.status_code, dropped.status, dropped.payload["answer"]) == (201, "discarded", ["A", "C"])


def test_rating_accept_keeps_ratings_as_annotations(make_project, team):
    a, b, reviewer, _r2, _res = team
    project = project_with(make_project, "oscbench", team)
    item = make_item(project)
    before = dict(item.payload)
    ids = annotate(project, item, [a, b], [valid_result("rating"), valid_result("rating")])

    session_client(reviewer).post(
        f"/api/items/{item.pk}/review/", {"decision": "accept", "annotation": ids[0]}, format="json"
    )

    item.refresh_from_db()
    assert (item.status, item.payload) == ("verified", before)


def test_pending_item_cannot_be_reviewed(make_project, team):
    _a, _b, reviewer, _r2, _res = team
    project = project_with(make_project, "changeit", team)
    item = make_item(project)

    r = session_client(reviewer).post(f"/api/items/{item.pk}/review/", {"decision": "discard"}, format="json")

    assert r.status_code == 409 and Item.objects.get(pk=item.pk).status == "pending"


@pytest.mark.parametrize("gold", [False, True])
def test_a_reviewer_who_also_annotates_cannot_read_the_truth_of_an_item_still_out_for_answers(make_project, team, gold):
    # Roles are ranked: a reviewer can claim blind QA tasks. While the item is pending (gold items
    # always are), its review view, which carries the truth, is refused.
    _a, _b, reviewer, _r2, _res = team
    project = project_with(make_project, "visualtrans", team, settings={"gold_share": 1.0} if gold else {})
    item = make_item(project, is_gold=gold)
    task = queue_claim_next(project=project, user=reviewer)
    assert task is not None and task.item_id == item.pk

    r = session_client(reviewer).get(f"/api/items/{item.pk}/review/")

    assert r.status_code == 409 and "waiting for annotations" in r.json()["detail"]
    assert "TRUTH" not in r.content.decode() and item.payload["answer"] not in r.json().values()


def test_agreement_for_ratings_per_annotator_and_alpha(make_project, team):
    a, b, reviewer, _r2, researcher = team
    project = project_with(make_project, "oscbench", team)
    items = [make_item(project, f"v{i}") for i in range(3)]
    pairs = [(1, 2), (2, 3), (1, 3)]
    for item, (x, y) in zip(items, pairs):
        ra = {"scores": {**valid_result("rating")["scores"], "object": x}}
        rb = {"scores": {**valid_result("rating")["scores"], "object": y}}
        annotate(project, item, [a, b], [ra, rb])

    r = session_client(researcher).get("/api/projects/rev/agreement/")

    assert r.status_code == 200
    body = r.json()
    assert body["status_counts"] == {"pending": 0, "annotated": 3, "verified": 0, "discarded": 0}
    assert body["workflow"]["kind"] == "rating"
    assert body["workflow"]["criteria"]["object"] == {"alpha": -0.25, "n_items": 3}
    assert body["workflow"]["criteria"]["scene"] == {"alpha": None, "n_items": 0}
    assert body["workflow"]["criteria"]["realism"] == {"alpha": None, "n_items": 3}  # no variation: undefined
    # Per pair: 7 criteria rated by both, object differs by 1, 1 and 2 points.
    expected = round(sum(1 - d / (4 * 7) for d in (1, 1, 2)) / 3, 4)
    assert [
        (x["annotator"], x["annotations"], x["median_seconds"], x["agreement"], x["gold_accuracy"])
        for x in body["annotators"]
    ] == [("ann0", 3, 1.0, expected, None), ("ann1", 3, 2.0, expected, None)]
    assert session_client(reviewer).get("/api/projects/rev/agreement/").status_code == 200


def test_agreement_for_qa_scores_blind_answers_against_final_truth(make_project, team):
    a, b, reviewer, _r2, researcher = team
    project = project_with(make_project, "visualtrans", team)
    first, second = make_item(project, "x"), make_item(project, "y")
    annotate(project, first, [a, b], [{"answer": "C"}, {"answer": "A"}])
    annotate(project, second, [a, b], [{"answer": "B"}, {"answer": "B"}])
    session_client(reviewer).post(
        f"/api/items/{first.pk}/review/", {"decision": "edit", "result": {"answer": "A"}}, format="json"
    )

    body = session_client(researcher).get("/api/projects/rev/agreement/").json()

    # Only the verified item has a final truth (A): ann0 wrong, ann1 right. Pairs: 1 of 2 agree.
    assert body["workflow"] == {
        "answers_scored": 2,
        "accuracy": 0.5,
        "pairs": 2,
        "pairwise_agreement": 0.5,
        "truth": "verified items only",
        "kind": "qa",
        "answers_with_suggestion_left_out": 0,
    }
    assert [x["agreement"] for x in body["annotators"]] == [0.5, 0.5]


def test_agreement_for_boxes_and_a_careless_annotator(make_project, team):
    a, b, _reviewer, _r2, researcher = team
    project = project_with(make_project, "changeit", team)
    first, second = make_item(project, "x"), make_item(project, "y")
    annotate(
        project,
        first,
        [a, b],
        [{"bbox": [0, 0, 10, 10], "state": "whole apple"}, {"bbox": [1, 0, 10, 10], "state": "whole apple"}],
    )
    annotate(
        project,
        second,
        [a, b],
        [{"bbox": [0, 0, 10, 10], "state": "whole apple"}, {"bbox": [5, 0, 10, 10], "state": "whole apple"}],
    )

    body = session_client(researcher).get("/api/projects/rev/agreement/").json()

    assert body["workflow"] == {
        "items": 2,
        "pairs_with_boxes": 2,
        "mean_iou": round((9 / 11 + 1 / 3) / 2, 4),
        "consistent_share": 0.5,
        "consistent_at": 0.5,
        "kind": "box",
    }
    assert [(x["annotator"], x["agreement"], x["pairs"]) for x in body["annotators"]] == [
        ("ann0", 0.5, 2),
        ("ann1", 0.5, 2),
    ]


def test_agreement_for_quintuplets_after_normalization(make_project, team):
    a, b, _reviewer, _r2, researcher = team
    project = project_with(make_project, "status", team)
    item = make_item(project)
    other = {**valid_result("quintuplet"), "state_a": "The closed jar!", "category": "positional"}
    annotate(project, item, [a, b], [valid_result("quintuplet"), other])

    body = session_client(researcher).get("/api/projects/rev/agreement/").json()

    assert body["workflow"]["fields"] == {
        "state_a": 1.0,
        "state_b": 1.0,
        "change": 1.0,
        "change_distractors": 1.0,
        "category": 0.0,
        "difference": 1.0,
    }
    assert body["annotators"][0]["agreement"] == round(5 / 6, 4)


def test_agreement_counts_two_missing_answers_as_disagreement_in_summary_and_rows(make_project, team):
    a, b, _reviewer, _r2, researcher = team
    project = project_with(make_project, "visualtrans", team)
    first, second = make_item(project, "x"), make_item(project, "y")
    annotate(
        project,
        first,
        [a, b],
        [{"answer": None, "flags": ["insufficient_evidence"]}, {"answer": None, "flags": ["ambiguous"]}],
    )
    annotate(project, second, [a, b], [{"answer": "B"}, {"answer": "b"}])

    body = session_client(researcher).get("/api/projects/rev/agreement/").json()

    # One rule in both views: of the two pairs only the answered one agrees.
    assert (body["workflow"]["pairs"], body["workflow"]["pairwise_agreement"]) == (2, 0.5)
    assert [(x["annotator"], x["agreement"], x["pairs"]) for x in body["annotators"]] == [
        ("ann0", 0.5, 2),
        ("ann1", 0.5, 2),
    ]


def submit_as(project, person, result, ms):
    return claim_and_submit(project, person, result, ms=ms).annotation


def test_gold_items_are_counted_apart_so_progress_can_finish(make_project, team):
    a, b, _reviewer, _r2, _researcher = team
    project = project_with(make_project, "changeit", team, settings={"gold_share": 1.0})
    gold = make_item(project, "gold", is_gold=True)  # known state: peeled apple
    items = [make_item(project, f"x{i}") for i in range(2)]
    # gold_share 1: each annotator gets the gold item first, then the regular ones.
    times = {a: [1000, 4000, 2000], b: [3000, 1000, 8000]}
    for person, gold_state in ((a, "peeled apple"), (b, "whole apple")):
        assert (
            submit_as(project, person, {"bbox": [0, 0, 50, 50], "state": gold_state}, times[person][0]).item_id
            == gold.pk
        )
        for item, ms in zip(items, times[person][1:]):
            assert submit_as(project, person, {"bbox": [0, 0, 50, 50], "state": "whole apple"}, ms).item_id == item.pk

    counts = item_counts(project=project)
    figures = project_agreement(project=project)

    assert Item.objects.get(pk=gold.pk).status == "pending"  # gold is never "done"...
    assert counts == {"status_counts": {"pending": 0, "annotated": 2, "verified": 0, "discarded": 0}, "gold_items": 1}
    assert (figures["status_counts"], figures["gold_items"]) == (counts["status_counts"], 1)
    # Median time in SQL (percentile_cont): ann0 1, 2, 4 s -> 2; ann1 1, 3, 8 s -> 3. Gold scored apart,
    # and gold answers stay out of the pairwise agreement (2 regular items, both agree).
    assert [
        (
            x["annotator"],
            x["annotations"],
            x["median_seconds"],
            x["gold_items"],
            x["gold_accuracy"],
            x["agreement"],
            x["pairs"],
        )
        for x in figures["annotators"]
    ] == [("ann0", 3, 2.0, 1, 1.0, 1.0, 2), ("ann1", 3, 3.0, 1, 0.0, 1.0, 2)]
    assert figures["workflow"]["items"] == 2


def test_median_seconds_of_an_even_count_is_the_midpoint(make_project, team):
    a, b, _reviewer, _r2, _researcher = team
    project = make_project("med", "changeit", members={a: "annotator"})
    for ms in (1000, 4000, 2000, 10000):
        make_item(project)
        submit_as(project, a, valid_result("box"), ms)

    (row,) = project_agreement(project=project)["annotators"]

    assert (row["annotations"], row["median_seconds"], row["agreement"], row["pairs"]) == (4, 3.0, None, 0)


@pytest.mark.parametrize("protocol", ["changeit", "visualtrans", "status", "oscbench"])
def test_streamed_figures_match_the_agreement_endpoint(make_project, team, protocol):
    # The SQL/streamed figures give the same per-annotator and workflow numbers as the endpoint.
    a, b, reviewer, _r2, researcher = team
    project = project_with(make_project, protocol, team)
    items = [make_item(project, f"i{i}") for i in range(4)]
    variants = {
        "changeit": lambda n: {"bbox": [n * 3, 0, 10, 10], "state": "whole apple"},
        "visualtrans": lambda n: {"answer": "ABA"[n % 3], "flags": []},
        "status": lambda n: valid_result("quintuplet", n),
        "oscbench": lambda n: {"scores": {**valid_result("rating")["scores"], "object": 1 + n % 5}},
    }[protocol]
    for n, item in enumerate(items):
        annotate(project, item, [a, b], [variants(n), variants(n * 2 + 1)])
    if protocol == "visualtrans":
        session_client(reviewer).post(
            f"/api/items/{items[0].pk}/review/", {"decision": "edit", "result": {"answer": "A"}}, format="json"
        )

    body = session_client(researcher).get("/api/projects/rev/agreement/").json()
    figures = project_agreement(project=project, chunk_size=3)

    assert figures["annotators"] == body["annotators"]
    assert figures["workflow"] == body["workflow"]


@pytest.mark.parametrize("path", ["accept", "auto_verify"])
def test_a_single_answer_m3verse_item_is_verified_with_a_list_of_letters(make_project, team, path):
    # One correct option: annotators answer one letter, but the import format keeps M3-Verse
    # answers as lists, so the verified item exports and re-imports as it is.
    a, b, reviewer, _r2, _res = team
    project = project_with(make_project, "m3verse", team, settings={"auto_verify": path == "auto_verify"})
    payload = {**m3verse_payload(), "answer": ["B"]}
    item = make_item(project, payload=payload)
    ids = annotate(project, item, [a, b], [{"answer": "B", "flags": []}, {"answer": "B", "flags": []}])
    if path == "accept":
        r = session_client(reviewer).post(
            f"/api/items/{item.pk}/review/", {"decision": "accept", "annotation": ids[0]}, format="json"
        )
        assert r.status_code == 201, r.content
    item.refresh_from_db()
    assert (item.status, item.payload["answer"]) == ("verified", ["B"])
