"""Aggregated ratings (the means of several raters, as a study that published only its means gives
them) through the annotation import (annotation/importing/annotations.py): stored apart from a
rater's own rating, an item's only human rating, never on a gold item; a rater's own rating keeps
its whole-number rule."""

from __future__ import annotations

import pytest

from annotation.importing import ImportRefused, annotations_import, items_import
from annotation.importing.samples import write_sample_dataset
from annotation.models import Annotation, Item
from annotation.reliability import krippendorff_alpha
from evaluation import correlation
from protocols.oscbench import CRITERIA
from tests.helpers.files import write_lines

pytestmark = pytest.mark.django_db

# A rater's own rating, and three raters' means (no mean of consistency: none of them gave one).
OWN = dict(zip(CRITERIA, (4, 5, 3, 2, 3, None, 4, 5)))
MEANS = {**OWN, "object": 4.67, "osc_accuracy": 2.33, "osc_consistency": None}
AGGREGATE = {"raters": 3}


@pytest.fixture
def osc(make_project, tmp_path):
    project = make_project("osc", "oscbench", annotations_per_item=3)
    items_import(project=project, path=write_sample_dataset(tmp_path / "d", "oscbench", 3))
    return project


def snapshot():
    return (
        list(Annotation.objects.order_by("id").values_list("item_id", "external_rater", "result", "aggregate_raters")),
        list(Item.objects.order_by("id").values_list("annotation_count", "status")),
    )


def test_an_aggregated_rating_is_stored_as_such_and_completes_its_item(osc, tmp_path):
    line = {"item": "oscbench-00000", "rater": "study-1", "scores": MEANS, "aggregate": AGGREGATE}
    report = annotations_import(project=osc, path=write_lines(tmp_path / "m.jsonl", [line]))

    assert (report.created, report.aggregated) == (1, 1)
    stored = Annotation.objects.get()
    assert (stored.aggregate_raters, stored.result) == (3, {"scores": MEANS})
    item = Item.objects.get(external_id="oscbench-00000")
    # One row; the study's three raters are in, so the item no longer waits for raters.
    assert (item.annotation_count, item.status) == (1, "annotated")
    again = annotations_import(project=osc, path=write_lines(tmp_path / "m.jsonl", [line]))
    assert (again.created, again.unchanged) == (0, 1)


def test_a_mean_without_the_aggregate_flag_is_still_refused(osc, tmp_path):
    before = snapshot()
    with pytest.raises(ImportRefused) as exc:
        annotations_import(
            project=osc,
            path=write_lines(tmp_path / "m.jsonl", [{"item": "oscbench-00000", "rater": "r1", "scores": MEANS}]),
        )
    assert exc.value.errors == [
        "line 1: field scores.object: must be a whole number from 1 to 5",
        "line 1: field scores.osc_accuracy: must be a whole number from 1 to 5",
        "line 1: field scores.osc_consistency: may not be null (only subject and scene may be N/A)",
    ]
    assert snapshot() == before


def test_bad_aggregates_are_refused_by_field(osc, tmp_path):
    lines = [
        {"item": "oscbench-00000", "rater": "s1", "scores": MEANS, "aggregate": {"raters": 1}},
        {"item": "oscbench-00001", "rater": "s1", "scores": {**MEANS, "object": 5.5}, "aggregate": AGGREGATE},
        {"item": "oscbench-00002", "rater": "s1", "scores": {**MEANS, "object": "4.67"}, "aggregate": {"n": 3}},
    ]
    before = snapshot()
    with pytest.raises(ImportRefused) as exc:
        annotations_import(project=osc, path=write_lines(tmp_path / "m.jsonl", lines))
    raters = 'must be {"raters": N}, N the number of raters whose means the scores are (2 to 10000)'
    assert exc.value.errors == [
        f"line 1: field aggregate: {raters}",
        "line 2: field scores.object: must be the raters' mean, a number from 1 to 5, or null",
        f"line 3: field aggregate: {raters}",
        "line 3: field scores.object: must be the raters' mean, a number from 1 to 5, or null",
    ]
    assert snapshot() == before


