"""lmms-eval 0.7 loads StateLab's task folder (`--include_path`), runs it with a stub model of its
own API (tests/lmms/stub_model.py) through its own command line with --log_samples, and prints the
scores docs/protocols/<name>.md defines. The folders are written by StateLab's writer from plain release lines
(annotation/interchange/lmms_eval.py is Django-free); the expected figures are worked out by hand
in each test.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from annotation.interchange.lmms_eval import folder_media, write_task

from . import cases

ROOT = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("run_stub.py")
VT_LOG_FIXTURE = ROOT / "tests/evaluation/data/lmms_eval_0.7.3_samples_statelab_vt_demo_v1.jsonl"
_line = cases.release_line


def _images(root: Path, *names: str) -> Path:
    src = root / "src"
    for i, name in enumerate(names):
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (16 + i, 12), (40 * i % 255, 90, 160)).save(src / name)
    return src


# lmms-eval catches an exception during evaluation, prints its traceback, logs "Error during
# evaluation: ..." at ERROR level (loguru, coloured even into a pipe) and exits 0. Its exit status
# alone cannot tell a run that failed, so what it printed is read too.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TOOL_ERROR = re.compile(r"\|\s*(ERROR|CRITICAL)\s*\||^Traceback \(most recent call last\)")


def tool_errors(printed: str) -> list[str]:
    """The lines of a run's output where lmms-eval reported an error (ANSI colours removed)."""
    return [line for line in _ANSI.sub("", printed).splitlines() if _TOOL_ERROR.search(line)]


def _printed(proc: subprocess.CompletedProcess) -> str:
    return (
        "--- lmms-eval stdout (end) ---\n"
        + _ANSI.sub("", proc.stdout)[-3000:]
        + "\n--- lmms-eval stderr (end) ---\n"
        + _ANSI.sub("", proc.stderr)[-6000:]
    )


def _one(out: Path, pattern: str, proc: subprocess.CompletedProcess) -> Path:
    found = sorted(out.rglob(pattern))
    assert len(found) == 1, f"lmms-eval wrote {len(found)} files matching {pattern} (expected 1)\n" + _printed(proc)
    return found[0]


