"""VisualTrans, M3-Verse and ChangeIt through import_predictions and leaderboard, with Human rows."""

import json

import pytest

from annotation.models import Annotation, Item
from inference.models import Prediction
from tests.helpers.files import write_predictions
from tests.helpers.items import run_command, vt_items

from .factories import make_release

pytestmark = pytest.mark.django_db


def human(project, ext, rater, answer, flags=()):
    item = Item.objects.get(project=project, external_id=ext)
    Annotation.objects.create(
        item=item, external_rater=rater, result={"answer": answer, "flags": list(flags)}, source="import"
    )


def test_visualtrans_models_random_and_human(make_project, tmp_path):
    project = make_project("vt", "visualtrans")
    make_release(project, vt_items())
    lines = [
        {"item": "q1", "query": "qa", "answer": "blue"},  # option text
        {"item": "q2", "query": "qa", "answer": 3},
        {"item": "q3", "query": "qa", "answer": "knife, apple"},  # comma-separated, any order / case
        {"item": "q4", "query": "qa", "answer": "Answer: (B)"},  # wrong
    ]
    run_command("import_predictions", "vt", write_predictions(tmp_path, lines), "--model", "full")
    partial = [  # nothing for the intermediate question: that subtask is unsupported
        {"item": "q1", "query": "qa", "answer": "A"},
        {"item": "q2", "query": "qa", "answer": "three or four"},  # unparseable
        {"item": "q3", "query": "qa", "answer": ["apple", "knife"]},
    ]
    run_command("import_predictions", "vt", write_predictions(tmp_path, partial, "p.jsonl"), "--model", "partial")
    assert Prediction.objects.get(job__model_name="partial", item__external_id="q2").status == "failed"
    human(project, "q1", "h1", "B")
    human(project, "q2", "h1", 4)
    human(project, "q3", "h1", ["knife", "apple"])
    human(project, "q4", "h1", None, ["ambiguous"])
    human(project, "q1", "h2", "b")

    board = json.loads(run_command("leaderboard", "vt", "--boot", "100", "--details"))
    rows = {r["model"]: r for r in board["rows"]}
    # Leaderboard order (evaluation/ranking.py): overall, then the dimension means. Random (seeded) and
    # full tie at 75.00 overall and 100.00 spatial; Random's procedural mean (100.00 > 50.00) puts it first.
    assert [(r["model"], r["metrics"]["overall"], r["metrics"]["procedural_mean"]) for r in board["rows"]] == [
        ("Random", 75.0, 100.0),
        ("full", 75.0, 50.0),
        ("Human", 50.0, 50.0),
        ("partial", 25.0, 100.0),
    ]
    assert rows["full"]["metrics"] == {
        "fine_grained": 100.0,
        "global": None,
        "spatial_mean": 100.0,
        "intermediate": 0.0,
        "causal": 100.0,
        "planning": None,
        "procedural_mean": 50.0,
        "quantitative": 100.0,
        "overall": 75.0,
    }
    assert rows["partial"]["metrics"]["intermediate"] is None
    assert rows["partial"]["metrics"]["procedural_mean"] == 100.0
    assert rows["partial"]["metrics"]["overall"] == 25.0
    assert (rows["partial"]["n"], rows["partial"]["parse_failures"]) == (4, 1)
    assert rows["partial"]["diagnostics"]["unsupported"] == ["intermediate"]
    # Human, per item the mean of its blind answers: q1 1 (two right), q2 0, q3 1, q4 0 (flagged
    # without an answer). Items weigh equally: 2 / 4, not 3 / 5 pooled; n counts the 4 items.
    assert rows["Human"]["n"] == 4
    assert rows["Human"]["parse_failures"] == 1  # the flagged question left unanswered
    assert rows["full"]["parse_failures"] == 0
    assert rows["Human"]["metrics"]["overall"] == 50.0
    assert rows["Human"]["metrics"]["fine_grained"] == 100.0
    assert rows["Human"]["diagnostics"]["blind_answers"]["answers"] == 5


def test_m3verse_partial_credit_through_commands(make_project, tmp_path):
    project = make_project("m3", "m3verse")
    base = {
        "video_before": "b.mp4",
        "video_after": "a.mp4",
        "question": "What changed?",
        "options": ["cup", "lamp", "door", "none listed"],
    }
    make_release(
        project,
        {
            "v1": {
                **base,
                "answer": ["A", "C"],
                "context": "intra",
                "capabilities": ["spatial"],
                "hallucination": False,
            },
            "v2": {**base, "answer": ["D"], "context": "inter", "capabilities": ["attribute"], "hallucination": True},
        },
    )
    run_command(
        "import_predictions",
        "m3",
        write_predictions(
            tmp_path,
            [
                {"item": "v1", "query": "qa", "answer": "A"},
                {"item": "v2", "query": "qa", "answer": ["D"]},
            ],
        ),
        "--model",
        "m",
    )
    human(project, "v1", "h1", ["A", "C"])
    human(project, "v2", "h1", ["A", "D"])
    board = json.loads(run_command("leaderboard", "m3", "--boot", "100"))
    rows = {r["model"]: r for r in board["rows"]}
    assert rows["m"]["metrics"]["overall"] == 75.0
    assert rows["m"]["metrics"]["intra_spatial"] == 50.0
    assert rows["m"]["metrics"]["hallucination"] == 100.0
    assert rows["m"]["metrics"]["inter_temporal"] is None
    assert rows["Human"]["metrics"] == {
        **{k: None for k in rows["m"]["metrics"]},
        "overall": 50.0,
        "intra": 100.0,
        "inter": 0.0,
        "intra_spatial": 100.0,
        "inter_attribute": 0.0,
        "hallucination": 0.0,
        "factual": 100.0,
    }


def test_changeit_state_and_object_through_commands(make_project, tmp_path):
    project = make_project("ci", "changeit")
    release = make_release(
        project,
        {
            "c1": {"image": "1.jpg", "object": "apple", "state": "whole apple", "distractors": ["uncut apple"]},
            "c2": {"image": "2.jpg", "object": "apple", "state": "sliced apple"},
            "c3": {"image": "3.jpg", "object": "door", "state": "open door"},
        },
    )
    resolved = {ri.item.external_id: ri.payload["resolved"] for ri in release.release_items.select_related("item")}
    r1 = resolved["c1"]
    options = r1["state:standard:full"]["options"]
    lines = [
        {"item": "c1", "query": "state:standard:full", "answer": r1["state:standard:full"]["answer"]},
        {"item": "c1", "query": "state:standard:crop", "answer": "sliced apple"},  # right object
        {"item": "c1", "query": "state:distractor:full", "answer": "uncut apple"},  # own distractor: right object
        {"item": "c1", "query": "state:distractor:crop", "answer": "open door"},  # wrong object
    ]
    assert "sliced apple" in options
    run_command("import_predictions", "ci", write_predictions(tmp_path, lines), "--model", "m")
    board = json.loads(run_command("leaderboard", "ci", "--boot", "50"))
    m = board["rows"][0]
    assert m["model"] == "m" and m["n"] == 3 and m["parse_failures"] == 8
    assert m["metrics"] == {
        "state_acc_standard_full": 33.33,
        "state_acc_standard_crop": 0.0,
        "state_acc_distractor_full": 0.0,
        "state_acc_distractor_crop": 0.0,
        "object_acc_standard_full": 33.33,
        "object_acc_standard_crop": 33.33,
        "object_acc_distractor_full": 33.33,
        "object_acc_distractor_crop": 0.0,
    }
