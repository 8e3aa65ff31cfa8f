"""import_predictions on a real lmms-eval log: the `--log_samples` file lmms-eval 0.7.3 wrote when the
lmms-eval tier ran StateLab's VisualTrans task with its stub model (tests/lmms/test_lmms_task.py,
test_visualtrans_task_runs_in_lmms_eval, which keeps data/ in step with what lmms-eval writes).
The release is built with the tier's ids and payloads (tests/lmms/cases.py), so the log's ids map
to its items; StateLab then prints the figures lmms-eval printed for that run."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from inference.models import InferenceJob, Prediction
from tests.lmms import cases

from .factories import make_release

pytestmark = pytest.mark.django_db

LOG = Path(__file__).with_name("data") / "lmms_eval_0.7.3_samples_statelab_vt_demo_v1.jsonl"


def test_a_real_lmms_eval_log_imports_and_scores_as_lmms_eval_did(make_project):
    project = make_project("vt-demo", "visualtrans")
    make_release(project, cases.vt_payloads(), seed=cases.SEED)
    samples = [json.loads(line) for line in LOG.read_text().splitlines()]
    # The log as lmms-eval 0.7.3 writes it: no "doc"; the task's "item" metric carries the ids.
    assert all("doc" not in s and s["item"]["query"] == "qa" for s in samples) and len(samples) == 6

    out = StringIO()
    call_command("import_predictions", project.slug, str(LOG), "--format", "lmms-eval", "--model", "stub", stdout=out)

    assert "imported 6 predictions" in out.getvalue() and "1 unparseable" in out.getvalue()
    job = InferenceJob.objects.get(model_name="stub")
    assert (job.mode, job.status) == ("imported", "finished")
    stored = {p.item.external_id: p for p in Prediction.objects.filter(job=job).select_related("item")}
    # Every logged reply is stored, raw as lmms-eval logged it and parsed as StateLab reads it.
    assert {ext: p.raw_output for ext, p in stored.items()} == {s["item"]["id"]: s["filtered_resps"] for s in samples}
    assert {ext: (p.query, p.status, p.answer) for ext, p in stored.items()} == {
        "vt-0": ("qa", "ok", "B"),
        "vt-1": ("qa", "ok", "B"),
        "vt-2": ("qa", "ok", 3),
        "vt-3": ("qa", "ok", ["cup", "lid"]),
        "vt-4": ("qa", "failed", None),
        "vt-5": ("qa", "ok", "A"),
    }

    board = StringIO()
    call_command("leaderboard", project.slug, "--boot", "20", stdout=board)
    row = next(r for r in json.loads(board.getvalue())["rows"] if r["model"] == "stub")
    # The figures the lmms-eval tier asserts lmms-eval printed for this run (worked out by hand in
    # tests/lmms/cases.py): correct vt-0, vt-2, vt-3, vt-5; vt-1 wrong; vt-4 empty.
    want = dict(cases.VT_SCORES)
    assert (row["parse_failures"], row["n"]) == (want.pop("parse_failures"), want.pop("item")) == (1, 6)
    assert (
        row["metrics"]
        == want
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
        }
    )