def test_an_aggregate_is_its_items_only_human_rating(osc, tmp_path):
    annotations_import(
        project=osc,
        path=write_lines(
            tmp_path / "a.jsonl",
            [
                {"item": "oscbench-00000", "rater": "r1", "scores": OWN},
                {"item": "oscbench-00001", "rater": "study-1", "scores": MEANS, "aggregate": AGGREGATE},
            ],
        ),
    )
    before = snapshot()
    lines = [
        # Onto an item a rater has rated, and a rater onto an item with an aggregate.
        {"item": "oscbench-00000", "rater": "study-1", "scores": MEANS, "aggregate": AGGREGATE},
        {"item": "oscbench-00001", "rater": "r2", "scores": OWN},
        # Within the file: both kinds for one item, and two aggregates for another.
        {"item": "oscbench-00002", "rater": "r1", "scores": OWN},
        {"item": "oscbench-00002", "rater": "study-1", "scores": MEANS, "aggregate": AGGREGATE},
        {"item": "oscbench-00003", "rater": "study-1", "scores": MEANS, "aggregate": AGGREGATE},
        {"item": "oscbench-00003", "rater": "study-2", "scores": MEANS, "aggregate": AGGREGATE},
    ]
    with pytest.raises(ImportRefused) as exc:
        annotations_import(project=osc, path=write_lines(tmp_path / "b.jsonl", lines))
    assert exc.value.errors == [
        "line 1: field aggregate: item 'oscbench-00000' already has 1 annotation(s); an aggregated rating (the "
        "means of several raters) must be the item's only human rating",
        "line 2: field item: item 'oscbench-00001' holds an aggregated rating ('study-1', the means of 3 raters); "
        "a rater's own rating cannot be added to it",
        "line 5: field item: no item 'oscbench-00003' in project osc",
        "line 6: field aggregate: item 'oscbench-00003' already has an aggregated rating on line 5; an aggregated "
        "rating must be the item's only human rating",
        "line 6: field item: no item 'oscbench-00003' in project osc",
        "line 3: field item: item 'oscbench-00002' has an aggregated rating on line 4; a rater's own rating cannot "
        "be added to it",
    ]
    assert snapshot() == before


def test_no_aggregate_on_a_gold_item(make_project, tmp_path):
    project = make_project("gold", "oscbench")
    items_import(
        project=project,
        path=write_lines(
            tmp_path / "i.jsonl",
            [
                {
                    "id": "g1",
                    "video": "vid/o0.mp4",
                    "prompt": "Peeling an apple.",
                    "gold": True,
                    "gold_scores": {"object": 5},
                }
            ],
        ),
        media_root=write_sample_dataset(tmp_path / "d", "oscbench", 1).parent,
    )
    before = snapshot()
    with pytest.raises(ImportRefused) as exc:
        annotations_import(
            project=project,
            path=write_lines(
                tmp_path / "m.jsonl", [{"item": "g1", "rater": "s", "scores": MEANS, "aggregate": AGGREGATE}]
            ),
        )
    assert exc.value.errors == [
        "line 1: field aggregate: item 'g1' is a gold item: its ratings score each rater against the known answer, "
        "and an aggregated rating has no single rater"
    ]
    assert snapshot() == before


def test_per_rater_statistics_leave_aggregated_items_out_and_say_so(make_project, tmp_path):
    project = make_project("mixed", "oscbench", annotations_per_item=3)
    items_import(project=project, path=write_sample_dataset(tmp_path / "d", "oscbench", 6), verified=True)
    own = [
        {"item": f"oscbench-{i:05d}", "rater": f"r{r}", "scores": {**OWN, "object": 1 + (i + r // 2) % 5}}
        for i in range(4)
        for r in range(3)
    ]
    means = [{"item": f"oscbench-{i:05d}", "rater": "study", "scores": MEANS, "aggregate": AGGREGATE} for i in (4, 5)]
    annotations_import(project=project, path=write_lines(tmp_path / "a.jsonl", own + means))

    report = correlation.build(project, n_boot=50)

    human = report["human"]["object"]
    units = [[1 + (i + r // 2) % 5 for r in range(3)] for i in range(4)]
    # Alpha of the per-rater items alone (on the 1-5 scale), as if the aggregated ones were not there.
    assert human["krippendorff_alpha"] == pytest.approx(krippendorff_alpha(units, "ordinal", values=(1, 2, 3, 4, 5)))
    assert (human["n"], human["aggregated"]) == (4, 2)
    assert human["note"] == (
        "2 items whose human score is an aggregated rating (the means of their raters) are left out: "
        "Krippendorff's alpha and leave-one-rater-out need per-rater ratings"
    )
