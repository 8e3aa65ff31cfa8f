"""From the authors' files to the human–judge agreement: the prompt splits and videos imported as
items, the mean-of-three rating files as aggregated ratings, the judge script's output as a
judge; the correlation's τ and ρ come from the means, α and leave-one-rater-out say they need
per-rater ratings (docs/protocols/oscbench.md, "The authors' files")."""

from __future__ import annotations

import json
import shutil
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from scipy import stats as sps

from annotation.importing import annotations_import, items_import
from annotation.importing.samples import make_video
from annotation.models import Annotation, Item
from evaluation import correlation, leaderboard
from inference.services.predictions import parse_prediction_lines, predictions_import
from protocols.oscbench import CRITERIA, protocol
from tests.helpers.files import write_lines

from .authors import (
    judge_line,
    prompt_lines,
    video_name,
    write_judge_output,
    write_mean3,
    write_repository,
    write_videos,
)

pytestmark = pytest.mark.django_db

CODES = ("1a", "1b", "2a", "3a", "3b", "4a", "5a", "5b")
TEXTS = {n: text for _, _, n, text in prompt_lines()}
KLING = (1, 2, 3, 4, 5, 6, 7, 8)
WAN = (1, 3)
# The published means (as text) and the judge's scores of each video, per criterion code.
HUMAN = {
    ("kl", 1): "4.33 4.67 3.67 3.33 3.67 NA 4 4.33",
    ("kl", 2): "3 2.33 2 1.67 2.33 4 3.33 3",
    ("kl", 3): "NA 3.67 3.33 2.67 3 4.33 3.67 3.33",
    ("kl", 4): "4 4.33 4 3.67 4 4.67 4.33 4",
    ("kl", 5): "3.67 1.33 2.67 1.33 2 NA 3 3.67",
    ("kl", 6): "NA 4 3 2.33 2.67 NA 3.33 3",
    ("kl", 7): "4.67 5 4.33 4 4.33 4.33 4.67 4.67",
    ("kl", 8): "4 3.33 2.33 1.67 2 3.67 3.67 3.33",
    ("wa", 1): "3.33 3.67 2.67 2 2.67 NA 2.67 2.33",
    ("wa", 3): "2.67 3 2 1.33 1.67 3.33 2.33 2.67",
}
JUDGE = {
    ("kl", 1): "4 5 4 3 4 NA 4 4",
    ("kl", 2): "3 3 2 2 2 4 3 3",
    ("kl", 3): "NA 4 3 3 3 4 4 3",
    ("kl", 4): "4 4 4 4 4 5 4 4",
    ("kl", 5): "4 2 3 1 2 NA 3 4",
    ("kl", 6): "3 4 3 2 3 NA 3 3",
    ("kl", 7): "5 5 4 5 4 4 5 5",
    ("kl", 8): "4 3 3 2 2 4 4 3",
    ("wa", 1): "3 4 3 2 3 NA 3 2",
    ("wa", 3): "3 3 2 1 2 3 2 3",
}


def stem(code: str, number: int) -> str:
    return video_name(number, TEXTS[number], code)[: -len(".mp4")]


def item_of(code: str, number: int) -> str:
    split, line = next((s, ln) for s, ln, n, _ in prompt_lines() if n == number)
    return f"{ {'kl': 'kling', 'wa': 'wan'}[code] }:{split}:{line:04d}"


def human_value(text: str):
    return None if text == "NA" else float(text)


@pytest.fixture
def release(tmp_path):
    """The authors' repository with two generators' videos (real clips) and the study's rating files."""
    root = write_repository(tmp_path / "OSCBench-code")
    clips = [make_video(tmp_path / "clips" / f"c{k}.mp4", k) for k in range(2)]
    write_videos(root / "kling", [f"{stem('kl', n)}.mp4" for n in KLING], clips)
    write_videos(root / "wan", [f"{stem('wa', n)}.mp4" for n in WAN], clips)
    study = root / "human_annotation"
    for index, code in ((1, "kl"), (2, "wa")):
        videos = {
            # The authors' files name some videos with .mp4, some without; their analysis drops it.
            f"{stem(c, n)}.mp4" if n % 2 else stem(c, n): {"evaluations": dict(zip(CODES, means.split()))}
            for (c, n), means in HUMAN.items()
            if c == code
        }
        write_mean3(study, index, {k: v["evaluations"] for k, v in videos.items()})
    return root


@pytest.fixture
def osc(make_project, release, tmp_path):
    """Items imported through the project's own importer from the lines the authors' reader made."""
    project = make_project("osc", "oscbench", annotations_per_item=3)
    conversion = protocol.format_named("oscbench-prompts").read(release)
    lines = list(conversion.lines)
    report = items_import(
        project=project,
        path=write_lines(tmp_path / "items.jsonl", lines),
        media_root=conversion.media_root,
        verified=True,
    )
    assert report.created == len(KLING) + len(WAN)
    return project


def test_the_converted_release_imports_with_its_fields_and_provenance(osc):
    item = Item.objects.get(project=osc, external_id="kling:regular:0004")
    assert item.status == "verified"
    assert {k: item.payload[k] for k in ("prompt", "generator", "scenario", "action", "object")} == {
        "prompt": "A woman is coating the bread with butter in the bakery.",
        "generator": "kling",
        "scenario": "regular",
        "action": "coating",
        "object": "butter",
    }
    assert item.payload["extra"]["video_name"] == stem("kl", 4)
    assert sorted(Item.objects.filter(project=osc).values_list("external_id", flat=True))[:3] == [
        "kling:compositional:0001",
        "kling:novel:0001",
        "kling:regular:0001",
    ]


