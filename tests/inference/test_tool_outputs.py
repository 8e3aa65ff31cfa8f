"""import_predictions takes other tools' outputs of tasks and benchmarks that are not StateLab's:
lmms-eval's --log_samples file (in the shape lmms-eval's evaluator and its docs write it), and
VLMEvalKit's prediction files (.xlsx as its dump writes it, .tsv quoted, the indented records
array of .json) with their usual integer index, meeting the release through a --match mapping.
Unmatched rows are reported, the tool's target and per-sample metrics are kept beside StateLab's
score with the disagreements listed, and a protocol's own "predictions" format is asked first.
Every fixture is written here in the tools' shapes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from django.core.management.base import CommandError
from openpyxl import Workbook

from annotation.models import AuditEvent
from inference.models import InferenceJob, Prediction
from inference.services.prediction_formats import verdict
from protocols import registry
from protocols.kit.releases import Conversion, FormatRefused, ReleaseFormat, first_bytes
from tests.evaluation.factories import make_release
from tests.helpers.files import write_predictions
from tests.helpers.items import run_command, status_payload, vt_items

pytestmark = pytest.mark.django_db

# The release's four questions in order (q1 choice "B", q2 count 3, q3 set, q4 choice "A").
ORDER = ["q1", "q2", "q3", "q4"]


def vt_release(make_project, slug="vt"):
    """vt_items with the authors' provenance kept under "extra" (as an import of their release keeps it)."""
    items = vt_items()
    for n, ext in enumerate(ORDER):
        items[ext]["extra"] = {"question_id": f"VT-{100 + n}", "scene_id": f"s{n % 2}"}
    return make_release(make_project(slug, "visualtrans"), items)


def docs_sample(doc_id: int, reply: str, target: str, exact_match: float) -> dict:
    """A --log_samples line as lmms-eval 0.7 writes it for a generate_until task (no "doc")."""
    return {
        "doc_id": doc_id,
        "input": "What is shown in this image?\nAnswer with a single word.",
        "target": target,
        "resps": [[f"<think>\nlooking\n</think>\n{reply}"]],
        "filtered_resps": [reply],
        "doc_hash": f"{doc_id:064x}",
        "exact_match": exact_match,
    }


def stored(model: str) -> dict[str, tuple]:
    rows = Prediction.objects.filter(job__model_name=model).select_related("item")
    return {p.item.external_id: (p.query, p.status, p.answer) for p in rows}


def test_an_lmms_eval_log_of_another_task_imports_by_position_and_lists_disagreements(make_project, tmp_path):
    vt_release(make_project)
    samples = [
        docs_sample(0, "C", "B", 1.0),  # the tool says right; StateLab reads C: wrong (truth B)
        docs_sample(1, "3", "3", 0.0),  # the tool says wrong; StateLab reads 3: right
        docs_sample(2, "apple, knife", "apple,knife", 1.0),
        docs_sample(3, "A", "A", 1.0),
        docs_sample(7, "A", "A", 1.0),  # the task has more documents than the release has items
    ]
    path = write_predictions(tmp_path, samples, "20260101_samples_mytask.jsonl")

    with pytest.raises(CommandError, match=r"carries no item id.*--match doc_id=row"):
        run_command("import_predictions", "vt", path, "--model", "refused")
    assert not InferenceJob.objects.exists()

    out = run_command("import_predictions", "vt", path, "--model", "qwen", "--match", "doc_id=row")

    assert "format: lmms-eval" in out
    assert "imported 4 predictions as job" in out and "0 unparseable" in out
    assert "1 line(s) matched no item and were left out: line 5: doc_id='7' names no item" in out
    assert (
        "exact_match: the tool's per-sample verdict (0/1) and StateLab's score agree on 2 of 4 line(s), disagree on 2"
        in out
    )
    assert (
        "line 1: item 'q1' query qa: exact_match=1.0 says right, StateLab says wrong (reply 'C', tool's target 'B')"
        in out
    )
    assert (
        "line 2: item 'q2' query qa: exact_match=0.0 says wrong, StateLab says right (reply '3', tool's target '3')"
        in out
    )
    assert stored("qwen") == {
        "q1": ("qa", "ok", "C"),
        "q2": ("qa", "ok", 3),
        "q3": ("qa", "ok", ["apple", "knife"]),
        "q4": ("qa", "ok", "A"),
    }
    q1 = Prediction.objects.get(job__model_name="qwen", item__external_id="q1")
    assert q1.raw_output == "C"
    assert q1.source == {
        "format": "lmms-eval",
        "line": 1,
        "doc_id": 0,
        "target": "B",
        "metrics": {"exact_match": 1.0},
        "doc_hash": f"{0:064x}",
    }
    job = InferenceJob.objects.get(model_name="qwen")
    assert job.params == {
        "import": {
            "format": "lmms-eval",
            "file": "20260101_samples_mytask.jsonl",
            "match": "doc_id=row",
            "unmatched": 1,
        }
    }
    audit = AuditEvent.objects.get(action="import", object_id=str(job.pk))
    assert (audit.details["match"], audit.details["unmatched"], audit.details["lines"]) == ("doc_id=row", 1, 4)


