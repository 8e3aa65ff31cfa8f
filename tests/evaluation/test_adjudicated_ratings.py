"""A reviewer's edited (adjudicated) ratings are what analysis uses as the item's Human score: the
generator rows of the leaderboard and the human side of the judge correlation. The raters' own
agreement (leave-one-rater-out, alpha) keeps their raw ratings."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from annotation.models import Item, ItemStatus, Review, ReviewDecision
from annotation.services import review_decide
from evaluation import correlation, leaderboard
from protocols.oscbench import CRITERIA
from tests.annotation.work_factories import make_people

from .factories import make_release, rate

pytestmark = pytest.mark.django_db


def flat(level, **changes):
    return {**{c: level for c in CRITERIA}, "subject": None, **changes}


def osc(gen, i):
    return {
        "video": f"{gen}{i}.mp4",
        "prompt": "fold the towel",
        "generator": gen,
        "scenario": "regular",
        "action": "fold",
        "action_category": "folding",
        "object": "towel",
        "object_category": "cloth",
    }


def test_the_live_board_scores_a_reviewers_edited_ratings_not_the_raters(make_project):
    (reviewer,) = make_people(1, prefix="rev")
    project = make_project("adjosc", "oscbench", annotations_per_item=2, members={reviewer: "reviewer"})
    for ext in ("x1", "x2"):
        Item.objects.create(
            project=project, external_id=ext, payload=osc("genA", ext), status=ItemStatus.ANNOTATED, annotation_count=2
        )
    # x1: the raters split on realism (1 and 5, mean 3); the reviewer settles it at 5.
    r1 = rate("x1", project, "r1", flat(3, realism=1))
    rate("x1", project, "r2", flat(3, realism=5))
    rate("x2", project, "r1", flat(3))
    r2 = rate("x2", project, "r2", flat(3))
    review_decide(item_id=r1.item_id, reviewer=reviewer, decision="edit", result={"scores": flat(3, realism=5)})
    review_decide(item_id=r2.item_id, reviewer=reviewer, decision="accept", annotation_id=r2.pk)

    board = leaderboard.build(project, n_boot=10)

    gen_a = board["rows"][0]
    assert gen_a["model"] == "genA"
    # realism: x1 adjudicated 5 -> 1.0, x2 the raters' mean 3 -> 0.5; mean 0.75 (the raw mean would be 0.5).
    assert gen_a["metrics"]["realism"] == 0.75
    assert gen_a["metrics"]["object"] == 0.5  # untouched criteria: the same either way


def test_correlation_compares_judges_with_adjudicated_scores_and_raters_with_raw_ones(make_project, tmp_path):
    (reviewer,) = make_people(1, prefix="rev")
    project = make_project("adjcorr", "oscbench", annotations_per_item=2)
    levels = {"a0": 5, "a1": 4, "a2": 2, "b0": 3, "b1": 1, "b2": 2}
    make_release(project, {ext: osc(ext[0], ext[1]) for ext in levels})
    for ext, level in levels.items():
        rate(ext, project, "r1", flat(level))
        rate(ext, project, "r2", flat(level, action=1 if ext == "a1" else level))
    # Settled before the release was frozen: a1's action is 4, not the raters' mean 2.5.
    a1 = Item.objects.get(project=project, external_id="a1")
    Review.objects.create(item=a1, reviewer=reviewer, decision=ReviewDecision.EDIT, result={"scores": flat(4)})
    judge = [
        {"item": ext, "query": "judge", "answer": json.dumps({"scores": flat(level)})} for ext, level in levels.items()
    ]
    path = tmp_path / "judge.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in judge))
    call_command("import_predictions", "adjcorr", str(path), "--model", "judge-1", "--release", "v1", stdout=StringIO())

    judged, human = correlation.scatter_points(project, judge="judge-1", criterion="action")
    report = correlation.build(project, n_boot=20)

    assert human == [5.0, 4.0, 2.0, 3.0, 1.0, 2.0]  # a1: the adjudicated 4 (raw mean: 2.5)
    assert judged == human
    # The judge agrees with the adjudicated Human scores exactly.
    assert report["judges"][0]["per_criterion"]["action"]["kendall_tau_b"] == 1.0
    # The raters' agreement still sees r2's raw 1 on a1: below the perfect agreement of object.
    assert report["human"]["object"]["krippendorff_alpha"] == 1.0
    assert report["human"]["action"]["krippendorff_alpha"] < 1.0
