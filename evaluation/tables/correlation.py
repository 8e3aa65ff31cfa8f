"""The human-judge correlation report (evaluation/correlation.py) as CSV, LaTeX and public JSON. No Django."""

from __future__ import annotations

import io
import json
from typing import Any

from protocols.kit.csv_cells import csv_writer

from .text import latex_cell, latex_escape, latex_table


def _notes(*texts: str | None) -> str:
    return "; ".join(t for t in texts if t)


def correlation_rows(report: dict[str, Any]) -> list[list[Any]]:
    """Flat rows: source, criterion, kendall_tau_b, spearman_rho, n, tau ci lo/hi, rho ci lo/hi,
    two-way tau ci lo/hi, alpha, note.

    Per judge: one row per criterion, "system" (generators ranked by the mean over criteria) and
    "system:<criterion>" (ranked by that criterion), n = generators, with the two-way interval
    (items and systems resampled) and, in the note, the warning when fewer than 10 are ranked;
    human rows: n = items rated by at least two raters, intervals of the leave-one-rater-out averages.
    """
    none2 = [None, None]
    rows = []
    for j in report["judges"]:
        for c in report["criteria"]:
            e = j["per_criterion"][c]
            ci = e.get("ci") or {}
            tci, rci = ci.get("kendall_tau_b") or none2, ci.get("spearman_rho") or none2
            rows.append(
                [j["judge"], c, e["kendall_tau_b"], e["spearman_rho"], e["n"], *tci, *rci, *none2, None, e.get("note")]
            )
        system = j.get("system") or {}
        rows.append(
            [
                j["judge"],
                "system",
                j["system_kendall_tau_b"],
                None,
                system.get("n"),
                *(system.get("ci") or none2),
                *none2,
                *(system.get("ci_two_way") or none2),
                None,
                _notes(j.get("system_note"), j.get("system_warning")),
            ]
        )
        for c, e in (j.get("system_per_criterion") or {}).items():
            rows.append(
                [
                    j["judge"],
                    f"system:{c}",
                    e["kendall_tau_b"],
                    None,
                    e["n"],
                    *(e.get("ci") or none2),
                    *none2,
                    *(e.get("ci_two_way") or none2),
                    None,
                    _notes(e.get("note"), e.get("warning")),
                ]
            )
    for c in report["criteria"]:
        h = report["human"][c]
        ci = h.get("ci") or {}
        tci, rci = ci.get("loo_kendall_tau_b") or [None, None], ci.get("loo_spearman_rho") or [None, None]
        rows.append(
            [
                "human (leave-one-rater-out)",
                c,
                h["loo_kendall_tau_b"],
                h["loo_spearman_rho"],
                h.get("n"),
                *tci,
                *rci,
                *none2,
                h["krippendorff_alpha"],
                h.get("note"),
            ]
        )
    return rows


CORRELATION_HEADER = [
    "source",
    "criterion",
    "kendall_tau_b",
    "spearman_rho",
    "n",
    "tau_ci_lo",
    "tau_ci_hi",
    "rho_ci_lo",
    "rho_ci_hi",
    "tau_two_way_ci_lo",
    "tau_two_way_ci_hi",
    "krippendorff_alpha",
    "note",
]


def correlation_csv(report: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv_writer(buf, lineterminator="\n")
    w.writerow(CORRELATION_HEADER)
    for r in correlation_rows(report):
        w.writerow(["" if v is None else (f"{v:.4f}" if isinstance(v, float) else v) for v in r])
    return buf.getvalue()


def _latex_interval(ci: list[float] | None) -> str:
    return "--" if not ci or any(v is None for v in ci) else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def correlation_latex(report: dict[str, Any]) -> str:
    # Header cells carry math on purpose: escape the criterion names, never the math after them.
    # The system tau's two-way interval (items and systems resampled) has a column of its own, as
    # in the CSV (tau_two_way_ci_lo / _hi); a dagger marks a tau over fewer than 10 systems.
    header = (
        ["Judge"]
        + [f"{latex_escape(c)} $\\tau_b$" for c in report["criteria"]]
        + ["System $\\tau_b$", "System 95\\% CI (two-way)"]
    )
    rows = []
    few = False
    for j in report["judges"]:
        warned = bool(j.get("system_warning"))
        few = few or warned
        rows.append(
            [latex_escape(j["judge"])]
            + [latex_cell(j["per_criterion"][c]["kendall_tau_b"], 3) for c in report["criteria"]]
            + [latex_cell(j["system_kendall_tau_b"], 3) + ("$^\\dagger$" if warned else "")]
            + [_latex_interval((j.get("system") or {}).get("ci_two_way"))]
        )
    rows.append(
        ["Human (LOO)"]
        + [latex_cell(report["human"][c]["loo_kendall_tau_b"], 3) for c in report["criteria"]]
        + ["--", "--"]
    )
    rows.append(
        [r"Krippendorff $\alpha$"]
        + [latex_cell(report["human"][c]["krippendorff_alpha"], 3) for c in report["criteria"]]
        + ["--", "--"]
    )
    caption = "Judge-human agreement (Kendall tau-b per criterion; system tau-b over generators with its two-way"
    caption += " interval, items and systems resampled)"
    if few:
        caption += "; dagger: fewer than 10 systems ranked"
    table = latex_table(["H"] * len(header), rows, caption)
    head_line = " & ".join(header) + r" \\"
    return table.replace(" & ".join(["H"] * len(header)) + r" \\", head_line)


def correlation_public(report: dict[str, Any]) -> dict[str, Any]:
    """The public JSON shape of the correlation report; a statistic that is null carries a "note" saying why (too few
    items, one side constant). Project, release and the rest come with details."""

    def pick(entry: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
        out = {k: entry[k] for k in keys}
        if entry.get("note"):
            out["note"] = entry["note"]
        return out

    return {
        "criteria": list(report["criteria"]),
        "judges": [
            {
                "judge": j["judge"],
                "per_criterion": {
                    c: pick(e, ("kendall_tau_b", "spearman_rho", "n", "ci")) for c, e in j["per_criterion"].items()
                },
                "system_kendall_tau_b": j["system_kendall_tau_b"],
                **({"system_note": j["system_note"]} if j.get("system_note") else {}),
                **({"system_warning": j["system_warning"]} if j.get("system_warning") else {}),
            }
            for j in report["judges"]
        ],
        "human": {
            c: pick(h, ("loo_kendall_tau_b", "loo_spearman_rho", "krippendorff_alpha"))
            for c, h in report["human"].items()
        },
    }


def correlation_notes(report: dict[str, Any]) -> list[str]:
    """Why each null statistic is null, one line each (printed to stderr by the command)."""
    notes = []
    for j in report["judges"]:
        for c, e in j["per_criterion"].items():
            if e.get("note"):
                notes.append(f"{j['judge']} / {c}: {e['note']}")
        if j.get("system_note"):
            notes.append(f"{j['judge']} / system: {j['system_note']}")
        if j.get("system_warning"):
            notes.append(f"{j['judge']} / system: {j['system_warning']}")
    for c, h in report["human"].items():
        if h.get("note"):
            notes.append(f"human / {c}: {h['note']}")
    return notes


def render_correlation(report: dict[str, Any], fmt: str, *, details: bool = False) -> str:
    if fmt == "json":
        return json.dumps(report if details else correlation_public(report), indent=2, ensure_ascii=False)
    if fmt == "csv":
        return correlation_csv(report)
    if fmt == "latex":
        return correlation_latex(report)
    raise ValueError(f"unknown format {fmt!r}")
