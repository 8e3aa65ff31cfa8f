"""Imported aggregated ratings (the means of several raters, Annotation.aggregate_raters) are no
one rater: the agreement figures (annotation/selectors_agreement.py, the agreement page and API)
leave them out — no row of their own among the annotators, nothing in Krippendorff's alpha — and
count them apart."""

from __future__ import annotations

import pytest

from annotation.importing import annotations_import, items_import
from annotation.importing.samples import write_sample_dataset
from annotation.models import Role
from annotation.selectors_agreement import project_agreement
from protocols.oscbench import CRITERIA
from tests.helpers.files import write_lines

pytestmark = pytest.mark.django_db

OWN = dict(zip(CRITERIA, (4, 5, 3, 2, 3, None, 4, 5)))
CLOSE = {**OWN, "object": 4, "realism": 5}
MEANS = {**OWN, "object": 4.67, "osc_accuracy": 2.33, "osc_consistency": None}


@pytest.fixture
def osc(make_project, make_user, tmp_path):
    researcher = make_user("res")
    project = make_project("osc", "oscbench", annotations_per_item=3, members={researcher: Role.RESEARCHER})
    items_import(project=project, path=write_sample_dataset(tmp_path / "d", "oscbench", 4))
    own = [
        {"item": "oscbench-00000", "rater": "r1", "scores": OWN},
        {"item": "oscbench-00000", "rater": "r2", "scores": CLOSE},
        {"item": "oscbench-00001", "rater": "r1", "scores": CLOSE},
        {"item": "oscbench-00001", "rater": "r2", "scores": CLOSE},
    ]
    annotations_import(project=project, path=write_lines(tmp_path / "own.jsonl", own))
    return project, researcher


def test_aggregated_ratings_are_left_out_of_the_figures_and_counted_apart(osc, tmp_path):
    project, _ = osc
    before = project_agreement(project=project)
    assert before["aggregated_ratings_left_out"] == 0
    means = [
        {"item": f"oscbench-0000{i}", "rater": "study-1", "scores": MEANS, "aggregate": {"raters": 3}} for i in (2, 3)
    ]
    report = annotations_import(project=project, path=write_lines(tmp_path / "means.jsonl", means))
    assert report.aggregated == 2
    after = project_agreement(project=project)
    assert after["aggregated_ratings_left_out"] == 2
    # The study's means are not one more rater: the same annotators, the same alpha and items.
    assert [a["annotator"] for a in after["annotators"]] == ["r1", "r2"]
    assert after["annotators"] == before["annotators"]
    assert after["workflow"] == before["workflow"]
    assert {c: v["n_items"] for c, v in after["workflow"]["criteria"].items()}["object"] == 2


def test_the_agreement_api_names_the_count(osc, tmp_path, client):
    project, researcher = osc
    line = {"item": "oscbench-00002", "rater": "study-1", "scores": MEANS, "aggregate": {"raters": 5}}
    annotations_import(project=project, path=write_lines(tmp_path / "m.jsonl", [line]))
    client.force_login(researcher)
    body = client.get("/api/projects/osc/agreement/").json()
    assert body["aggregated_ratings_left_out"] == 1
    assert "study-1" not in {a["annotator"] for a in body["annotators"]}
