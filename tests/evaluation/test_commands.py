"""Predictions imported through the command, leaderboard and correlation read back through theirs."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.models import Annotation, Item
from inference.models import InferenceJob, Prediction
from protocols.oscbench import CRITERIA
from tests.helpers.files import write_predictions
from tests.helpers.items import osc_payload, run_command, status_payload

from .factories import make_release, rate

pytestmark = pytest.mark.django_db


def test_status_import_then_leaderboard_json(make_project, tmp_path):
    project = make_project("st", "status")
    release = make_release(project, {f"it{i}": status_payload(i) for i in range(4)})
    resolved = {ri.item.external_id: ri.payload["resolved"] for ri in release.release_items.select_related("item")}
    lines = []
    for i in range(4):
        ext = f"it{i}"
        r = resolved[ext]
        # it0: everything right (sci4 given as option text); it1: OSI answered "A" twice;
        # it2: all right except sci2; it3: free-text answers, sci4 unparseable.
        ans = {q: r[q]["answer"] for q in r}
        if i == 0:
            ans["sci4"] = r["sci4"]["options"][ord(r["sci4"]["answer"]) - 65]
        if i == 1:
            ans["osi_b"] = "A"
        if i == 2:
            ans["sci2"] = "B" if r["sci2"]["answer"] == "A" else "A"
        if i == 3:
            ans = {q: f"Answer: ({a})" for q, a in ans.items()}
            ans["sci4"] = "I cannot tell"
        for q, a in ans.items():
            line = {"item": ext, "query": q, "answer": a}
            if q.startswith("osi"):
                line["logprobs"] = {"A": -0.1 if q == "osi_a" else -1.5, "B": -2.0 if q == "osi_a" else -0.3}
            lines.append(line)
    out = run_command(
        "import_predictions", "st", write_predictions(tmp_path, lines), "--model", "m1", "--release", "v1"
    )
    assert "imported 24 predictions" in out and "1 unparseable" in out
    job = InferenceJob.objects.get(model_name="m1")
    assert (job.mode, job.status, job.endpoint, job.release_id) == ("imported", "finished", None, release.pk)
    assert Prediction.objects.filter(job=job).count() == 24
    assert (
        Prediction.objects.get(job=job, item__external_id="it0", query="sci4").answer
        == resolved["it0"]["sci4"]["answer"]
    )

    board = json.loads(run_command("leaderboard", "st", "--release", "v1", "--format", "json", "--boot", "200"))
    assert list(board) == ["project", "release", "protocol", "cluster_key", "rows"]
    assert board["cluster_key"] == "extra.video_id"
    assert (board["project"], board["release"], board["protocol"]) == ("st", "v1", "status")
    assert [r["model"] for r in board["rows"]] == ["m1", "Random"]
    # a model's row also carries its tokens and cost ("usage"); Random has none
    assert [list(r) for r in board["rows"]] == [
        ["model", "n", "parse_failures", "metrics", "ci", "se", "se_clustered", "design_effect", "usage"],
        ["model", "n", "parse_failures", "metrics", "ci", "se", "se_clustered", "design_effect"],
    ]
    detailed = json.loads(run_command("leaderboard", "st", "--release", "v1", "--details", "--boot", "200"))
    assert detailed["rows"][0]["metrics"] == board["rows"][0]["metrics"]
    m1 = detailed["rows"][0]
    assert (m1["n"], m1["parse_failures"]) == (4, 1)
    # OSI 7/8, IR 8/8, SCI2 3/4, SCI4 3/4; OA (87.5 + 100 + 75) / 3; ROA: it0, it2 -> 2/4.
    assert m1["metrics"] == {
        "acc_osi": 87.5,
        "acc_ir": 100.0,
        "acc_sci": 75.0,
        "oa": 87.5,
        "racc_osi": 75.0,
        "racc_ir": 100.0,
        "racc_sci": 75.0,
        "roa": 50.0,
    }
    assert list(m1["ci"]) == list(m1["metrics"])
    assert m1["ci"]["acc_ir"] == [100.0, 100.0]
    assert m1["breakdowns"]["category:positional:racc_osi"]["value"] == 50.0
    assert m1["diagnostics"]["reassigned"]["racc_osi"] == 100.0
    assert board["rows"][1]["n"] == 4 and board["rows"][1]["parse_failures"] == 0
    assert m1["rank"] == 1

    # Tables carry the intervals ("87.50 [lo, hi]") and the chance row (docs/protocols/status.md, "Metrics").
    ci50 = json.loads(run_command("leaderboard", "st", "--details", "--boot", "50"))["rows"][0]["ci"]
    cell = {k: f"{v:.2f} [{ci50[k][0]:.2f}, {ci50[k][1]:.2f}]" for k, v in m1["metrics"].items()}
    assert cell["acc_ir"] == "100.00 [100.00, 100.00]"
    # Markdown and LaTeX, read by people, name the columns ("acc_osi" -> "Acc OSI"); CSV keeps the keys.
    text = run_command("leaderboard", "st", "--format", "markdown", "--boot", "50")
    md, errors_caption, errors_table = text.split("\n\n")
    md = md.splitlines()
    assert md[0] == (
        "| Model | Rank | n | Parse failures | Acc OSI | Acc IR | Acc SCI | OA | RAcc OSI | RAcc IR | RAcc SCI | ROA |"
    )
    assert md[2] == "| m1 | 1 | 4 | 1 | " + " | ".join(cell[k] for k in m1["metrics"]) + " |"
    assert md[-1] == "| Chance |  |  |  | 50.00 | 50.00 | 50.00 | 50.00 | 25.00 | 25.00 | 25.00 | 1.56 |"
    # Then the standard errors, naive / clustered (design effect), of the metrics that are means of item
    # scores; the items have no source video here, so each is its own cluster.
    assert errors_caption == (
        "Standard errors of the means, naive / clustered by extra.video_id, design effect in parentheses; "
        "metrics derived from several means have none"
    )
    errors_lines = errors_table.splitlines()
    with_errors = [k for k in m1["metrics"] if m1["se"].get(k) is not None]
    assert with_errors == list(m1["metrics"])  # every STATUS metric is a mean of item scores
    names = {
        "acc_osi": "Acc OSI",
        "acc_ir": "Acc IR",
        "acc_sci": "Acc SCI",
        "oa": "OA",
        "racc_osi": "RAcc OSI",
        "racc_ir": "RAcc IR",
        "racc_sci": "RAcc SCI",
        "roa": "ROA",
    }
    assert errors_lines[0] == "| Model | " + " | ".join(names[k] for k in with_errors) + " |"
    m1_errors = errors_lines[2].strip("| ").split(" | ")
    assert m1_errors[0] == "m1"
    for key, text in zip(with_errors, m1_errors[1:]):
        se, se_clustered, design_effect = m1["se"][key], m1["se_clustered"][key], m1["design_effect"][key]
        expected = f"{se:.3f} / " + ("–" if se_clustered is None else f"{se_clustered:.3f}")
        assert text == expected + ("" if design_effect is None else f" ({design_effect:.3f})"), key
    latex = run_command("leaderboard", "st", "--format", "latex", "--boot", "50")
    assert "Model & Rank & n & Parse failures & Acc OSI & Acc IR" in latex
    assert "Model & Acc OSI" in latex.split(r"\end{table}")[1]  # the standard errors' table
    assert "m1 & 1 & 4 & 1 & " + " & ".join(cell[k] for k in m1["metrics"]) + r" \\" in latex
    assert (
        r"\midrule" + "\n" + r"Chance &  &  &  & 50.00 & 50.00 & 50.00 & 50.00 & 25.00 & 25.00 & 25.00 & 1.56 \\"
        in latex
    )
    csv_lines = run_command("leaderboard", "st", "--format", "csv", "--boot", "50").splitlines()
    assert csv_lines[0].startswith(
        "model,rank,n,parse_failures,acc_osi,acc_osi_ci_lo,acc_osi_ci_hi,acc_osi_se,acc_osi_se_clustered,"
        "acc_osi_design_effect,acc_ir,"
    )
    osi = [m1[name]["acc_osi"] for name in ("se", "se_clustered", "design_effect")]
    assert csv_lines[1].startswith(
        f"m1,1,4,1,87.50,{ci50['acc_osi'][0]:.2f},{ci50['acc_osi'][1]:.2f},"
        + ",".join("" if v is None else f"{v:.3f}" for v in osi)
        + ",100.00,100.00,100.00,"
    )
    assert csv_lines[-1] == "Chance,,,," + ",".join(f"{c},,,,," for c in ["50.00"] * 4 + ["25.00"] * 3 + ["1.56"])

    # One breakdown tab in every format; an unknown one is refused with the names that exist.
    md = run_command(
        "leaderboard", "st", "--format", "markdown", "--boot", "50", "--breakdown", "category:positional"
    ).splitlines()
    assert md[0].endswith("| Acc OSI | Acc IR | Acc SCI | OA | RAcc OSI | RAcc IR | RAcc SCI | ROA |")
    assert md[2].startswith("| m1 | 1 | 4 | 1 | 75.00 [")  # it0, it1: OSI 3/4
    assert md[-1].endswith("| 50.00 | 50.00 | 50.00 | 50.00 | 25.00 | 25.00 | 25.00 | 1.56 |")
    latex = run_command("leaderboard", "st", "--format", "latex", "--boot", "50", "--breakdown", "difference:slight")
    assert "difference slight" in latex and "m1 & 1 & 4 & 1 & 87.50 [" in latex
    csv_text = run_command("leaderboard", "st", "--format", "csv", "--boot", "50", "--breakdown", "category:functional")
    assert csv_text.splitlines()[0].startswith("model,rank,n,parse_failures,acc_osi,acc_osi_ci_lo,acc_osi_ci_hi")
    tab = json.loads(run_command("leaderboard", "st", "--boot", "50", "--breakdown", "category:positional"))
    assert tab["breakdown"] == "category:positional"
    assert tab["rows"][0]["metrics"]["racc_osi"] == 50.0 == m1["breakdowns"]["category:positional:racc_osi"]["value"]
    with pytest.raises(CommandError, match="unknown breakdown 'category:nope'.*category:positional"):
        run_command("leaderboard", "st", "--boot", "20", "--breakdown", "category:nope")


def test_bad_lines_are_refused_whole_with_line_and_reason(make_project, tmp_path):
    project = make_project("st2", "status")
    make_release(project, {"it0": status_payload(0)})
    lines = [
        {"item": "it0", "query": "osi_a", "answer": "A"},
        "{not json",
        {"item": "nope", "query": "osi_a", "answer": "A"},
        {"item": "it0", "query": "osi_c", "answer": "A"},
        {"item": "it0", "query": "osi_a", "answer": "B"},
        {"item": "it0", "query": "osi_b", "answer": 3},
        {"item": "it0", "query": "ir_a", "answer": "A", "logprobs": {"A": 0.5}},
    ]
    with pytest.raises(CommandError) as exc:
        run_command("import_predictions", "st2", write_predictions(tmp_path, lines), "--model", "bad")
    msg = str(exc.value)
    assert "6 bad line(s), nothing imported" in msg
    for fragment in (
        "line 2: not valid JSON",
        "line 3: unknown item 'nope'",
        "line 4: unknown query 'osi_c'",
        "line 5: duplicate of line 1",
        "line 6: answer with a letter",
        'line 7: "logprobs"',
    ):
        assert fragment in msg
    assert InferenceJob.objects.count() == 0 and Prediction.objects.count() == 0


def test_oscbench_generators_judge_and_correlation(make_project, tmp_path):
    project = make_project("osc", "oscbench", annotations_per_item=3)
    payloads = {
        f"{g}{i}": osc_payload(g, i, "regular" if i % 2 else "novel") for g in ("genA", "genB") for i in range(4)
    }
    make_release(project, payloads)
    human_levels = {"genA0": 5, "genA1": 4, "genA2": 4, "genA3": 3, "genB0": 2, "genB1": 3, "genB2": 1, "genB3": 2}
    for ext, level in human_levels.items():
        for k, rater in enumerate(("r1", "r2", "r3")):
            scores = {c: min(5, max(1, level + (k - 1) * (c == "realism"))) for c in CRITERIA}
            scores["subject"] = None  # N/A: no subject named
            rate(ext, project, rater, scores)
    judge_lines = []
    for ext, level in human_levels.items():
        judged = {c: min(5, level + (1 if ext == "genB2" else 0)) for c in CRITERIA}
        judged["subject"] = None
        judge_lines.append(
            {"item": ext, "query": "judge", "answer": json.dumps({"scores": judged, "evidence": "seen"})}
        )
    run_command(
        "import_predictions", "osc", write_predictions(tmp_path, judge_lines), "--model", "judge-1", "--release", "v1"
    )

    board = json.loads(run_command("leaderboard", "osc", "--format", "json", "--boot", "100", "--details"))
    # Generators in order of the state-change score (evaluation/ranking.py), the Random row where it falls.
    assert [r["model"] for r in board["rows"]] == ["genA", "Random", "genB"]
    assert board["ranked_by"] == ["state_change", "osc_accuracy", "osc_consistency", "model"]
    assert [r["metrics"]["state_change"] for r in board["rows"]][::2] == [0.75, 0.25]
    assert 0.25 < board["rows"][1]["metrics"]["state_change"] < 0.75
    gen_a = board["rows"][0]
    # object: mean of (5, 4, 4, 3) -> normalized (1 + .75 + .75 + .5) / 4
    assert gen_a["metrics"]["object"] == 0.75
    assert gen_a["metrics"]["subject"] is None  # N/A everywhere: missing, never 0
    assert gen_a["ci"]["subject"] is None
    assert board["rows"][2]["metrics"]["object"] == 0.25  # (2, 3, 1, 2) -> (.25 + .5 + 0 + .25) / 4
    assert gen_a["breakdowns"]["state_change:scenario:novel"]["value"] == 0.875  # genA0, genA2
    assert gen_a["rank"] == 1

    judged = json.loads(run_command("leaderboard", "osc", "--judge", "judge-1", "--format", "json", "--boot", "100"))
    by_model = {r["model"]: r for r in judged["rows"]}
    assert by_model["genB"]["metrics"]["object"] == 0.313  # (2, 3, 2, 2) -> 1.25 / 4 = 0.3125, half up

    plain = json.loads(run_command("correlation", "osc", "--format", "json", "--boot", "200"))
    assert list(plain) == ["criteria", "judges", "human"]
    assert list(plain["judges"][0]) == ["judge", "per_criterion", "system_kendall_tau_b", "system_note"]
    assert all(
        list(v)[:4] == ["kendall_tau_b", "spearman_rho", "n", "ci"]
        for v in plain["judges"][0]["per_criterion"].values()
    )
    assert all(
        list(v)[:3] == ["loo_kendall_tau_b", "loo_spearman_rho", "krippendorff_alpha"] for v in plain["human"].values()
    )
    # The public keys, plus a note exactly where a statistic is null (here: subject, all N/A; 2 generators).
    per = plain["judges"][0]["per_criterion"]
    assert per["subject"]["kendall_tau_b"] is None and per["subject"]["note"].startswith(
        "too few items: 0 paired values"
    )
    assert "note" not in per["object"] and per["object"]["kendall_tau_b"] is not None
    assert plain["judges"][0]["system_kendall_tau_b"] is None
    assert plain["judges"][0]["system_note"].startswith("too few items: 2 paired values")
    assert plain["human"]["subject"]["note"].startswith("too few raters")
    err = StringIO()
    call_command("correlation", "osc", "--boot", "50", stdout=StringIO(), stderr=err)
    assert "judge-1 / subject: too few items" in err.getvalue()  # a null says why
    report = json.loads(run_command("correlation", "osc", "--format", "json", "--boot", "200", "--details"))
    assert report["judges"][0]["per_criterion"]["object"] == plain["judges"][0]["per_criterion"]["object"]
    assert report["criteria"] == list(CRITERIA)
    (j,) = report["judges"]
    assert j["judge"] == "judge-1"
    assert set(j["per_criterion"]["object"]) >= {"kendall_tau_b", "spearman_rho", "n", "ci"}
    from scipy import stats as sps

    humans = [human_levels[e] for e in sorted(human_levels)]
    judge = [min(5, human_levels[e] + (1 if e == "genB2" else 0)) for e in sorted(human_levels)]
    assert j["per_criterion"]["object"]["kendall_tau_b"] == pytest.approx(
        sps.kendalltau(judge, humans).statistic, abs=1e-12
    )
    assert j["per_criterion"]["object"]["spearman_rho"] == pytest.approx(
        sps.spearmanr(judge, humans).statistic, abs=1e-12
    )
    assert j["per_criterion"]["object"]["n"] == 8
    assert j["per_criterion"]["subject"]["kendall_tau_b"] is None
    assert "too few" in j["per_criterion"]["subject"]["note"]
    assert j["system_kendall_tau_b"] is None and "too few" in j["system_note"]  # 2 generators
    assert report["human"]["object"]["krippendorff_alpha"] == 1.0
    assert report["human"]["subject"]["krippendorff_alpha"] is None
    assert set(report["human"]["realism"]) >= {"loo_kendall_tau_b", "loo_spearman_rho", "krippendorff_alpha"}
    # Details: system level per criterion and overall with n (generators) and an interval; the
    # human reference with n (videos rated twice or more) and intervals.
    assert j["system"] == {"kendall_tau_b": None, "n": 2, "ci": None, "ci_two_way": None}
    assert "system_warning" not in j  # no figure, no warning: the note says why
    assert j["system_per_criterion"]["object"]["n"] == 2 and "too few" in j["system_per_criterion"]["object"]["note"]
    assert report["human"]["object"]["n"] == 8
    assert report["human"]["object"]["ci"]["krippendorff_alpha"] == [1.0, 1.0]
    assert report["human"]["subject"]["ci"]["krippendorff_alpha"] is None

    csv_text = run_command("correlation", "osc", "--format", "csv", "--boot", "50")
    assert csv_text.splitlines()[0] == (
        "source,criterion,kendall_tau_b,spearman_rho,n,tau_ci_lo,tau_ci_hi,rho_ci_lo,rho_ci_hi,"
        "tau_two_way_ci_lo,tau_two_way_ci_hi,krippendorff_alpha,note"
    )
    assert "\\begin{tabular}" in run_command("correlation", "osc", "--format", "latex", "--boot", "50")
    assert Annotation.objects.count() == 24 and Item.objects.count() == 8


def test_row_for_job_matches_the_leaderboard_row(make_project, tmp_path):
    from evaluation.leaderboard import row_for_job

    project = make_project("st3", "status")
    release = make_release(project, {f"it{i}": status_payload(i) for i in range(2)})
    resolved = {ri.item.external_id: ri.payload["resolved"] for ri in release.release_items.select_related("item")}
    lines = [{"item": e, "query": q, "answer": "A"} for e, r in resolved.items() for q in r]
    run_command("import_predictions", "st3", write_predictions(tmp_path, lines), "--model", "always-a")
    row = row_for_job(InferenceJob.objects.get(model_name="always-a"))
    board = json.loads(run_command("leaderboard", "st3", "--boot", "200"))
    assert row["model"] == "always-a"
    assert row["metrics"] == board["rows"][0]["metrics"]
    assert row["metrics"]["acc_osi"] == 50.0 and row["metrics"]["racc_osi"] == 0.0
    assert row["diagnostics"]["same_letter"]["osi"]["share"] == 100.0


def test_latest_job_of_a_model_is_the_one_finished_last(make_project, tmp_path):
    from datetime import timedelta

    from django.utils import timezone

    project = make_project("st4", "status")
    release = make_release(project, {f"it{i}": status_payload(i) for i in range(2)})
    resolved = {ri.item.external_id: ri.payload["resolved"] for ri in release.release_items.select_related("item")}
    right = [{"item": e, "query": q, "answer": r[q]["answer"]} for e, r in resolved.items() for q in r]
    wrong = [{"item": e, "query": q, "answer": "Z"} for e, r in resolved.items() for q in r]
    run_command("import_predictions", "st4", write_predictions(tmp_path, right), "--model", "m")
    run_command("import_predictions", "st4", write_predictions(tmp_path, wrong, "w.jsonl"), "--model", "m")
    first, second = InferenceJob.objects.filter(model_name="m").order_by("created_at", "pk")
    now = timezone.now()
    # The job created first finished last (e.g. re-run after the other was created): it is the latest.
    InferenceJob.objects.filter(pk=first.pk).update(finished_at=now)
    InferenceJob.objects.filter(pk=second.pk).update(finished_at=now - timedelta(hours=1))
    board = json.loads(run_command("leaderboard", "st4", "--boot", "20"))
    (row,) = [r for r in board["rows"] if r["model"] == "m"]
    assert row["metrics"]["roa"] == 100.0 and row["parse_failures"] == 0
