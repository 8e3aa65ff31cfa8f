"""OSCBench gold items: imported with their expected rating (`gold_scores`: criterion -> 1..5, or
null where N/A is expected), offered by the queue like every gold item, and a rating of one is
right when each expected score is met within protocols/oscbench GOLD_TOLERANCE (N/A exactly where
N/A is expected) — the same verdict in a crowd study's gold accuracy and in the project's
agreement figures, for submitted and imported ratings alike. Refused imports write nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotation.agreement import gold_correct
from annotation.importing import ImportRefused, annotations_import, items_import
from annotation.importing.formats import check_item
from annotation.importing.samples import make_video, sample_line
from annotation.models import Annotation, Item, ItemStatus, MediaAsset, Role
from annotation.selectors_agreement import project_agreement
from annotation.studies.setup import study_create
from annotation.studies.table import participant_rows
from protocols.oscbench import CRITERIA as OSC_CRITERIA
from protocols.oscbench import GOLD_TOLERANCE as RATING_GOLD_TOLERANCE
from tests.helpers.files import write_lines
from tests.helpers.studies import GOLD_GATED_STUDY, do_tasks, open_study_link, participant_user, pid

from .work_factories import valid_result

pytestmark = pytest.mark.django_db

GOLD = {"scene": None, "osc_accuracy": 2, "object": 4}  # a subset, out of criteria order
RIGHT = valid_result("rating")  # object 5, osc_accuracy 3, scene N/A: each within one point
OFF_BY_TWO = {"scores": {**RIGHT["scores"], "object": 2}}
SCENE_GIVEN = {"scores": {**RIGHT["scores"], "scene": 4}}  # a score where N/A is expected


def osc_line(i: int, **changes) -> dict:
    line = sample_line("oscbench", i, media={"video": "clip.mp4"}) | changes
    return {k: v for k, v in line.items() if v is not None}


@pytest.fixture
def media(tmp_path) -> Path:
    make_video(tmp_path / "clip.mp4", 1)
    return tmp_path


def refused(project, path) -> list[str]:
    with pytest.raises(ImportRefused) as exc:
        items_import(project=project, path=path)
    return exc.value.errors


# --- the import ------------------------------------------------------------------------------------


def test_gold_oscbench_items_import_pending_with_their_expected_scores(make_project, media):
    project = make_project("osc", "oscbench")
    path = write_lines(
        media / "items.jsonl", [osc_line(0, gold=True, gold_scores=GOLD), osc_line(1), osc_line(2, gold=False)]
    )

    report = items_import(project=project, path=path, verified=True)

    assert report.by_status == {"pending": 1, "verified": 2}  # gold stays pending, also with --verified
    gold = Item.objects.get(external_id="oscbench-00000")
    assert (gold.is_gold, gold.status, gold.annotation_count) == (True, ItemStatus.PENDING, 0)
    protocol_fields = {k: v for k, v in osc_line(0).items() if k not in ("id", "split", "tags")}
    assert gold.payload == {**protocol_fields, "gold_scores": {"object": 4, "osc_accuracy": 2, "scene": None}}
    assert not Item.objects.filter(is_gold=False, payload__has_key="gold_scores").exists()
    # Stored in criteria order.
    checked = check_item("oscbench", osc_line(0, gold=True, gold_scores=GOLD))
    assert list(checked.payload["gold_scores"]) == ["object", "osc_accuracy", "scene"]
    assert (checked.gold, checked.complete) == (True, False)
    # The same file again changes nothing; other expected scores for the same id are refused.
    assert items_import(project=project, path=path).unchanged == 3
    changed = write_lines(media / "changed.jsonl", [osc_line(0, gold=True, gold_scores={**GOLD, "object": 3})])
    assert refused(project, changed) == [
        "line 1: field id: item 'oscbench-00000' already exists in the project with different content (payload)"
        "; import with update (import_items --update) to replace the content of existing items"
    ]


def test_gold_oscbench_lines_are_refused_by_line_and_field_and_nothing_is_written(make_project, media, _media_root):
    project = make_project("osc", "oscbench")
    lines = [
        osc_line(0, gold=True),
        osc_line(1, gold_scores={"object": 4}),
        osc_line(2, gold=False, gold_scores={"object": 4}),
        osc_line(3, gold=True, gold_scores={"object": 6}),
        osc_line(4, gold=True, gold_scores={"object": True}),
        osc_line(5, gold=True, gold_scores={"realism": None}),
        osc_line(6, gold=True, gold_scores={"mood": 3}),
        osc_line(7, gold=True, gold_scores={}),
        osc_line(8, gold=True, gold_scores=[4, 4]),
        osc_line(9, gold="yes", gold_scores={"object": 4}),
        osc_line(10, gold=True, gold_scores={"object": 4.0}),
    ]
    criteria = ", ".join(OSC_CRITERIA)
    shape = (
        f"must be an object criterion -> a whole number from 1 to 5 (null for N/A: subject and scene only), naming "
        f"at least one of {criteria}"
    )

    assert refused(project, write_lines(media / "items.jsonl", lines)) == [
        "line 1: field gold: a gold oscbench item needs its known answer: give gold_scores too, or drop gold",
        'line 2: field gold_scores: only a gold item carries gold_scores (its known answer): add "gold": true, '
        "or drop gold_scores",
        'line 3: field gold_scores: only a gold item carries gold_scores (its known answer): add "gold": true, '
        "or drop gold_scores",
        "line 4: field gold_scores: object: must be a whole number from 1 to 5",
        "line 5: field gold_scores: object: must be a whole number from 1 to 5",
        "line 6: field gold_scores: realism: may not be null (only subject and scene may be N/A)",
        f"line 7: field gold_scores: mood: unknown criterion; allowed: {criteria}",
        f"line 8: field gold_scores: {shape}",
        f"line 9: field gold_scores: {shape}",
        "line 10: field gold: must be true or false",
        "line 11: field gold_scores: object: must be a whole number from 1 to 5",
    ]
    assert (Item.objects.count(), MediaAsset.objects.count()) == (0, 0)
    assert [p for p in _media_root.rglob("*") if p.is_file()] == []


# --- scoring: one verdict everywhere -----------------------------------------------------------------


@pytest.mark.parametrize(
    "given,right",
    [
        (4, True),
        (4 + RATING_GOLD_TOLERANCE, True),
        (4 - RATING_GOLD_TOLERANCE, True),
        (4 + RATING_GOLD_TOLERANCE + 1, False),
        (4 - RATING_GOLD_TOLERANCE - 1, False),
        (None, False),
    ],
)
def test_an_expected_score_is_met_within_the_tolerance(given, right):
    assert RATING_GOLD_TOLERANCE == 1  # docs/protocols/oscbench.md, "Agreement": one point apart is the same judgement
    assert gold_correct("rating", {"gold_scores": {"object": 4}}, {"scores": {"object": given}}) is right
    # N/A expected: only N/A is right.
    assert gold_correct("rating", {"gold_scores": {"scene": None}}, {"scores": {"scene": given}}) is (given is None)


def test_imported_gold_scores_ratings_in_a_crowd_study_and_in_the_agreement_figures(make_user, make_project, media):
    researcher = make_user("res")
    project = make_project(
        "crowd", "oscbench", members={researcher: Role.RESEARCHER}, annotations_per_item=1, settings={"gold_share": 1.0}
    )  # every participant's first task is the gold item
    items_import(
        project=project,
        path=write_lines(
            media / "items.jsonl", [osc_line(0, gold=True, gold_scores=GOLD), osc_line(1), osc_line(2), osc_line(3)]
        ),
    )
    gold = Item.objects.get(is_gold=True)
    study = study_create(project=project, actor=researcher, **GOLD_GATED_STUDY)
    for label in ("GOOD", "BAD", "NA"):
        open_study_link(study, label)

    do_tasks(project, participant_user("GOOD"), [RIGHT, RIGHT], seconds=30)  # the gold item first, then a video
    do_tasks(project, participant_user("BAD"), [OFF_BY_TWO, RIGHT], seconds=30)
    do_tasks(project, participant_user("NA"), [SCENE_GIVEN], seconds=30)

    assert Annotation.objects.filter(item=gold).count() == 3
    gold.refresh_from_db()
    assert (gold.status, gold.annotation_count) == (ItemStatus.PENDING, 0)  # gold never counts, never done
    rows = {r["participant_id"]: r for r in participant_rows(study=study)}
    assert {key: (r["gold_items"], r["gold_correct"], r["gold_accuracy"], r["flagged"]) for key, r in rows.items()} == {
        pid("GOOD"): (1, 1, 1.0, False),
        pid("BAD"): (1, 0, 0.0, True),
        pid("NA"): (1, 0, 0.0, True),
    }
    figures = {
        a["annotator"]: (a["gold_items"], a["gold_accuracy"]) for a in project_agreement(project=project)["annotators"]
    }
    assert sorted(figures.values()) == [(1, 0.0), (1, 0.0), (1, 1.0)]
    assert figures[participant_user("GOOD").username] == (1, 1.0)


def test_imported_ratings_of_a_gold_item_are_scored_and_leave_it_pending(make_project, media):
    project = make_project("osc", "oscbench", annotations_per_item=1)
    items_import(project=project, path=write_lines(media / "items.jsonl", [osc_line(0, gold=True, gold_scores=GOLD)]))

    report = annotations_import(
        project=project,
        path=write_lines(
            media / "ratings.jsonl",
            [
                {"item": "oscbench-00000", "rater": "r1", **RIGHT},
                {"item": "oscbench-00000", "rater": "r2", **OFF_BY_TWO},
            ],
        ),
    )

    assert (report.created, report.items_touched) == (2, 1)
    gold = Item.objects.get()
    assert (gold.status, gold.annotation_count) == (ItemStatus.PENDING, 0)
    figures = {
        a["annotator"]: (a["gold_items"], a["gold_accuracy"]) for a in project_agreement(project=project)["annotators"]
    }
    assert figures == {"r1": (1, 1.0), "r2": (1, 0.0)}
