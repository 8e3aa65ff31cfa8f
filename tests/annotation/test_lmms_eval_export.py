"""export_release --format lmms-eval: the task folder's utils.py parses and scores answers exactly as
StateLab does (its parser is a copy of inference/answers.py; its aggregation follows
evaluation/scoring), so lmms-eval prints StateLab's figures. lmms-eval itself runs in tests/lmms."""
from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from annotation.interchange import lmms_eval as writer
from annotation.protocols import resolve_queries
from evaluation.scoring import m3verse as m3_scoring
from evaluation.scoring import status as status_scoring
from evaluation.scoring import visualtrans as vt_scoring
from inference import answers

TEMPLATE = Path(writer.__file__).with_name("lmms_task_utils.py")


def _load(path: Path):
    spec = importlib.util.spec_from_file_location("statelab_lmms_utils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


utils = _load(TEMPLATE)

_TEXT = st.text(alphabet="ABCDabcd ,.;:()[]/&-0123456789andswerpotinlu\n\"'*", max_size=24)
_OPTIONS = st.lists(st.sampled_from(["a cup", "the lid", "B", "open", "an open box", "3"]), min_size=0, max_size=4)


@hsettings(max_examples=400, deadline=None)
@given(raw=_TEXT, options=_OPTIONS)
def test_the_task_parser_is_statelabs(raw, options):
    assert utils.parse_choice(raw, options) == answers.parse_choice(raw, options)
    assert utils.parse_letter_set(raw, options) == answers.parse_letter_set(raw, options)
    assert utils.normalize_int(raw) == answers.normalize_int(raw)
    assert utils.normalize_set(raw) == answers.normalize_set(raw)
    assert utils.normalize_letter(raw, len(options) or None) == answers.normalize_letter(raw, len(options) or None)


def _vt_records(counts):
    """Records as process_results makes them, with `counts` = subtask -> (correct, total)."""
    recs = []
    for sub, (ok, total) in counts.items():
        for i in range(total):
            recs.append({"id": f"{sub}{i}", "query": "qa", "protocol": "visualtrans", "num": int(i < ok), "den": 1,
                         "parsed": "A", "parse_failure": False, "groups": ["overall", sub], "meta": {}})
    return recs


def test_visualtrans_paper_row():
    """PROTOCOLS §3 check: GPT-4o's counts print the paper's row (printed-subtask dimension means)."""
    recs = _vt_records({"fine_grained": (51, 168), "global": (15, 50), "intermediate": (28, 88), "causal": (31, 86),
                        "planning": (19, 42), "quantitative": (36, 63)})
    got = {k: str(utils.printed(recs, k)) for k in utils.VISUALTRANS_METRICS}
    assert got == {"fine_grained": "30.36", "global": "30.00", "spatial_mean": "30.18", "intermediate": "31.82",
                   "causal": "36.05", "planning": "45.24", "procedural_mean": "37.70", "quantitative": "57.14",
                   "overall": "36.22"}


def _vt_lines(n, rng):
    lines = []
    for i in range(n):
        fmt = rng.choice(["choice", "count", "set"])
        options = ["red", "blue", "green", "none"][: rng.randint(2, 4)] if fmt == "choice" else []
        truth = {"choice": rng.choice("ABCD"[: len(options) or 1]), "count": rng.randint(0, 5),
                 "set": rng.sample(["cup", "lid", "pan"], rng.randint(1, 3))}[fmt]
        payload = {"images": ["i.png", "f.png"], "question": "q", "format": fmt, "options": options, "answer": truth,
                   "subtask": rng.choice(vt_scoring.SUBTASKS), "scene": "s"}
        line = {"id": f"v{i}", **payload, "split": "test", "tags": []}
        line["resolved"] = resolve_queries("visualtrans", line["id"], payload, seed=3)
        lines.append(line)
    return lines


_REPLIES = ["A", "b", "C.", "Answer: (D)", "", "3", "There are 2.", "cup, lid", "LID", "pan , cup", "red", "no idea",
            "A,C", "B and D", "[\"A\"]"]


def test_visualtrans_scores_match_statelab_scorer(tmp_path):
    rng = random.Random(5)
    lines = _vt_lines(120, rng)
    header = {"protocol": "visualtrans", "project": "p", "version": "v1", "item_count": len(lines), "checksum": "x"}
    writer.write_task(tmp_path / "t", header, lines)
    task_utils = _load(tmp_path / "t" / "utils.py")
    docs = [json.loads(x) for x in (tmp_path / "t" / "docs.jsonl").read_text().splitlines()]
    assert [d["id"] for d in docs] == [line["id"] for line in lines] and {d["query"] for d in docs} == {"qa"}
    replies = [rng.choice(_REPLIES) for _ in docs]
    results = [task_utils.process_results(d, [r]) for d, r in zip(docs, replies)]
    # StateLab's own scoring of the same replies.
    parsed = [answers.parse_answer("visualtrans", "qa", r, line["resolved"]["qa"]["options"], fmt=line["format"])
              for r, line in zip(replies, lines)]
    correct = [vt_scoring.is_correct(line["format"], line["answer"], p) for p, line in zip(parsed, lines)]
    matrix = vt_scoring.item_matrix([line["subtask"] for line in lines], correct, [True] * len(lines),
                                    parse_failures=sum(p is None for p in parsed))
    expected = vt_scoring.printed(matrix)
    metrics = json.loads((tmp_path / "t" / "metrics.json").read_text())
    for key in metrics:
        value = task_utils.aggregate([r[key] for r in results])
        if key == "parse_failures":
            assert value == matrix.parse_failures
        elif key == "item":
            assert value == len(lines)
        else:
            assert value == float(expected[key]), key


def test_m3verse_scores_match_statelab_scorer(tmp_path):
    rng = random.Random(9)
    lines = []
    for i in range(80):
        payload = {"video_before": "b.mp4", "video_after": "a.mp4", "question": "q", "options": ["w", "x", "y", "z"],
                   "answer": sorted(rng.sample("ABCD", rng.randint(1, 3))), "context": rng.choice(["intra", "inter"]),
                   "capabilities": rng.sample(list(m3_scoring.CAPABILITIES), rng.randint(1, 2)),
                   "hallucination": rng.random() < 0.2}
        line = {"id": f"m{i}", **payload, "split": "test", "tags": []}
        line["resolved"] = resolve_queries("m3verse", line["id"], payload, seed=3)
        lines.append(line)
    writer.write_task(tmp_path / "t", {"protocol": "m3verse", "item_count": 80}, lines)
    task_utils = _load(tmp_path / "t" / "utils.py")
    docs = [json.loads(x) for x in (tmp_path / "t" / "docs.jsonl").read_text().splitlines()]
    replies = [rng.choice(_REPLIES) for _ in docs]
    results = [task_utils.process_results(d, [r]) for d, r in zip(docs, replies)]
    parsed = [answers.parse_answer("m3verse", "qa", r, line["resolved"]["qa"]["options"]) for r, line in zip(replies, lines)]
    matrix = m3_scoring.item_matrix([m3_scoring.question_credit(p, line["answer"]) for p, line in zip(parsed, lines)],
                                    [line["context"] for line in lines], [line["capabilities"] for line in lines],
                                    [line["hallucination"] for line in lines], parse_failures=sum(p is None for p in parsed))
    expected = m3_scoring.printed(matrix)
    for key in json.loads((tmp_path / "t" / "metrics.json").read_text()):
        value = task_utils.aggregate([r[key] for r in results])
        if key == "parse_failures":
            assert value == matrix.parse_failures
        elif key != "item":
            assert value == float(expected[key]), key


def test_status_scores_match_statelab_scorer(tmp_path):
    rng = random.Random(4)
    lines = []
    for i in range(60):
        payload = {"image_a": "a.png", "image_b": "b.png", "state_a": "a shut door", "state_b": "an open door",
                   "change": "open the door", "change_distractors": ["shut it", "paint it", "lock it"],
                   "category": "positional", "difference": "slight"}
        line = {"id": f"s{i}", **payload, "split": "test", "tags": []}
        line["resolved"] = resolve_queries("status", line["id"], payload, seed=3)
        lines.append(line)
    writer.write_task(tmp_path / "t", {"protocol": "status", "item_count": 60}, lines)
    task_utils = _load(tmp_path / "t" / "utils.py")
    docs = [json.loads(x) for x in (tmp_path / "t" / "docs.jsonl").read_text().splitlines()]
    assert len(docs) == 360
    replies = [rng.choice(["A", "B", "C", "D", "", "open the door", "b."]) for _ in docs]
    results = [task_utils.process_results(d, [r]) for d, r in zip(docs, replies)]
    by_item = {}
    for d, r in zip(docs, replies):
        line = lines[int(d["id"][1:])]
        by_item.setdefault(d["id"], {})[d["query"]] = answers.parse_answer("status", d["query"], r,
                                                                           line["resolved"][d["query"]]["options"])
    truth = status_scoring.encode_letters([[line["resolved"][q]["answer"] for q in status_scoring.QUERIES] for line in lines])
    predicted = status_scoring.encode_letters([[by_item[line["id"]][q] for q in status_scoring.QUERIES] for line in lines])
    matrix = status_scoring.item_matrix(truth, predicted)
    expected = status_scoring.printed(matrix) if hasattr(status_scoring, "printed") else None
    exact = matrix.exact_means()
    for key in status_scoring.KEYS:
        value = task_utils.aggregate([r[key] for r in results])
        want = float(expected[key]) if expected else float(utils._percent(exact[key]))
        assert value == want, key
    assert task_utils.aggregate([r["parse_failures"] for r in results]) == matrix.parse_failures


def test_unsupported_protocols_and_bad_media_paths(tmp_path):
    for protocol in ("changeit", "oscbench"):
        with pytest.raises(writer.LmmsExportError, match=protocol):
            writer.write_task(tmp_path / protocol, {"protocol": protocol}, [])
    line = {"id": "x", "images": ["../etc/passwd"], "question": "q", "format": "count", "options": [], "answer": 1,
            "subtask": "global", "resolved": {"qa": {"options": [], "answer": 1}}}
    with pytest.raises(writer.LmmsExportError, match="relative path"):
        writer.write_task(tmp_path / "bad", {"protocol": "visualtrans"}, [line])



@pytest.mark.django_db
@pytest.mark.parametrize("protocol", ["status", "visualtrans", "m3verse"])
def test_export_release_command_writes_the_task_folder(protocol, make_project, tmp_path):
    from django.core.management import call_command

    from annotation.importing import items_import
    from annotation.importing.samples import write_sample_dataset
    from annotation.models import ReleaseItem
    from annotation.releases import release_freeze

    project = make_project(f"lm-{protocol}", protocol, option_seed=13, settings={})
    items_import(project=project, path=write_sample_dataset(tmp_path / "data", protocol, 4), verified=True)
    release = release_freeze(project=project, version="v1")
    out = tmp_path / "task"
    call_command("export_release", project.slug, "v1", "--format", "lmms-eval", "-o", str(out))

    name = f"statelab_lm_{protocol}_v1"
    assert (out / f"{name}.yaml").is_file() and (out / "utils.py").read_text() == TEMPLATE.read_text()
    docs = [json.loads(x) for x in (out / "docs.jsonl").read_text().splitlines()]
    lines = list(ReleaseItem.objects.filter(release=release).order_by("position").values_list("payload", flat=True))
    per_item = 6 if protocol == "status" else 1
    assert len(docs) == per_item * release.item_count
    assert [d["id"] for d in docs[::per_item]] == [line["id"] for line in lines]
    for doc in docs:
        for rel in doc["visuals"]:
            assert (out / rel).is_file(), rel
    assert json.loads((out / "release.json").read_text())["release"]["checksum"] == release.checksum


@pytest.mark.django_db
def test_export_release_lmms_refuses_changeit_and_needs_a_folder(make_project, tmp_path):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from annotation.importing import items_import
    from annotation.importing.samples import write_sample_dataset
    from annotation.releases import release_freeze

    project = make_project("lm-changeit", "changeit", option_seed=13, settings={})
    items_import(project=project, path=write_sample_dataset(tmp_path / "data", "changeit", 3), verified=True)
    release_freeze(project=project, version="v1")
    with pytest.raises(CommandError, match="changeit"):
        call_command("export_release", project.slug, "v1", "--format", "lmms-eval", "-o", str(tmp_path / "t"))
    with pytest.raises(CommandError, match="needs -o DIR"):
        call_command("export_release", project.slug, "v1", "--format", "lmms-eval")


def test_the_task_lists_its_metrics_in_the_leaderboard_order():
    """lmms-eval prints a task's metrics in the order its YAML lists them: the same columns, in the
    same order, as StateLab's own table (M3-Verse: the paper's Table 2 order)."""
    from annotation.interchange import lmms_task_utils

    assert lmms_task_utils.METRICS["m3verse"] == m3_scoring.KEYS
    assert lmms_task_utils.METRICS["status"] == status_scoring.KEYS
