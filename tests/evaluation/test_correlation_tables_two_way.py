"""The correlation report's system τ carries its two-way interval (items and systems resampled) in
every table: a column of its own in LaTeX, two in CSV (spreadsheet-safe)."""

from __future__ import annotations

import csv
import io

from evaluation import tables


def _report(judge: str = "judge_1", warning: str | None = "only 4 systems ranked") -> dict:
    entry = {
        "judge": judge,
        "system_kendall_tau_b": 0.5,
        "per_criterion": {"osc_accuracy": {"kendall_tau_b": 0.25, "spearman_rho": 0.3, "n": 12, "ci": None}},
        "system": {"kendall_tau_b": 0.5, "n": 4, "ci": [0.1, 0.8], "ci_two_way": [-0.2, 0.9]},
        "system_per_criterion": {},
    }
    if warning:
        entry["system_warning"] = warning
    return {
        "criteria": ["osc_accuracy"],
        "judges": [entry],
        "human": {
            "osc_accuracy": {"loo_kendall_tau_b": 0.5, "loo_spearman_rho": 0.5, "krippendorff_alpha": 0.75, "n": 9}
        },
    }


def test_latex_has_a_two_way_interval_column():
    latex = tables.correlation_latex(_report())
    head = next(line for line in latex.splitlines() if line.startswith("Judge &"))
    assert head.endswith(r"System $\tau_b$ & System 95\% CI (two-way) \\")
    assert r"judge\_1 & 0.250 & 0.500$^\dagger$ & [-0.200, 0.900] \\" in latex
    assert "dagger: fewer than 10 systems ranked" in latex
    # Human rows have no system figure: dashes in both system columns; every row as wide as the head.
    assert r"Human (LOO) & 0.500 & -- & -- \\" in latex
    body = [line for line in latex.splitlines() if line.endswith(r"\\")]
    assert {line.count(" & ") for line in body} == {3}
    calm = tables.correlation_latex(_report(warning=None))
    assert r"judge\_1 & 0.250 & 0.500 & [-0.200, 0.900] \\" in calm and "dagger" not in calm


def test_csv_has_the_two_way_interval_and_is_spreadsheet_safe():
    text = tables.correlation_csv(_report(judge="=HYPERLINK(1)"))
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    system = next(r for r in rows[1:] if r[1] == "system")
    assert system[header.index("tau_two_way_ci_lo")] == "-0.2000"
    assert system[header.index("tau_two_way_ci_hi")] == "0.9000"
    assert system[header.index("note")] == "only 4 systems ranked"
    assert all(r[0] == "'=HYPERLINK(1)" for r in rows[1:] if r[0] != "human (leave-one-rater-out)")
