"""import_predictions reads lmms-eval's --log_samples JSONL and VLMEvalKit's prediction files:
the same answers in each format store the same predictions; a bad line is named by its number in
the original file and nothing is imported."""

import csv

import pytest
from django.core.management.base import CommandError

from inference.models import InferenceJob, Prediction
from tests.helpers.files import write_predictions
from tests.helpers.items import run_command, vt_items

from .factories import make_release

pytestmark = pytest.mark.django_db

ANSWERS = {"q1": "blue", "q2": "3", "q3": "knife, apple", "q4": "Answer: (B)"}


def lmms_sample(doc_id, ext, answer, query=None):
    doc = {"id": ext, "question": "…", "format": "choice"}
    if query:
        doc["query"] = query
    return {
        "doc_id": doc_id,
        "doc": doc,
        "target": "B",
        "arguments": [["…", {"max_new_tokens": 16}]],
        "resps": [[answer]],
        "filtered_resps": [answer],
        "doc_hash": "x",
        "prompt_hash": "y",
        "target_hash": "z",
    }


def stored(model):
    rows = Prediction.objects.filter(job__model_name=model).order_by("item__external_id")
    return [(p.item.external_id, p.query, p.status, p.answer) for p in rows]


def test_three_formats_store_the_same_predictions(make_project, tmp_path):
    make_release(make_project("vt", "visualtrans"), vt_items())
    run_command(
        "import_predictions",
        "vt",
        write_predictions(tmp_path, [{"item": k, "query": "qa", "answer": v} for k, v in ANSWERS.items()]),
        "--model",
        "native",
    )
    lmms = [lmms_sample(i, k, v) for i, (k, v) in enumerate(ANSWERS.items())]
    run_command(
        "import_predictions", "vt", write_predictions(tmp_path, lmms, "samples_statelab_vt.jsonl"), "--model", "lmms"
    )
    tsv = tmp_path / "m_vt.tsv"
    with tsv.open("w", newline="") as fh:
        w = csv.writer(fh, dialect="excel-tab")
        w.writerow(["index", "question", "answer", "prediction"])
        for k, v in ANSWERS.items():
            w.writerow([k, "…", "B", v])
    run_command("import_predictions", "vt", str(tsv), "--model", "vlmeval")
    native = stored("native")
    assert native == [
        ("q1", "qa", "ok", "B"),
        ("q2", "qa", "ok", 3),
        ("q3", "qa", "ok", ["apple", "knife"]),
        ("q4", "qa", "ok", "B"),
    ]
    assert stored("lmms") == native
    assert stored("vlmeval") == native
    assert InferenceJob.objects.get(model_name="lmms").mode == "imported"


def test_lmms_eval_query_from_the_document_for_multi_query_protocols(make_project, tmp_path):
    from tests.helpers.items import status_payload

    make_release(make_project("st", "status"), {"it0": status_payload(0)})
    ok = [lmms_sample(0, "it0", "A", "osi_a"), lmms_sample(1, "it0", "B", "osi_b")]
    run_command("import_predictions", "st", write_predictions(tmp_path, ok, "samples.jsonl"), "--model", "m")
    assert sorted(Prediction.objects.values_list("query", flat=True)) == ["osi_a", "osi_b"]
    missing = [lmms_sample(0, "it0", "A", "osi_a"), lmms_sample(1, "it0", "B")]
    with pytest.raises(CommandError, match=r"line 2: no query"):
        run_command("import_predictions", "st", write_predictions(tmp_path, missing, "samples2.jsonl"), "--model", "m2")
    assert not InferenceJob.objects.filter(model_name="m2").exists()


def test_bad_lines_are_named_in_the_original_file(make_project, tmp_path):
    make_release(make_project("vt", "visualtrans"), vt_items())
    no_id = lmms_sample(1, "q2", "3")
    del no_id["doc"]["id"]
    with pytest.raises(CommandError, match=r'line 2: field "doc.id"'):
        run_command(
            "import_predictions",
            "vt",
            write_predictions(tmp_path, [lmms_sample(0, "q1", "A"), no_id], "samples.jsonl"),
            "--model",
            "a",
        )
    unknown = [lmms_sample(0, "q1", "A"), lmms_sample(1, "nope", "A")]
    with pytest.raises(CommandError, match=r"line 2: unknown item 'nope'"):
        run_command("import_predictions", "vt", write_predictions(tmp_path, unknown, "samples3.jsonl"), "--model", "b")
    tsv = tmp_path / "bad.tsv"
    tsv.write_text("index\tprediction\nq1\tA\nzzz\tB\n")
    with pytest.raises(CommandError, match=r"line 3: unknown item 'zzz'"):
        run_command("import_predictions", "vt", str(tsv), "--model", "c")
    xlsx = tmp_path / "m.xlsx"
    xlsx.write_bytes(b"PK\x03\x04 not read")
    with pytest.raises(CommandError, match=r"nothing imported: not an \.xlsx workbook \(BadZipFile"):
        run_command("import_predictions", "vt", str(xlsx), "--model", "d")
    assert InferenceJob.objects.count() == 0


def test_lmms_eval_0_7_samples_without_doc(make_project, tmp_path):
    # lmms-eval 0.7 writes no "doc"; the task export_release writes logs the ids as "item", and a
    # single request's filtered response is the text itself (resps left out when equal).
    make_release(make_project("vt", "visualtrans"), vt_items())
    lines = [
        {
            "doc_id": i,
            "target": "B",
            "filtered_resps": answer,
            "item": {"id": ext, "query": "qa"},
            "statelab_score": {"id": ext},
        }
        for i, (ext, answer) in enumerate(ANSWERS.items())
    ]
    run_command(
        "import_predictions",
        "vt",
        write_predictions(tmp_path, lines, "samples_statelab_vt_v1.jsonl"),
        "--model",
        "lmms07",
    )
    run_command(
        "import_predictions",
        "vt",
        write_predictions(tmp_path, [{"item": k, "query": "qa", "answer": v} for k, v in ANSWERS.items()]),
        "--model",
        "native",
    )
    assert stored("lmms07") == stored("native") and len(stored("native")) == 4
