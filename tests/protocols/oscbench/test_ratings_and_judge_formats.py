"""The authors' mean-of-three rating files and their judge script's output, read as annotation
and prediction lines (protocols/oscbench/formats.py). Plain Python: no database."""

from __future__ import annotations

import json

import pytest

from protocols.kit.answers import parse_judge
from protocols.kit.releases import FormatRefused
from protocols.oscbench import CRITERIA, protocol

from .authors import (
    judge_line,
    prompt_lines,
    video_name,
    write_judge_output,
    write_mean3,
    write_repository,
    write_videos,
)

MEAN3 = protocol.format_named("oscbench-mean3", "annotations")
JUDGE = protocol.format_named("oscbench-mllm-eval", "predictions")
TEXTS = {n: text for _, _, n, text in prompt_lines()}


def stem(number: int, code: str = "kl") -> str:
    return video_name(number, TEXTS[number], code)[: -len(".mp4")]


@pytest.fixture
def release(tmp_path):
    root = write_repository(tmp_path / "OSCBench-code")
    write_videos(root / "kling", [f"{stem(n)}.mp4" for n in (1, 2, 3, 7)])
    return root


ALL = {"1a": "4.33", "1b": "5", "2a": "3.67", "3a": "2.33", "3b": "3", "4a": "NA", "5a": "4", "5b": "3.67"}


def test_mean3_files_become_aggregated_ratings_of_the_videos_items(release):
    folder = release / "human_annotation"
    write_mean3(folder, 1, {f"{stem(1)}.mp4": ALL, stem(2): {**ALL, "1a": "NA", "3b": "NA"}})
    write_mean3(folder, 2, {stem(3): ALL, stem(1): ALL, "5_Someone_else's_video_kl": ALL})
    assert MEAN3.detect(folder) and MEAN3.detect(folder / "evaluations-2-mean3.json")
    assert not MEAN3.detect(release)

    conversion = MEAN3.read(folder)
    lines = list(conversion.lines)

    assert lines[0] == {
        "item": "kling:regular:0001",
        "rater": "evaluations-1-mean3",
        "scores": {
            "subject": 4.33,
            "object": 5.0,
            "action": 3.67,
            "osc_accuracy": 2.33,
            "osc_consistency": 3.0,
            "scene": None,
            "realism": 4.0,
            "aesthetics": 3.67,
        },
        "aggregate": {"raters": 3},
    }
    assert [(line["item"], line["rater"]) for line in lines] == [
        ("kling:regular:0001", "evaluations-1-mean3"),
        ("kling:regular:0002", "evaluations-1-mean3"),
        ("kling:regular:0003", "evaluations-2-mean3"),
    ]
    assert lines[1]["scores"]["subject"] is None and lines[1]["scores"]["osc_consistency"] is None
    assert conversion.notes[1].startswith("criteria: 1a → subject, 1b → object, 2a → action, 3a → osc_accuracy, ")
    assert (
        "no mean (NA) on criteria only subject and scene leave out for a single rater: 3b 1 videos" in conversion.notes
    )
    assert any(
        n.startswith("videos rated in two files with the same means, imported once: 1, ") for n in conversion.notes
    )
    assert (
        "rated videos that are not among the release's videos, not imported: 1, 5_Someone_else's_video_kl"
        in conversion.notes
    )


def test_unreadable_ratings_are_refused_together_in_one_message(release):
    folder = release / "human_annotation"
    write_mean3(folder, 1, {stem(1): {**ALL, "3a": "about 3"}, stem(2): {**ALL, "6a": "2"}, stem(3): {**ALL, "5b": 7}})
    second = write_mean3(folder, 2, {stem(7): ALL, stem(1): {**ALL, "3a": "2"}})
    second.write_text(second.read_text().replace('"evaluations"', '"scores"', 1))  # not the authors' key
    with pytest.raises(FormatRefused) as exc:
        MEAN3.read(folder)
    assert str(exc.value) == (
        "5 ratings cannot be read: "
        f"evaluations-1-mean3.json: video '{stem(1)}': 3a: 'about 3' is not a mean from 1 to 5 or NA; "
        f"evaluations-1-mean3.json: video '{stem(2)}': unknown criterion codes 6a (known: 1a, 1b, 2a, 3a, 3b, 4a, "
        "5a, 5b); "
        f"evaluations-1-mean3.json: video '{stem(3)}': 5b: 7 is not a mean from 1 to 5 or NA; "
        f"evaluations-2-mean3.json: video '{stem(7)}': expected {{\"evaluations\": {{code: mean}}}}; "
        f"evaluations-2-mean3.json: video '{stem(1)}': rated again with other means (first in evaluations-1-mean3.json)"
    )