def test_the_docs_example_record_itself_imports(make_project, tmp_path):
    # lmms-eval's docs print one sample as an indented JSON object; saved as it is, it is one record.
    vt_release(make_project)
    path = tmp_path / "example.json"
    path.write_text(json.dumps(docs_sample(0, "B", "B", 1.0), indent=2))
    out = run_command("import_predictions", "vt", str(path), "--model", "docs", "--match", "doc_id=row")
    assert "imported 1 predictions" in out and "agree on 1 of 1 record(s), disagree on 0" in out
    assert stored("docs") == {"q1": ("qa", "ok", "B")}


def test_older_samples_with_doc_match_the_authors_ids_kept_under_extra(make_project, tmp_path):
    vt_release(make_project)
    samples = [
        {
            "doc_id": n,
            "doc": {"question_id": f"VT-{100 + ORDER.index(ext)}", "scene": f"s{ORDER.index(ext) % 2}"},
            "target": "x",
            "arguments": [["prompt", {"max_new_tokens": 16}]],
            "resps": [[reply]],
            "filtered_resps": [reply],
            "mytask_score": {"question_id": "…", "score": 1},  # a record: kept, not a verdict
        }
        for n, (ext, reply) in enumerate([("q4", "A"), ("q2", "5")])
    ]
    path = write_predictions(tmp_path, samples, "samples_mytask.jsonl")
    out = run_command(
        "import_predictions",
        "vt",
        path,
        "--model",
        "m",
        "--match",
        "doc.scene=extra.scene_id",
        "--match",
        "doc.question_id=extra.question_id",
    )
    assert "imported 2 predictions" in out and "matched no item" not in out and "verdict" not in out
    assert stored("m") == {"q4": ("qa", "ok", "A"), "q2": ("qa", "ok", 5)}
    assert Prediction.objects.get(item__external_id="q4").source["metrics"] == {
        "mytask_score": {"question_id": "…", "score": 1}
    }


def test_a_multi_query_protocol_takes_the_query_through_the_mapping(make_project, tmp_path):
    payloads = {f"it{i}": {**status_payload(i), "extra": {"pair": f"P{i}"}} for i in range(2)}
    make_release(make_project("st", "status"), payloads)
    samples = [
        {"doc_id": 0, "doc": {"pair": "P0", "kind": "osi_a"}, "target": "A", "filtered_resps": ["A"], "acc": 1},
        {"doc_id": 1, "doc": {"pair": "P1", "kind": "osi_b"}, "target": "B", "filtered_resps": ["A"], "acc": 1},
    ]
    path = write_predictions(tmp_path, samples, "samples.jsonl")
    with pytest.raises(CommandError, match=r"line 1: no query: the protocol asks several .*--match PATH=query"):
        run_command("import_predictions", "st", path, "--model", "st", "--match", "doc.pair=extra.pair")
    out = run_command(
        "import_predictions", "st", path, "--model", "st", "--match", "doc.pair=extra.pair", "--match", "doc.kind=query"
    )
    assert stored("st") == {"it0": ("osi_a", "ok", "A"), "it1": ("osi_b", "ok", "A")}
    assert "acc: the tool's per-sample verdict (0/1) and StateLab's score agree on 1 of 2 line(s), disagree on 1" in out
    assert "line 2: item 'it1' query osi_b: acc=1 says right, StateLab says wrong" in out


# --- VLMEvalKit ------------------------------------------------------------------------------

