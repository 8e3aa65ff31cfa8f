"""export_release --format lmms-eval: the task folder's utils.py parses and scores answers exactly as
StateLab does (its parser is a copy of protocols/kit/answers.py; its aggregation follows
each protocol's scoring.py), so lmms-eval prints StateLab's figures; ChangeIt's documents ask what
StateLab's own runs ask, on the crops inference would send. lmms-eval itself runs in tests/lmms."""

from __future__ import annotations

import ast
import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from PIL import Image

from annotation.interchange import lmms_eval as writer
from annotation.protocols import QUERY_KEYS, resolve_queries
from evaluation.scoring.answer_sets import ModelAnswer, ScoringItem
from inference.media import load_image
from inference.prompting import MediaPreparer
from protocols.changeit import prompts as ci_protocol
from protocols.changeit import scoring as ci_scoring
from protocols.changeit import vocabulary as changeit_vocabulary
from protocols.changeit.scoring import label_objects as _changeit_label_objects
from protocols.changeit.scoring import score as score_changeit
from protocols.kit import answers
from protocols.kit.lmms import GENERIC_UTILS, LmmsExportError, assemble_utils
from protocols.kit.prompting import ItemInput
from protocols.m3verse import scoring as m3_scoring
from protocols.normalize import answer_multiset
from protocols.status import scoring as status_scoring
from protocols.visualtrans import scoring as vt_scoring
from tests.lmms import cases

TEMPLATE = GENERIC_UTILS  # the generic part of every task's utils.py
SUPPORTED = ("status", "changeit", "visualtrans", "m3verse")


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


def _exif_rotated(path, size, orientation=6):
    """A JPEG stored `size` with an EXIF orientation (6: shown turned 90° clockwise)."""
    pixels = (((x * 17) % 256, (y * 29) % 256, (x * y) % 256) for y in range(size[1]) for x in range(size[0]))
    img = Image.frombytes("RGB", size, bytes(v for pixel in pixels for v in pixel))
    exif = Image.Exif()
    exif[0x0112] = orientation
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path, "JPEG", exif=exif, quality=95)
    return path


def test_changeit_documents_and_crops_are_what_inference_asks(tmp_path):
    src = tmp_path / "src"
    _exif_rotated(src / "img/rot.jpg", (40, 20))  # shown 20 wide, 40 high
    Image.new("RGB", (30, 30), (9, 9, 9)).save(src / "img/plain.png")
    payloads = {
        "a-boxed": {
            "image": "img/rot.jpg",
            "object": "apple",
            "state": "whole apple",
            "distractors": ["sliced apple"],
            "bbox": [3, 25, 30, 30],
        },  # clipped to the upright image: x 3..20, y 25..40
        "b-nobox": {"image": "img/plain.png", "object": "apple", "state": "sliced apple", "distractors": []},
        "c-unsure": {"image": "img/plain.png", "object": "egg", "state": "raw egg", "bbox": "cannot_determine"},
        "d-outside": {"image": "img/plain.png", "object": "egg", "state": "boiled egg", "bbox": [31, 2, 5, 5]},
    }
    vocabulary = changeit_vocabulary(payloads.values())
    lines = [cases.release_line("changeit", k, p, vocabulary=vocabulary) for k, p in payloads.items()]
    out = tmp_path / "task"
    summary = writer.write_task(
        out, {"protocol": "changeit", "project": "ci", "version": "v1"}, lines, media=writer.folder_media(src)
    )
    assert summary["documents"] == 4 + 2 + 2 + 2 and summary["media"] == 2 + 1  # 2 images, 1 crop
    docs = [json.loads(x) for x in (out / "docs.jsonl").read_text().splitlines()]

    # The documents are the queries StateLab's own run asks (no crop query where inference fails
    # it), with its prompt, options and answer, the full image or the crop.
    preparer = MediaPreparer(cache_root=tmp_path / "cache", bound=(4096, 4096))
    asked = []
    for line in lines:
        item = ItemInput(
            item_pk=0,
            external_id=line["id"],
            payload=line,
            media_paths={"image": str(src / line["image"])},
            media_hashes={},
            resolved=line["resolved"],
        )
        for query in ci_protocol.build(item, media=preparer, params={}):
            if query.error is None:
                asked.append(
                    (
                        line["id"],
                        query.key,
                        query.prompt.removeprefix("[user]\n<image 1>\n"),
                        line["resolved"][query.key]["options"],
                        json.dumps(line["resolved"][query.key]["answer"]),
                    )
                )
    assert [(d["id"], d["query"], d["prompt"], d["options"], d["target"]) for d in docs] == asked
    assert [d["query"] for d in docs if d["id"] == "a-boxed"] == list(QUERY_KEYS["changeit"])
    crop = [d["visuals"] for d in docs if d["query"].endswith(":crop")]
    assert crop == [[writer.crop_path("a-boxed")]] * 2 and crop[0][0].startswith("media/statelab-crops/a-boxed-")
    assert [d["visuals"] for d in docs if d["id"] == "b-nobox"] == [["media/img/plain.png"]] * 2
    assert json.loads(docs[0]["meta"]) == {
        "object": "apple",
        "distractors": ["sliced apple"],
        "strategy": "standard",
        "condition": "full",
    }
    # The crop holds exactly the pixels inference sends (load_image with a bound it need not shrink
    # to): the upright image's x 3..20, y 25..40.
    with Image.open(out / crop[0][0]) as got:
        assert got.format == "PNG" and got.size == (17, 15)
        want = load_image(src / "img/rot.jpg", bbox=[3, 25, 30, 30], bound=(4096, 4096))
        assert got.convert("RGB").tobytes() == want.tobytes()
        with Image.open(src / "img/rot.jpg") as stored:  # not the stored (sideways) pixels
            assert got.convert("RGB").tobytes() != stored.convert("RGB").crop((3, 5, 20, 20)).tobytes()
    assert json.loads((out / "label_objects.json").read_text()) == {
        "sliced apple": "apple",
        "whole apple": "apple",
        "raw egg": "egg",
        "boiled egg": "egg",
    }