def test_ratings_away_from_the_release_ask_for_it(tmp_path, release):
    path = write_mean3(tmp_path / "elsewhere", 1, {stem(1): ALL})
    with pytest.raises(FormatRefused, match=r"give the release folder the items were read from \(--media-root"):
        MEAN3.read(path)
    assert [line["item"] for line in MEAN3.read(path, media_root=release).lines] == ["kling:regular:0001"]
    (tmp_path / "array.json").write_text("[]")
    with pytest.raises(FormatRefused, match=r"array.json: found a JSON list; expected an object video name"):
        MEAN3.read(tmp_path / "array.json", media_root=release)


def test_judge_output_becomes_judge_predictions_with_the_criteria_renamed(tmp_path, release):
    scores = dict(zip(("1a", "1b", "2a", "3a", "3b", "4a", "5a", "5b"), (4, 5, 3, 2, 3, "NA", 4, 4)))
    path = write_judge_output(
        tmp_path / "gpt5.2_evidence.jsonl",
        [
            judge_line(stem(1), scores),
            judge_line(stem(2), {**scores, "3a": [2]}),  # the template's "[1-5]" taken literally
            judge_line(stem(3), {**scores, "6z": 1}),
            judge_line(stem(7), {**scores, "1b": 4.5}),
            judge_line(stem(1), scores),  # the same result again
            judge_line("12_A_video_of_another_release_kl", scores),
        ],
    )
    assert JUDGE.detect(path)

    conversion = JUDGE.read(path, media_root=release)
    lines = list(conversion.lines)

    assert [line["item"] for line in lines] == [
        "kling:regular:0001",
        "kling:regular:0002",
        "kling:regular:0003",
        "kling:novel:0001",
    ]
    assert lines[0] == {
        "item": "kling:regular:0001",
        "query": "judge",
        "answer": {
            criterion: {"evidence": f"frames show {code}", "score": scores[code]}
            for code, criterion in zip(("1a", "1b", "2a", "3a", "3b", "4a", "5a", "5b"), CRITERIA)
        },
    }
    parsed = [parse_judge(line["answer"], CRITERIA) for line in lines]
    assert parsed[0] == {
        "subject": 4,
        "object": 5,
        "action": 3,
        "osc_accuracy": 2,
        "osc_consistency": 3,
        "scene": None,
        "realism": 4,
        "aesthetics": 4,
    }
    assert parsed[1]["osc_accuracy"] == 2 and parsed[2] == parsed[0]
    assert parsed[3] is None  # 4.5 is no judge score: the line imports as an unreadable answer
    assert conversion.notes[2:] == [
        "scores written as a one-element list, read as that score: 1",
        "codes that are no criterion, left out: 6z (1)",
        "answers holding a score that is not a whole number from 1 to 5 (or N/A), imported as unreadable answers: 1",
        f"videos judged twice with the same result, imported once: 1, {stem(1)}",
        "judged videos that are not among the release's videos, not imported: 1, 12_A_video_of_another_release_kl",
    ]


def test_the_video_keyed_json_the_authors_analysis_reads_is_read_too(tmp_path, release):
    path = tmp_path / "batch_840_fixNA.json"
    path.write_text(
        json.dumps({f"{stem(2)}.mp4": {"evaluation": {"1b": {"evidence": "a peach", "score": 4}, "3a": 2}}})
    )
    assert JUDGE.detect(path)
    lines = list(JUDGE.read(path, media_root=release).lines)
    assert lines == [
        {
            "item": "kling:regular:0002",
            "query": "judge",
            "answer": {"object": {"evidence": "a peach", "score": 4}, "osc_accuracy": 2},
        }
    ]


def test_bad_judge_output_is_refused_naming_the_lines(tmp_path, release):
    path = tmp_path / "out.jsonl"
    path.write_text(
        json.dumps(judge_line(stem(1), {"1a": 3}))
        + "\n{not json\n"
        + json.dumps({"video": stem(2)})
        + "\n"
        + json.dumps(judge_line(stem(1), {"1a": 4}))
        + "\n"
    )
    with pytest.raises(FormatRefused) as exc:
        JUDGE.read(path, media_root=release)
    assert str(exc.value) == (
        "2 lines of judge output cannot be read: line 2: not valid JSON (Expecting property name enclosed in double "
        'quotes); line 3: expected {"video_folder": …, "prompt": …, "result": {code: …}}'
    )
    path.write_text(json.dumps(judge_line(stem(1), {"1a": 3})) + "\n" + json.dumps(judge_line(stem(1), {"1a": 4})))
    with pytest.raises(FormatRefused, match=r"line 2: video '.*' judged again with another result \(first at line 1\)"):
        JUDGE.read(path, media_root=release)