def test_the_release_folder_imports_in_one_call_with_its_notes(make_project, release, tmp_path):
    project = make_project("osc2", "oscbench")
    report = items_import(project=project, path=release, verified=True)
    assert (report.format, report.created) == ("oscbench-prompts", 10)
    assert (
        report.notes[1] == "10 items, one per video, from 2 generators (kling 8, wan 2); id <generator>:<split>:<line>"
    )
    # Zipped as a folder (an upload), its videos are found inside the release folder.
    archive = shutil.make_archive(str(tmp_path / "upload"), "zip", root_dir=release.parent, base_dir=release.name)
    zipped = items_import(project=make_project("osc3", "oscbench"), path=Path(archive), verified=True)
    assert (zipped.format, zipped.created) == ("oscbench-prompts", 10)


def test_mean3_ratings_are_stored_as_aggregated_ratings(osc, release):
    report = annotations_import(project=osc, path=release / "human_annotation")

    assert (report.format, report.lines, report.created, report.aggregated) == ("oscbench-mean3", 10, 10, 10)
    assert report.notes[0].startswith(
        "10 ratings read from 2 files (evaluations-1-mean3.json, evaluations-2-mean3.json)"
    )
    stored = Annotation.objects.get(item__external_id="kling:regular:0002")
    assert (stored.external_rater, stored.aggregate_raters, stored.source, stored.annotator) == (
        "evaluations-1-mean3",
        3,
        "import",
        None,
    )
    assert stored.result == {"scores": dict(zip(CRITERIA, map(human_value, HUMAN[("kl", 2)].split())))}
    # Verified items stay verified; one row each.
    assert set(Item.objects.filter(project=osc).values_list("status", "annotation_count")) == {("verified", 1)}
    again = annotations_import(project=osc, path=release / "human_annotation", format_name="oscbench-mean3")
    assert (again.created, again.unchanged) == (0, 10)


def import_judge(osc, tmp_path, release):
    lines = [judge_line(stem(c, n), dict(zip(CODES, scores.split()))) for (c, n), scores in JUDGE.items()]
    for line in lines:  # the judge writes numbers; "NA" stays text
        line["result"] = {
            k: {**v, "score": v["score"] if v["score"] == "NA" else int(v["score"])} for k, v in line["result"].items()
        }
    path = write_judge_output(tmp_path / "gpt5.2_evidence.jsonl", lines)
    converted = [
        json.dumps(line) for line in protocol.format_named("oscbench-mllm-eval").read(path, media_root=release).lines
    ]
    parsed = parse_prediction_lines(osc, None, converted)
    assert len(parsed) == 10 and all(p.answer is not None for p in parsed)
    return predictions_import(project=osc, lines=converted, model_name="gpt-5.2")


def test_human_judge_tau_and_rho_come_from_the_means_and_alpha_asks_for_raters(osc, release, tmp_path):
    annotations_import(project=osc, path=release / "human_annotation")
    job = import_judge(osc, tmp_path, release)
    assert job.failed_queries == 0

    report = correlation.build(osc, n_boot=200)

    (judge,) = report["judges"]
    assert judge["judge"] == "gpt-5.2"
    for k, criterion in enumerate(CRITERIA):
        pairs = [
            (float(JUDGE[v].split()[k]), human_value(HUMAN[v].split()[k]))
            for v in HUMAN
            if HUMAN[v].split()[k] != "NA" and JUDGE[v].split()[k] != "NA"
        ]
        xs, ys = zip(*pairs)
        cell = judge["per_criterion"][criterion]
        assert cell["n"] == len(pairs)
        assert cell["kendall_tau_b"] == pytest.approx(sps.kendalltau(xs, ys).statistic, abs=1e-12)
        assert cell["spearman_rho"] == pytest.approx(sps.spearmanr(xs, ys).statistic, abs=1e-12)
    # By hand, object over the 10 videos: of the 45 pairs, 9 are tied on the judge's side only and the
    # other 35 are concordant, so tau-b = 35 / sqrt((35 + 9) * 35) = sqrt(35 / 44).
    assert judge["per_criterion"]["object"]["kendall_tau_b"] == pytest.approx((35 / 44) ** 0.5, abs=1e-12)
    for criterion in CRITERIA:
        human = report["human"][criterion]
        assert (human["krippendorff_alpha"], human["loo_kendall_tau_b"], human["loo_spearman_rho"]) == (
            None,
            None,
            None,
        )
        assert human["aggregated"] == 10 and human["n"] == 0
        assert human["note"] == (
            "needs per-rater ratings: the human scores of all 10 items are aggregated ratings (the means of their "
            "raters), which Krippendorff's alpha and leave-one-rater-out cannot use"
        )


def test_the_generator_board_scores_the_means_as_written(osc, release):
    annotations_import(project=osc, path=release / "human_annotation")
    board = leaderboard.build(osc, n_boot=50)
    wan = next(row for row in board["rows"] if row["model"] == "wan")
    for k, criterion in enumerate(CRITERIA):
        means = [Fraction(v.split()[k]) for (c, _), v in HUMAN.items() if c == "wa" and v.split()[k] != "NA"]
        expected = sum((m - 1) / 4 for m in means) / len(means)
        printed = Decimal(expected.numerator) / Decimal(expected.denominator)
        assert wan["metrics"][criterion] == float(printed.quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))