VLMEVAL_ROWS = [
    # index, question, answer (the benchmark's), category, prediction, hit (its evaluation's)
    (0, "Which?", "B", "fine_grained", "B", 1),
    (1, "How many?", "3", "quantitative", "4", 1),  # hit says right; StateLab reads 4: wrong
    (2, "Which objects?", "apple,knife", "causal", "knife, apple", 1),
    (3, "Next?", "A", "intermediate", "A", 1),
    (4, "Extra?", "A", "other", "A", 1),
]
HEADER = ["index", "question", "answer", "category", "prediction", "hit"]


def write_xlsx(path: Path, rows, *, formula_at: tuple[int, int] | None = None) -> str:
    """A sheet as VLMEvalKit's dump writes it: a header row, then one row per question."""
    book = Workbook()
    sheet = book.active
    sheet.append(HEADER)
    for row in rows:
        sheet.append(list(row))
    if formula_at:
        sheet.cell(row=formula_at[0], column=formula_at[1], value="=1+1")
    book.save(path)
    return str(path)


def test_a_vlmevalkit_xlsx_with_integer_indexes_imports_through_a_mapping(make_project, tmp_path):
    vt_release(make_project)
    path = write_xlsx(tmp_path / "Qwen_VisualTrans.xlsx", VLMEVAL_ROWS)

    with pytest.raises(
        CommandError, match=r"no row's id is an item of release v1 \(first: '0', '1', '2'\).*--match index=row"
    ):
        run_command("import_predictions", "vt", path, "--model", "refused")
    assert not InferenceJob.objects.exists()

    out = run_command("import_predictions", "vt", path, "--model", "xl", "--match", "index=row")
    assert "format: vlmevalkit; sheet 'Sheet' read" in out
    assert "imported 4 predictions" in out
    assert "1 row(s) matched no item and were left out: row 6: index='4' names no item" in out
    assert "hit: the tool's per-sample verdict (0/1) and StateLab's score agree on 3 of 4 row(s), disagree on 1" in out
    assert "row 3: item 'q2' query qa: hit=1 says right, StateLab says wrong (reply '4', tool's target '3')" in out
    assert stored("xl") == {
        "q1": ("qa", "ok", "B"),
        "q2": ("qa", "ok", 4),
        "q3": ("qa", "ok", ["apple", "knife"]),
        "q4": ("qa", "ok", "A"),
    }
    assert Prediction.objects.get(job__model_name="xl", item__external_id="q3").source == {
        "format": "vlmevalkit",
        "row": 4,
        "index": 2,
        "target": "apple,knife",
        "metrics": {"hit": 1},
    }


def test_a_formula_cell_is_refused_not_evaluated(make_project, tmp_path):
    vt_release(make_project)
    # The prediction of the second question is a formula; openpyxl stores no cached value for it,
    # and StateLab reads neither the formula nor a value computed from it.
    path = write_xlsx(tmp_path / "f.xlsx", VLMEVAL_ROWS[:4], formula_at=(3, 5))
    with pytest.raises(CommandError) as refused:
        run_command("import_predictions", "vt", path, "--model", "f", "--match", "index=row")
    assert str(refused.value) == (
        "1 bad row(s), nothing imported: row 3: cell E3 holds a formula (=1+1); formulas are not "
        "evaluated: save the sheet with values only"
    )
    assert not InferenceJob.objects.exists() and not Prediction.objects.exists()


def test_a_quoted_tsv_with_integer_indexes_counting_from_one(make_project, tmp_path):
    vt_release(make_project)
    path = tmp_path / "m_vt.tsv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, dialect="excel-tab", quoting=csv.QUOTE_ALL)  # as VLMEvalKit's dump_tsv
        writer.writerow(HEADER)
        for index, *rest in VLMEVAL_ROWS[:4]:
            writer.writerow([index + 1, *rest])
    out = run_command("import_predictions", "vt", str(path), "--model", "tsv", "--match", "index=row1")
    assert "imported 4 predictions" in out and "matched no item" not in out
    assert stored("tsv")["q2"] == ("qa", "ok", 4)
    assert Prediction.objects.get(job__model_name="tsv", item__external_id="q1").source["metrics"] == {"hit": "1"}


def test_the_indented_records_array_json(make_project, tmp_path):
    vt_release(make_project)
    records = [dict(zip(HEADER, row)) for row in VLMEVAL_ROWS[:4]]
    records[3]["category"] = float("nan")  # pandas' empty cell, which json.dump writes as NaN
    path = tmp_path / "m_vt.json"
    path.write_text(json.dumps(records, indent=4))
    assert "NaN" in path.read_text()
    out = run_command("import_predictions", "vt", str(path), "--model", "js", "--match", "index=row")
    assert "imported 4 predictions" in out and "agree on 3 of 4 record(s)" in out
    assert "record 2: item 'q2'" in out
    assert stored("js")["q4"] == ("qa", "ok", "A")


