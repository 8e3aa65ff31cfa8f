"""export_release --format lmms-eval scores as StateLab does: the task folder's utils.py parses answers
with a copy of protocols/kit/answers.py (a property test keeps the two equal) and aggregates them as
each protocol's scoring.py does, so on the same replies lmms-eval prints StateLab's figures (the
VisualTrans paper row among them) in the leaderboard's column order; the replies of the lmms-eval
tier's ChangeIt run (tests/lmms/cases.py) score as worked out there and the same once imported into
StateLab. lmms-eval itself runs in tests/lmms; the folder's documents, crops and files:
tests/annotation/test_lmms_eval_task_folder.py."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from PIL import Image

from annotation.interchange import lmms_eval as writer
from annotation.protocols import QUERY_KEYS, resolve_queries
from evaluation.scoring.answer_sets import ModelAnswer, ScoringItem
from protocols.changeit import scoring as ci_scoring
from protocols.changeit import vocabulary as changeit_vocabulary
from protocols.changeit.scoring import label_objects as _changeit_label_objects
from protocols.changeit.scoring import score as score_changeit
from protocols.kit import answers
from protocols.kit.lmms import GENERIC_UTILS
from protocols.m3verse import scoring as m3_scoring
from protocols.normalize import answer_multiset
from protocols.status import scoring as status_scoring
from protocols.visualtrans import scoring as vt_scoring
from tests.lmms import cases

TEMPLATE = GENERIC_UTILS  # the generic part of every task's utils.py


def _load(path: Path):
    spec = importlib.util.spec_from_file_location("statelab_lmms_utils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _task_utils(protocol: str, folder: Path):
    """The utils.py a task folder of `protocol` gets, loaded from `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "utils.py").write_text(writer.lmms_task(protocol).utils_source())
    return _load(folder / "utils.py")


utils = _load(TEMPLATE)

_TEXT = st.text(alphabet="ABCDabcd ,.;:()[]/&-0123456789andswerpotinlu\n\"'*", max_size=24)
_OPTIONS = st.lists(st.sampled_from(["a cup", "the lid", "B", "open", "an open box", "3"]), min_size=0, max_size=4)


@hsettings(max_examples=400, deadline=None)
@given(raw=_TEXT, options=_OPTIONS)
def test_the_task_parser_is_statelabs(raw, options):
    assert utils.parse_choice(raw, options) == answers.parse_choice(raw, options)
    assert utils.parse_candidate_number(raw, options) == answers.parse_candidate_number(raw, options)
    assert utils.parse_letter_set(raw, options) == answers.parse_letter_set(raw, options)
    assert utils.normalize_int(raw) == answers.normalize_int(raw)
    assert utils.normalize_set(raw) == answer_multiset(raw)
    assert utils.normalize_letter(raw, len(options) or None) == answers.normalize_letter(raw, len(options) or None)


def _vt_records(counts):
    """Records as process_results makes them, with `counts` = subtask -> (correct, total)."""
    recs = []
    for sub, (ok, total) in counts.items():
        for i in range(total):
            recs.append(
                {
                    "id": f"{sub}{i}",
                    "query": "qa",
                    "protocol": "visualtrans",
                    "num": int(i < ok),
                    "den": 1,
                    "parsed": "A",
                    "parse_failure": False,
                    "groups": ["overall", sub],
                    "meta": {},
                }
            )
    return recs


def test_visualtrans_paper_row(tmp_path):
    """docs/protocols/visualtrans.md, "Check": GPT-4o's counts print the paper's row (printed-subtask
    dimension means)."""
    vt = _task_utils("visualtrans", tmp_path)
    recs = _vt_records(
        {
            "fine_grained": (51, 168),
            "global": (15, 50),
            "intermediate": (28, 88),
            "causal": (31, 86),
            "planning": (19, 42),
            "quantitative": (36, 63),
        }
    )
    got = {k: str(vt.printed(recs, k)) for k in vt.METRICS}
    assert got == {
        "fine_grained": "30.36",
        "global": "30.00",
        "spatial_mean": "30.18",
        "intermediate": "31.82",
        "causal": "36.05",
        "planning": "45.24",
        "procedural_mean": "37.70",
        "quantitative": "57.14",
        "overall": "36.22",
    }


def _vt_lines(n, rng):
    lines = []
    for i in range(n):
        fmt = rng.choice(["choice", "count", "set"])
        options = ["red", "blue", "green", "none"][: rng.randint(2, 4)] if fmt == "choice" else []
        truth = {
            "choice": rng.choice("ABCD"[: len(options) or 1]),
            "count": rng.randint(0, 5),
            "set": rng.sample(["cup", "lid", "pan"], rng.randint(1, 3)),
        }[fmt]
        payload = {
            "images": ["i.png", "f.png"],
            "question": "q",
            "format": fmt,
            "options": options,
            "answer": truth,
            "subtask": rng.choice(vt_scoring.SUBTASKS),
            "scene": "s",
        }
        line = {"id": f"v{i}", **payload, "split": "test", "tags": []}
        line["resolved"] = resolve_queries("visualtrans", line["id"], payload, seed=3)
        lines.append(line)
    return lines


_REPLIES = [
    "A",
    "b",
    "C.",
    "Answer: (D)",
    "",
    "3",
    "There are 2.",
    "cup, lid",
    "LID",
    "pan , cup",
    "red",
    "no idea",
    "A,C",
    "B and D",
    '["A"]',
]


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
    parsed = [
        answers.parse_answer("visualtrans", "qa", r, line["resolved"]["qa"]["options"], fmt=line["format"])
        for r, line in zip(replies, lines)
    ]
    correct = [vt_scoring.is_correct(line["format"], line["answer"], p) for p, line in zip(parsed, lines)]
    matrix = vt_scoring.item_matrix(
        [line["subtask"] for line in lines], correct, [True] * len(lines), parse_failures=sum(p is None for p in parsed)
    )
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
        payload = {
            "video_before": "b.mp4",
            "video_after": "a.mp4",
            "question": "q",
            "options": ["w", "x", "y", "z"],
            "answer": sorted(rng.sample("ABCD", rng.randint(1, 3))),
            "context": rng.choice(["intra", "inter"]),
            "capabilities": rng.sample(list(m3_scoring.CAPABILITIES), rng.randint(1, 2)),
            "hallucination": rng.random() < 0.2,
        }
        line = {"id": f"m{i}", **payload, "split": "test", "tags": []}
        line["resolved"] = resolve_queries("m3verse", line["id"], payload, seed=3)
        lines.append(line)
    writer.write_task(tmp_path / "t", {"protocol": "m3verse", "item_count": 80}, lines)
    task_utils = _load(tmp_path / "t" / "utils.py")
    docs = [json.loads(x) for x in (tmp_path / "t" / "docs.jsonl").read_text().splitlines()]
    replies = [rng.choice(_REPLIES) for _ in docs]
    results = [task_utils.process_results(d, [r]) for d, r in zip(docs, replies)]
    parsed = [
        answers.parse_answer("m3verse", "qa", r, line["resolved"]["qa"]["options"]) for r, line in zip(replies, lines)
    ]
    matrix = m3_scoring.item_matrix(
        [m3_scoring.question_credit(p, line["answer"]) for p, line in zip(parsed, lines)],
        [line["context"] for line in lines],
        [line["capabilities"] for line in lines],
        [line["hallucination"] for line in lines],
        parse_failures=sum(p is None for p in parsed),
    )
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
        payload = {
            "image_a": "a.png",
            "image_b": "b.png",
            "state_a": "a shut door",
            "state_b": "an open door",
            "change": "open the door",
            "change_distractors": ["shut it", "paint it", "lock it"],
            "category": "positional",
            "difference": "slight",
        }
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
        by_item.setdefault(d["id"], {})[d["query"]] = answers.parse_answer(
            "status", d["query"], r, line["resolved"][d["query"]]["options"]
        )
    truth = status_scoring.encode_letters(
        [[line["resolved"][q]["answer"] for q in status_scoring.QUERIES] for line in lines]
    )
    predicted = status_scoring.encode_letters(
        [[by_item[line["id"]][q] for q in status_scoring.QUERIES] for line in lines]
    )
    matrix = status_scoring.item_matrix(truth, predicted)
    expected = status_scoring.printed(matrix) if hasattr(status_scoring, "printed") else None
    exact = matrix.exact_means()
    for key in status_scoring.KEYS:
        value = task_utils.aggregate([r[key] for r in results])
        want = float(expected[key]) if expected else float(task_utils.percent(exact[key]))
        assert value == want, key
    assert task_utils.aggregate([r["parse_failures"] for r in results]) == matrix.parse_failures


def _ci_lines(n, rng, boxes=("box", "box", "nothing_to_label", None)):
    """ChangeIt export lines over a vocabulary where "open" and "closed" are states of both the
    door and the box (object accuracy then goes by the first object in release order)."""
    states = {
        "apple": ["whole apple", "sliced apple", "peeled apple"],
        "door": ["open", "closed", "ajar door"],
        "box": ["open", "closed", "taped box"],
        "cup": ["full cup", "empty cup"],
    }
    payloads = {}
    for i in range(n):
        obj = rng.choice(sorted(states))
        state = rng.choice(states[obj])
        payload = {
            "image": f"img/{i % 5}.png",
            "object": obj,
            "state": state,
            "distractors": rng.sample([s for s in states[obj] if s != state] + ["bruised apple", "dented cup"], 2),
        }
        box = rng.choice(boxes)
        if box == "box":
            payload["bbox"] = [rng.randint(0, 40), rng.randint(0, 30), rng.randint(1, 40), rng.randint(1, 30)]
        elif box:
            payload["bbox"] = box
        payloads[f"c{i:03d}"] = payload
    vocabulary = changeit_vocabulary(payloads.values())
    return [cases.release_line("changeit", item_id, p, vocabulary=vocabulary) for item_id, p in payloads.items()]


def test_changeit_scores_match_statelab_scorer(tmp_path):
    rng = random.Random(7)
    lines = _ci_lines(90, rng)
    src = tmp_path / "src"
    for k in range(5):  # 32x24 images: some boxes lie partly or wholly outside them
        (src / "img").mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (32, 24), (50 * k, 80, 120)).save(src / f"img/{k}.png")
    writer.write_task(
        tmp_path / "t", {"protocol": "changeit", "item_count": len(lines)}, lines, media=writer.folder_media(src)
    )
    task_utils = _load(tmp_path / "t" / "utils.py")
    docs = [json.loads(x) for x in (tmp_path / "t" / "docs.jsonl").read_text().splitlines()]
    outside = [
        line["id"]
        for line in lines
        if isinstance(line.get("bbox"), list) and (line["bbox"][0] >= 32 or line["bbox"][1] >= 24)
    ]
    assert outside and not {d["id"] for d in docs if d["query"].endswith(":crop")} & set(outside)
    replies = [
        rng.choice(
            ["1", "2", "10", "11", "0", "", "3.", "Answer: 4", "open", "whole apple", "no idea", "taped box", "7"]
        )
        for _ in docs
    ]
    results = [task_utils.process_results(d, [r]) for d, r in zip(docs, replies)]
    # StateLab's own scoring of the same replies; a query without a document has no answer.
    items = [
        ScoringItem(key=line["id"], external_id=line["id"], payload=line, resolved=line["resolved"]) for line in lines
    ]
    run = {
        (d["id"], d["query"]): ModelAnswer(answers.parse_answer("changeit", d["query"], r, d["options"]))
        for d, r in zip(docs, replies)
    }
    matrix = score_changeit(items, run)
    expected = ci_scoring.printed(matrix)
    metrics = json.loads((tmp_path / "t" / "metrics.json").read_text())
    assert metrics == list(ci_scoring.KEYS) + ["parse_failures", "item"]
    for key in metrics:
        value = task_utils.aggregate([r[key] for r in results])
        if key == "parse_failures":
            assert value == matrix.parse_failures
        elif key == "item":
            assert value == len(lines)
        else:
            assert value == float(expected[key]), key
    # The vocabulary judged by is StateLab's: "open", a state of the box and of the door, names one.
    assert {line["object"] for line in lines if line["state"] == "open"} == {"box", "door"}
    assert json.loads((tmp_path / "t" / "label_objects.json").read_text()) == _changeit_label_objects(items)


def _ci_tier_folder(tmp_path):
    """The lmms-eval tier's ChangeIt task (tests/lmms/cases.py), its images written."""
    lines = cases.ci_lines()
    writer.write_task(
        tmp_path / "t",
        {"protocol": "changeit", "item_count": 3},
        lines,
        media=writer.folder_media(cases.write_ci_images(tmp_path / "src")),
    )
    return tmp_path / "t", lines


def test_the_tier_changeit_replies_score_as_worked_out(tmp_path):
    """utils.py on the replies the lmms-eval tier sends through lmms-eval, without lmms-eval."""
    folder, lines = _ci_tier_folder(tmp_path)
    task_utils = _load(folder / "utils.py")
    replies = cases.ci_replies(lines)
    docs = [json.loads(x) for x in (folder / "docs.jsonl").read_text().splitlines()]
    assert sorted((d["id"], d["query"]) for d in docs) == sorted(replies)
    results = [task_utils.process_results(d, [replies[(d["id"], d["query"])]]) for d in docs]
    got = {
        key: task_utils.aggregate([r[key] for r in results])
        for key in json.loads((folder / "metrics.json").read_text())
    }
    assert got == cases.CI_SCORES


@pytest.mark.django_db
def test_the_tier_changeit_replies_score_the_same_in_statelab(make_project, tmp_path):
    """The replies the lmms-eval tier's ChangeIt run gets, imported as predictions of the same
    release: StateLab's leaderboard prints the figures lmms-eval printed there."""
    from django.core.management import call_command

    from tests.evaluation.factories import make_release

    project = make_project("ci-demo", "changeit", option_seed=cases.SEED)
    release = make_release(project, cases.CI_PAYLOADS, seed=cases.SEED)
    lines = cases.ci_lines()
    assert [ri.payload["resolved"] for ri in release.release_items.order_by("position")] == [
        line["resolved"] for line in lines
    ]
    preds = tmp_path / "preds.jsonl"
    preds.write_text(
        "".join(
            json.dumps({"item": i, "query": q, "answer": r}) + "\n" for (i, q), r in cases.ci_replies(lines).items()
        )
    )
    call_command("import_predictions", project.slug, str(preds), "--model", "stub", stdout=open(tmp_path / "o", "w"))
    board_file = tmp_path / "board.json"
    with open(board_file, "w") as fh:
        call_command("leaderboard", project.slug, "--boot", "20", stdout=fh)
    row = next(r for r in json.loads(board_file.read_text())["rows"] if r["model"] == "stub")
    want = dict(cases.CI_SCORES)
    assert (row["parse_failures"], row["n"]) == (want.pop("parse_failures"), want.pop("item"))
    assert row["metrics"] == want


def test_the_task_lists_its_metrics_in_the_leaderboard_order():
    """lmms-eval prints a task's metrics in the order its YAML lists them: the same columns, in the
    same order, as StateLab's own table (M3-Verse: the paper's Table 2 order)."""
    from protocols.changeit import lmms_utils as ci_lmms
    from protocols.m3verse import lmms_utils as m3_lmms
    from protocols.status import lmms_utils as status_lmms
    from protocols.visualtrans import lmms_utils as vt_lmms

    assert m3_lmms.METRICS == m3_scoring.KEYS
    assert status_lmms.METRICS == status_scoring.KEYS
    assert ci_lmms.METRICS == ci_scoring.KEYS
    assert vt_lmms.METRICS == vt_scoring.KEYS
    assert ci_lmms.QUERIES == ci_scoring.QUERIES == QUERY_KEYS["changeit"]