def test_unsupported_protocols_and_bad_media_paths(tmp_path):
    # OSCBench's figure is a judge's agreement with human raters, not a model's score on a task.
    with pytest.raises(writer.LmmsExportError, match="oscbench"):
        writer.write_task(tmp_path / "oscbench", {"protocol": "oscbench"}, [])
    line = {
        "id": "x",
        "images": ["../etc/passwd"],
        "question": "q",
        "format": "count",
        "options": [],
        "answer": 1,
        "subtask": "global",
        "resolved": {"qa": {"options": [], "answer": 1}},
    }
    with pytest.raises(writer.LmmsExportError, match="relative path"):
        writer.write_task(tmp_path / "bad", {"protocol": "visualtrans"}, [line])
    line = dict(line, images=["statelab-crops/x.png"])
    with pytest.raises(writer.LmmsExportError, match="box crops"):
        writer.write_task(tmp_path / "bad2", {"protocol": "visualtrans"}, [line])


@pytest.mark.django_db
@pytest.mark.parametrize("protocol", ["status", "changeit", "visualtrans", "m3verse"])
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
    utils_py = (out / "utils.py").read_text()
    assert (out / f"{name}.yaml").is_file() and utils_py == writer.lmms_task(protocol).utils_source()
    assert utils_py.startswith(TEMPLATE.read_text()) and f"protocols.{protocol}.lmms_utils" in utils_py
    docs = [json.loads(x) for x in (out / "docs.jsonl").read_text().splitlines()]
    lines = list(ReleaseItem.objects.filter(release=release).order_by("position").values_list("payload", flat=True))
    per_item = {"status": 6, "changeit": 4}.get(protocol, 1)  # the sample ChangeIt items all have a box
    assert len(docs) == per_item * release.item_count
    assert [d["id"] for d in docs[::per_item]] == [line["id"] for line in lines]
    assert [(d["id"], d["query"]) for d in docs] == [(line["id"], q) for line in lines for q in QUERY_KEYS[protocol]]
    for doc in docs:
        for rel in doc["visuals"]:
            assert (out / rel).is_file(), rel
    if protocol == "changeit":  # the box [40, 20, 80, 80] cut out of the stored image
        for line, doc in zip(lines, docs[1::4]):
            with Image.open(out / doc["visuals"][0]) as got:
                want = load_image(out / "media" / line["image"], bbox=line["bbox"], bound=(4096, 4096))
                assert got.size == (80, 80) and got.convert("RGB").tobytes() == want.tobytes()
    assert json.loads((out / "release.json").read_text())["release"]["checksum"] == release.checksum


@pytest.mark.django_db
def test_export_release_lmms_refuses_oscbench_and_needs_a_folder(make_project, tmp_path):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from annotation.importing import items_import
    from annotation.importing.samples import write_sample_dataset
    from annotation.releases import release_freeze

    project = make_project("lm-osc", "oscbench", option_seed=13, settings={})
    items_import(project=project, path=write_sample_dataset(tmp_path / "data", "oscbench", 3), verified=True)
    release_freeze(project=project, version="v1")
    with pytest.raises(CommandError, match="oscbench"):
        call_command("export_release", project.slug, "v1", "--format", "lmms-eval", "-o", str(tmp_path / "t"))
    assert not (tmp_path / "t").exists()
    with pytest.raises(CommandError, match="needs -o DIR"):
        call_command("export_release", project.slug, "v1", "--format", "lmms-eval")


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


@pytest.mark.parametrize("protocol", SUPPORTED)
def test_the_task_utils_stands_alone(protocol, tmp_path):
    """The folder's utils.py is one file lmms-eval loads without StateLab: it imports the standard
    library and Pillow only, and loads in an isolated interpreter (no project on its path)."""
    source = writer.lmms_task(protocol).utils_source()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0
            imported.add(node.module.split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"PIL"}, imported
    (tmp_path / "utils.py").write_text(source)
    check = (
        "import utils; assert callable(utils.process_results) and callable(utils.aggregate); print(len(utils.METRICS))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, '.'); {check}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 0


def test_a_protocol_part_that_would_not_stand_alone_is_refused(tmp_path):
    part = tmp_path / "lmms_utils.py"
    part.write_text("from protocols.kit.lmms_utils import percent\nfrom protocols.base import LETTERS\n")
    with pytest.raises(LmmsExportError, match="must stand alone"):
        assemble_utils(part, "tests.part")
    part.write_text(
        "from __future__ import annotations\n\nfrom protocols.kit.lmms_utils import (\n    percent,\n)\n\nX = 1\n"
    )
    assert assemble_utils(part, "tests.part") == TEMPLATE.read_text() + (
        "\n\n# --- the protocol's part: tests.part " + "-" * 70 + "\n\nX = 1\n"
    )