def test_no_matched_row_refuses_the_file_and_bad_mappings_say_why(make_project, tmp_path):
    vt_release(make_project)
    path = write_xlsx(tmp_path / "m.xlsx", VLMEVAL_ROWS)
    with pytest.raises(
        CommandError,
        match=r"no row matched an item of release v1 through --match question=extra.question_id "
        r"\(5 rows: row 2: question='Which\?' names no item",
    ):
        run_command("import_predictions", "vt", path, "--model", "a", "--match", "question=extra.question_id")
    with pytest.raises(CommandError, match=r"--match 'index': expected PATH=FIELD"):
        run_command("import_predictions", "vt", path, "--model", "b", "--match", "index")
    kitchen = write_xlsx(tmp_path / "k.xlsx", [(0, "Which?", "B", "kitchen", "B", 1)])
    with pytest.raises(
        CommandError, match=r"--match category=scene: category='kitchen' names several items \('q1', 'q2', 'q3'\)"
    ):
        run_command("import_predictions", "vt", kitchen, "--model", "c", "--match", "category=scene")
    assert not InferenceJob.objects.exists()


def test_a_metric_value_is_a_verdict_only_when_it_is_0_or_1():
    assert [verdict(v) for v in (True, False, 1, 0, 1.0, 0.0, "1", "0.0", "true")] == [
        True,
        False,
        True,
        False,
        True,
        False,
        True,
        False,
        True,
    ]
    assert [verdict(v) for v in (0.5, 100, -1, "yes", None, {"score": 1}, [1])] == [None] * 7


# --- a protocol's own format of kind "predictions" -----------------------------------------------


class TinyJudgeFormat(ReleaseFormat):
    """A test-only authors' output: {"tool": "tiny", "answers": [{"qid", "reply"}]}."""

    name = "tiny-answers"
    label = "tiny answers (tests)"
    kind = "predictions"

    def detect(self, path: Path) -> bool:
        return path.suffix == ".json" and b'"tool": "tiny"' in first_bytes(path)

    def read(self, path: Path, *, media_root: Path | None = None) -> Conversion:
        data = json.loads(path.read_text())
        if not isinstance(data.get("answers"), list):
            raise FormatRefused('found no "answers" list; expected {"tool": "tiny", "answers": [...]}')
        lines = [
            {"item": a["qid"], "query": "qa", "answer": a["reply"], "extra": {"seconds": a["seconds"]}}
            for a in data["answers"]
        ]
        return Conversion(lines, notes=[f"{len(lines)} answers read"])


FORMATS = (TinyJudgeFormat(),)


@pytest.fixture
def tiny_format(monkeypatch):
    """The VisualTrans protocol names this module as its formats module for the test."""
    monkeypatch.setattr(type(registry.get("visualtrans")), "formats_module", __name__)


def test_a_protocol_predictions_format_is_detected_and_read(make_project, tmp_path, tiny_format):
    vt_release(make_project)
    path = tmp_path / "out.json"
    path.write_text(json.dumps({"tool": "tiny", "answers": [{"qid": "q1", "reply": "B", "seconds": 2.5}]}))
    out = run_command("import_predictions", "vt", str(path), "--model", "tiny")
    assert "format: tiny-answers; read as tiny answers (tests); 1 answers read" in out
    assert stored("tiny") == {"q1": ("qa", "ok", "B")}
    assert Prediction.objects.get(job__model_name="tiny").source == {
        "format": "tiny-answers",
        "extra": {"seconds": 2.5},
    }

    # Forced on a file it refuses: one message, nothing imported.
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"tool": "else"}))
    with pytest.raises(CommandError, match=r'nothing imported: tiny-answers: found no "answers" list'):
        run_command("import_predictions", "vt", str(other), "--model", "forced", "--format", "tiny-answers")
    with pytest.raises(
        CommandError,
        match=r"unknown format 'nope' for visualtrans; use one of auto, statelab, lmms-eval, vlmevalkit, tiny-answers",
    ):
        run_command("import_predictions", "vt", str(other), "--model", "x", "--format", "nope")
    assert list(InferenceJob.objects.values_list("model_name", flat=True)) == ["tiny"]