def _run(tmp: Path, folder: Path, task: str, answers: dict[str, str] | None) -> tuple[dict, list[dict], list[dict]]:
    """Run lmms-eval's CLI on the task; returns (results of the task, logged samples, what the model saw).
    `answers=None` hands the stub model an answers file that does not exist (its start fails)."""
    if answers is not None:
        (tmp / "answers.json").write_text(json.dumps(answers))
    out = tmp / "out"
    env = dict(
        os.environ,
        HF_HOME=str(tmp / "hf"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONPATH=str(ROOT),
    )
    cmd = [
        sys.executable,
        str(RUNNER),
        "--model",
        "statelab_stub",
        "--model_args",
        f"answers={tmp / 'answers.json'},seen={tmp / 'seen.json'}",
        "--tasks",
        task,
        "--include_path",
        str(folder),
        "--log_samples",
        "--output_path",
        str(out),
    ]
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"lmms-eval exited {proc.returncode}\n" + _printed(proc)
    errors = tool_errors(proc.stdout + proc.stderr)
    assert not errors, "lmms-eval exited 0 but reported errors:\n" + "\n".join(errors) + "\n" + _printed(proc)
    results = json.loads(_one(out, "*_results.json", proc).read_text())["results"][task]
    samples_file = _one(out, f"*_samples_{task}.jsonl", proc)
    samples = [json.loads(x) for x in samples_file.read_text().splitlines() if x.strip()]
    seen = json.loads((tmp / "seen.json").read_text())
    return results, samples, seen


def _scores(results: dict) -> dict:
    return {k.split(",")[0]: v for k, v in results.items() if k.endswith(",none") and "_stderr" not in k}


def test_visualtrans_task_runs_in_lmms_eval(tmp_path):
    media = _images(tmp_path, "vt/init.png", "vt/final.png", "vt/cand.png")
    items = cases.VT_ITEMS
    lines = [_line("visualtrans", item_id, payload) for item_id, payload in cases.vt_payloads().items()]
    header = {
        "protocol": "visualtrans",
        "project": "vt-demo",
        "version": "v1",
        "item_count": len(lines),
        "checksum": "0" * 64,
    }
    folder = tmp_path / "task"
    summary = write_task(folder, header, lines, media=folder_media(media))
    assert summary == {"task": cases.VT_TASK, "items": 6, "documents": 6, "media": 3, "folder": str(folder)}

    results, samples, seen = _run(tmp_path, folder, summary["task"], {f"{i[0]}|qa": i[5] for i in items})

    # The documents are the release's items, in release order, each with id and query in the log.
    # (lmms-eval 0.7.3 drops `doc` from the sample log; the task logs `item` = {id, query}.)
    assert [s["item"]["id"] for s in sorted(samples, key=lambda s: s["doc_id"])] == [i[0] for i in items]
    assert {s["item"]["query"] for s in samples} == {"qa"}
    assert [s["filtered_resps"] for s in sorted(samples, key=lambda s: s["doc_id"])] == [i[5] for i in items]
    # The model got the images (as PIL images of the stored sizes) and StateLab's prompt.
    first = next(x for x in seen if x["id"] == "vt-0")
    assert first["visuals"] == [[16, 12], [17, 12], [18, 12]]
    assert "A. a red cup\nB. a blue cup\nC. no cup" in first["context"]
    # docs/protocols/visualtrans.md by hand (tests/lmms/cases.py): correct vt-0, vt-2, vt-3, vt-5; vt-4 is empty.
    assert (
        _scores(results)
        == cases.VT_SCORES
        == {
            "fine_grained": 0.0,
            "global": 100.0,
            "spatial_mean": 50.0,
            "intermediate": 100.0,
            "causal": 100.0,
            "planning": 0.0,
            "procedural_mean": 66.67,
            "quantitative": 100.0,
            "overall": 66.67,
            "parse_failures": 1,
            "item": 6,
        }
    )
    # This run's --log_samples file is the main tier's fixture of a real lmms-eval log
    # (tests/evaluation/test_lmms_real_log.py imports it): it must stay what lmms-eval writes.
    logged = next((tmp_path / "out").rglob(f"*_samples_{cases.VT_TASK}.jsonl")).read_text()
    if os.environ.get("STATELAB_LMMS_REFRESH_FIXTURE") == "1":
        VT_LOG_FIXTURE.write_text(logged)
    assert logged == VT_LOG_FIXTURE.read_text(), (
        f"lmms-eval's sample log changed; refresh {VT_LOG_FIXTURE.relative_to(ROOT)} with "
        "STATELAB_LMMS_REFRESH_FIXTURE=1 bash .ci/test-lmms -k visualtrans, and check "
        "tests/evaluation/test_lmms_real_log.py"
    )


def test_m3verse_task_runs_in_lmms_eval(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for name in ("before.mp4", "after.mp4"):
        (src / name).write_bytes(b"not decoded by the stub model")
    items = [
        # id, context, capabilities, hallucination, truth, reply
        ("m-0", "intra", ["spatial"], False, ["A", "C"], "A"),
        ("m-1", "intra", ["temporal", "attribute"], False, ["B"], "B, D"),
        ("m-2", "inter", ["reasoning"], True, ["D"], "D"),
        ("m-3", "inter", ["spatial"], False, ["A", "B", "C"], "A and B"),
    ]
    lines = [
        _line(
            "m3verse",
            item_id,
            {
                "video_before": "before.mp4",
                "video_after": "after.mp4",
                "question": f"Which differ in {item_id}?",
                "options": ["the chair", "the lamp", "the rug", "none of the listed"],
                "answer": truth,
                "context": context,
                "capabilities": caps,
                "hallucination": hall,
                "multiple": True,
            },
        )
        for item_id, context, caps, hall, truth, _ in items
    ]
    header = {"protocol": "m3verse", "project": "m3", "version": "v2", "item_count": 4, "checksum": "1" * 64}
    folder = tmp_path / "task"
    summary = write_task(folder, header, lines, media=folder_media(src))
    results, samples, seen = _run(tmp_path, folder, summary["task"], {f"{i[0]}|qa": i[5] for i in items})

    assert sorted(s["item"]["id"] for s in samples) == [i[0] for i in items]
    assert all(s["item"]["query"] == "qa" for s in samples)
    assert seen[0]["visuals"] == [str(folder / "media/before.mp4"), str(folder / "media/after.mp4")]
    assert "One or more options may be correct" in seen[0]["context"]
    # docs/protocols/m3verse.md by hand: credits 1/2, 0 (D is wrong), 1, 2/3.
    assert _scores(results) == {
        "overall": 54.17,
        "intra": 25.0,
        "inter": 83.33,
        "intra_spatial": 50.0,
        "intra_temporal": 0.0,
        "intra_attribute": 0.0,
        "inter_spatial": 66.67,
        "inter_reasoning": 100.0,
        "hallucination": 100.0,
        "factual": 38.89,
        "parse_failures": 0,
        "item": 4,
    }


def test_status_task_runs_in_lmms_eval(tmp_path):
    media = _images(tmp_path, "s/a0.png", "s/b0.png", "s/a1.png", "s/b1.png")
    lines = []
    for n in range(2):
        payload = {
            "image_a": f"s/a{n}.png",
            "image_b": f"s/b{n}.png",
            "state_a": "a closed box",
            "state_b": "an open box",
            "change": "open the box",
            "change_distractors": ["close the box", "shake the box", "paint the box"],
            "category": "functional",
            "difference": "significant",
        }
        lines.append(_line("status", f"s-{n}", payload))
    header = {"protocol": "status", "project": "st", "version": "v1", "item_count": 2, "checksum": "2" * 64}
    folder = tmp_path / "task"
    summary = write_task(folder, header, lines, media=folder_media(media))
    assert summary["documents"] == 12
    truth = {(line["id"], k): q["answer"] for line in lines for k, q in line["resolved"].items()}
    wrong = {"A": "B", "B": "A"}
    answers = {f"s-0|{k}": truth[("s-0", k)] for k in ("osi_a", "osi_b", "ir_a", "ir_b", "sci2", "sci4")}
    answers.update(
        {
            "s-1|osi_a": "A",
            "s-1|osi_b": "A",
            "s-1|ir_a": "B",
            "s-1|ir_b": "B",
            "s-1|sci2": wrong[truth[("s-1", "sci2")]],
            "s-1|sci4": "",
        }
    )
    results, samples, seen = _run(tmp_path, folder, summary["task"], answers)

    logged = sorted((s["item"]["id"], s["item"]["query"]) for s in samples)
    assert logged == sorted(truth)
    osi = next(x for x in seen if x["id"] == "s-1" and x["query"] == "osi_b")
    assert osi["visuals"] == [[19, 12]]
    # docs/protocols/status.md by hand: s-0 all correct; s-1 right on osi_a and ir_b only (sci4 unparseable).
    assert _scores(results) == {
        "acc_osi": 75.0,
        "acc_ir": 75.0,
        "acc_sci": 50.0,
        "oa": 66.67,
        "racc_osi": 50.0,
        "racc_ir": 50.0,
        "racc_sci": 50.0,
        "roa": 50.0,
        "parse_failures": 1,
        "item": 2,
    }


def test_changeit_task_runs_in_lmms_eval(tmp_path):
    src = cases.write_ci_images(tmp_path / "src")
    lines = cases.ci_lines()
    header = {"protocol": "changeit", "project": "ci-demo", "version": "v1", "item_count": 3, "checksum": "3" * 64}
    folder = tmp_path / "task"
    summary = write_task(folder, header, lines, media=folder_media(src))
    # 3 images and 2 crops (c-2 has no box); 4 queries each for c-0 and c-1, the 2 full ones for c-2.
    assert summary == {"task": cases.CI_TASK, "items": 3, "documents": 10, "media": 5, "folder": str(folder)}
    replies = cases.ci_replies(lines)
    results, samples, seen = _run(tmp_path, folder, summary["task"], {f"{i}|{q}": r for (i, q), r in replies.items()})

    assert sorted((s["item"]["id"], s["item"]["query"]) for s in samples) == sorted(replies)
    assert {(s["item"]["id"], s["item"]["query"]): s["filtered_resps"] for s in samples} == replies
    # The full image, or the box cut out at export (c-0's clipped to the image: 4x4), and
    # StateLab's ChangeIt prompt with numbered candidates.
    shown = {(x["id"], x["query"]): x for x in seen}
    assert shown[("c-0", "state:standard:full")]["visuals"] == [[12, 8]]
    for item_id, size in cases.CI_CROP_SIZES.items():
        assert shown[(item_id, "state:standard:crop")]["visuals"] == [size]
        assert shown[(item_id, "state:distractor:crop")]["visuals"] == [size]
    options = next(line for line in lines if line["id"] == "c-2")["resolved"]["state:distractor:full"]["options"]
    assert shown[("c-2", "state:distractor:full")]["context"] == (
        "This photo shows a door. Which of these labels describes the state the door is in?\n"
        + "\n".join(f"{n}. {label}" for n, label in enumerate(options, start=1))
        + f"\nAnswer with the number of the best label (1 to {len(options)}) and nothing else."
    )
    # docs/protocols/changeit.md by hand: the table in tests/lmms/cases.py (a wrong-object answer, a right-object
    # wrong-state one, an unparseable and an empty reply, an item without a box).
    assert (
        _scores(results)
        == cases.CI_SCORES
        == {
            "state_acc_standard_full": 66.67,
            "state_acc_standard_crop": 33.33,
            "state_acc_distractor_full": 33.33,
            "state_acc_distractor_crop": 0.0,
            "object_acc_standard_full": 66.67,
            "object_acc_standard_crop": 66.67,
            "object_acc_distractor_full": 33.33,
            "object_acc_distractor_crop": 33.33,
            "parse_failures": 4,
            "item": 3,
        }
    )


def test_unsupported_protocol_is_refused(tmp_path):
    from annotation.interchange.lmms_eval import LmmsExportError

    # OSCBench's score is a judge's agreement with human raters, not a model's score on a task.
    with pytest.raises(LmmsExportError, match="oscbench"):
        write_task(tmp_path / "t", {"protocol": "oscbench"}, [])


def test_an_evaluation_that_fails_while_exiting_0_fails_the_test(tmp_path):
    """The failure mode that hid a broken tier: lmms-eval's evaluation raises (here the stub model
    cannot open its answers file), lmms-eval logs the error and exits 0. _run must fail and quote
    what lmms-eval printed, not stop later on a missing results file."""
    media = _images(tmp_path, "vt/init.png", "vt/final.png", "vt/cand.png")
    lines = [_line("visualtrans", item_id, payload) for item_id, payload in cases.vt_payloads().items()]
    header = {
        "protocol": "visualtrans",
        "project": "vt-demo",
        "version": "v1",
        "item_count": len(lines),
        "checksum": "0" * 64,
    }
    folder = tmp_path / "task"
    summary = write_task(folder, header, lines, media=folder_media(media))
    with pytest.raises(AssertionError) as failed:
        _run(tmp_path, folder, summary["task"], None)
    message = str(failed.value)
    assert "lmms-eval exited 0 but reported errors" in message
    assert "Error during evaluation" in message and "answers.json" in message
