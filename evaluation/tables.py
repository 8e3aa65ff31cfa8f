"""Render leaderboards and correlation tables as JSON, CSV, LaTeX and Markdown. No Django."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any

from protocols import registry
from protocols.kit.csv_cells import csv_writer

from .scoring import answer_sets

DASH = "–"


def _fmt(value: Any, places: int) -> str:
    if value is None:
        return DASH
    if isinstance(value, float):
        return f"{value:.{places}f}"
    return str(value)


def places_for(protocol: str) -> int:
    return registry.get(protocol).places


class UnknownBreakdown(ValueError):
    pass


def breakdown_keys(board: dict[str, Any], name: str) -> list[str]:
    """Keys of one breakdown tab ("category:positional" -> ["category:positional:acc_osi", ...])."""
    groups: dict[str, list[str]] = {}
    for row in board["rows"]:
        for key in row.get("breakdowns", {}):
            group = key.rpartition(":")[0] or key
            groups.setdefault(group, [])
            if key not in groups[group]:
                groups[group].append(key)
    if name not in groups:
        known = ", ".join(groups) or "none"
        raise UnknownBreakdown(f"unknown breakdown {name!r}; this board has: {known}")
    return groups[name]


def leaderboard_columns(
    board: dict[str, Any], keys: Sequence[str] | None = None, breakdown: str | None = None
) -> list[str]:
    if keys is not None:
        return list(keys)
    if breakdown is not None:
        return breakdown_keys(board, breakdown)
    return list(board["rows"][0]["metrics"]) if board["rows"] else []


def _header(key: str, breakdown: str | None) -> str:
    """Column name: a breakdown's keys print as their metric ("acc_osi"), the tab names them."""
    return key[len(breakdown) + 1 :] if breakdown and key.startswith(breakdown + ":") else key


def row_value(row: dict[str, Any], key: str) -> tuple[Any, Any]:
    """(value, interval) of a main metric or a breakdown key in one leaderboard row."""
    if key in row["metrics"]:
        return row["metrics"][key], row["ci"].get(key)
    b = row.get("breakdowns", {}).get(key)
    return (b["value"], b["ci"]) if b else (None, None)


def _chance(board: dict[str, Any], keys: Sequence[str]) -> list | None:
    """Chance per column (None where the protocol has none); None when no column has one."""
    values = [answer_sets.chance(board["protocol"], k) for k in keys]
    return values if any(v is not None for v in values) else None


ROW_KEYS = ("model", "n", "parse_failures", "metrics", "ci", "se", "se_clustered", "design_effect")
BOARD_KEYS = ("project", "release", "protocol", "cluster_key", "rows")
# Present only when asked for: the paired comparisons against a baseline (evaluation/paired.py).
OPTIONAL_BOARD_KEYS = ("paired",)


def leaderboard_public(board: dict[str, Any]) -> dict[str, Any]:
    """The public JSON shape of a board: rank, breakdowns and diagnostics only come with details.
    Keys a board cached before they existed lacks are left out rather than failing."""
    out = {k: board[k] for k in BOARD_KEYS if k in board}
    out["rows"] = [{k: row[k] for k in ROW_KEYS if k in row} for row in board["rows"]]
    out.update({k: board[k] for k in OPTIONAL_BOARD_KEYS if k in board})
    return out


def leaderboard_breakdown(board: dict[str, Any], breakdown: str) -> dict[str, Any]:
    """The same shape for one breakdown tab: metrics / ci keyed by metric, plus "breakdown"."""
    keys = breakdown_keys(board, breakdown)
    out = {k: board[k] for k in BOARD_KEYS if k != "rows" and k in board}
    out["breakdown"] = breakdown
    out["rows"] = []
    for row in board["rows"]:
        entry = {k: row[k] for k in ("model", "n", "parse_failures")}
        entry["metrics"] = {_header(k, breakdown): row_value(row, k)[0] for k in keys}
        entry["ci"] = {_header(k, breakdown): row_value(row, k)[1] for k in keys}
        out["rows"].append(entry)
    return out


def leaderboard_json(board: dict[str, Any], *, details: bool = False, breakdown: str | None = None) -> str:
    if breakdown is not None:
        out = leaderboard_breakdown(board, breakdown)
    else:
        out = dict(board) if details else leaderboard_public(board)
    if details:
        keys = leaderboard_columns(board, None, breakdown)
        chance = _chance(board, keys)
        if chance is not None:
            out["chance"] = {_header(k, breakdown): (None if v is None else float(v)) for k, v in zip(keys, chance)}
    return json.dumps(out, indent=2, ensure_ascii=False)


def _with_ci(value: Any, ci: Sequence[float] | None, places: int, dash: str = DASH) -> str:
    """ "59.03 [54.20, 63.90]"; the value alone when there is no interval."""
    if value is None:
        return dash
    text = _fmt(value, places)
    return text if not ci else f"{text} [{ci[0]:.{places}f}, {ci[1]:.{places}f}]"


def leaderboard_csv(board: dict[str, Any], keys: Sequence[str] | None = None, *, breakdown: str | None = None) -> str:
    keys = leaderboard_columns(board, keys, breakdown)
    places = places_for(board["protocol"])
    buf = io.StringIO()
    w = csv_writer(buf, lineterminator="\n")
    w.writerow(
        ["model", "rank", "n", "parse_failures"]
        + [c for k in keys for h in [_header(k, breakdown)] for c in (h, f"{h}_ci_lo", f"{h}_ci_hi")]
    )
    for row in board["rows"]:
        cells = [row["model"], row.get("rank") if row.get("rank") is not None else "", row["n"], row["parse_failures"]]
        for k in keys:
            value, ci = row_value(row, k)
            cells += ["" if value is None else f"{value:.{places}f}"]
            cells += ["", ""] if not ci else [f"{ci[0]:.{places}f}", f"{ci[1]:.{places}f}"]
        w.writerow(cells)
    chance = _chance(board, keys)
    if chance is not None:
        w.writerow(["Chance", "", "", ""] + [c for v in chance for c in ("" if v is None else str(v), "", "")])
    return buf.getvalue()


def _latex_escape(text: str) -> str:
    for a, b in (
        ("\\", r"\textbackslash{}"),
        ("&", r"\&"),
        ("%", r"\%"),
        ("_", r"\_"),
        ("#", r"\#"),
        ("$", r"\$"),
        ("{", r"\{"),
        ("}", r"\}"),
    ):
        text = text.replace(a, b)
    return text


def _latex_cell(value: Any, places: int) -> str:
    return "--" if value is None else _fmt(value, places)


def latex_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], caption: str, footer: Sequence[Sequence[str]] = ()
) -> str:
    cols = "l" + "r" * (len(header) - 1)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{_latex_escape(caption)}}}",
        rf"\begin{{tabular}}{{{cols}}}",
        r"\toprule",
        " & ".join(_latex_escape(h) for h in header) + r" \\",
        r"\midrule",
    ]
    for r in rows:
        lines.append(" & ".join(r) + r" \\")
    if footer:
        lines.append(r"\midrule")
        for r in footer:
            lines.append(" & ".join(r) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


def _caption(board: dict[str, Any], breakdown: str | None) -> str:
    where = f"{board['protocol']}" + (f", release {board['release']}" if board["release"] else "")
    tab = f", {breakdown.replace(':', ' ')}" if breakdown else ""
    return f"{board['project']} ({where}{tab}); 95 % bootstrap intervals in brackets"


def leaderboard_latex(board: dict[str, Any], keys: Sequence[str] | None = None, *, breakdown: str | None = None) -> str:
    keys = leaderboard_columns(board, keys, breakdown)
    places = places_for(board["protocol"])
    rows = [
        [
            _latex_escape(r["model"]),
            "--" if r.get("rank") is None else str(r["rank"]),
            str(r["n"]),
            str(r["parse_failures"]),
        ]
        + [_with_ci(*row_value(r, k), places, dash="--") for k in keys]
        for r in board["rows"]
    ]
    chance = _chance(board, keys)
    footer = [["Chance", "", "", ""] + ["--" if v is None else str(v) for v in chance]] if chance is not None else []
    header = ["Model", "Rank", "n", "Parse failures"] + [_header(k, breakdown) for k in keys]
    return latex_table(header, rows, _caption(board, breakdown), footer)


def leaderboard_markdown(
    board: dict[str, Any], keys: Sequence[str] | None = None, *, breakdown: str | None = None
) -> str:
    keys = leaderboard_columns(board, keys, breakdown)
    places = places_for(board["protocol"])
    header = ["Model", "Rank", "n", "Parse failures"] + [_header(k, breakdown) for k in keys]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    for r in board["rows"]:
        cells = [r["model"].replace("|", "\\|"), _fmt(r.get("rank"), 0), str(r["n"]), str(r["parse_failures"])]
        cells += [_with_ci(*row_value(r, k), places) for k in keys]
        out.append("| " + " | ".join(cells) + " |")
    chance = _chance(board, keys)
    if chance is not None:
        out.append("| " + " | ".join(["Chance", "", "", ""] + [DASH if v is None else str(v) for v in chance]) + " |")
    if board.get("paired") and breakdown is None:
        out += ["", *paired_markdown(board["paired"], places)]
    return "\n".join(out) + "\n"


def _p(value: float | None) -> str:
    return DASH if value is None else f"{value:.4g}"


def paired_markdown(paired: dict[str, Any], places: int) -> list[str]:
    """Lines of the paired-comparison table (evaluation/paired.py): one row per model against the baseline."""
    lines = [f"Paired comparisons against {paired['baseline']} on {paired['metric']} (Holm-adjusted across models)"]
    if paired.get("note"):
        return lines + ["", paired["note"]]
    lines += [
        "",
        "| Model | Difference | n | Test | p | p (Holm) | Significant |",
        "|---|---:|---:|---|---:|---:|---|",
    ]
    for c in paired["comparisons"]:
        difference = _with_ci(c["difference"], c["ci"], places)
        mark = "yes" if c["significant"] else "no"
        name = c["model"].replace("|", "\\|")
        lines.append(
            f"| {name} | {difference} | {c['n']} | {c['test'] or DASH} | {_p(c['p'])} | {_p(c['p_holm'])} | {mark} |"
        )
    return lines


def render_leaderboard(
    board: dict[str, Any],
    fmt: str,
    keys: Sequence[str] | None = None,
    *,
    details: bool = False,
    breakdown: str | None = None,
) -> str:
    """``breakdown``: a tab name such as "category:positional" (UnknownBreakdown if the board has none)."""
    if fmt == "json":
        return leaderboard_json(board, details=details, breakdown=breakdown)
    if fmt == "csv":
        return leaderboard_csv(board, keys, breakdown=breakdown)
    if fmt == "latex":
        return leaderboard_latex(board, keys, breakdown=breakdown)
    if fmt == "markdown":
        return leaderboard_markdown(board, keys, breakdown=breakdown)
    raise ValueError(f"unknown format {fmt!r}")


# --- correlation ----------------------------------------------------------------------------


def correlation_rows(report: dict[str, Any]) -> list[list[Any]]:
    """Flat rows: source, criterion, kendall_tau_b, spearman_rho, n, tau ci lo/hi, rho ci lo/hi, alpha, note.

    Per judge: one row per criterion, "system" (generators ranked by the mean over criteria) and
    "system:<criterion>" (ranked by that criterion), n = generators; human rows: n = items rated
    by at least two raters, intervals of the leave-one-rater-out averages.
    """
    rows = []
    for j in report["judges"]:
        for c in report["criteria"]:
            e = j["per_criterion"][c]
            ci = e.get("ci") or {}
            tci, rci = ci.get("kendall_tau_b") or [None, None], ci.get("spearman_rho") or [None, None]
            rows.append(
                [j["judge"], c, e["kendall_tau_b"], e["spearman_rho"], e["n"], *tci, *rci, None, e.get("note", "")]
            )
        system = j.get("system") or {}
        sci = system.get("ci") or [None, None]
        rows.append(
            [
                j["judge"],
                "system",
                j["system_kendall_tau_b"],
                None,
                system.get("n"),
                *sci,
                None,
                None,
                None,
                j.get("system_note", ""),
            ]
        )
        for c, e in (j.get("system_per_criterion") or {}).items():
            eci = e.get("ci") or [None, None]
            rows.append(
                [j["judge"], f"system:{c}", e["kendall_tau_b"], None, e["n"], *eci, None, None, None, e.get("note", "")]
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
                h["krippendorff_alpha"],
                h.get("note", ""),
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


def correlation_latex(report: dict[str, Any]) -> str:
    # Header cells carry math on purpose: escape the criterion names, never the math after them.
    header = ["Judge"] + [f"{_latex_escape(c)} $\\tau_b$" for c in report["criteria"]] + ["System $\\tau_b$"]
    rows = []
    for j in report["judges"]:
        rows.append(
            [_latex_escape(j["judge"])]
            + [_latex_cell(j["per_criterion"][c]["kendall_tau_b"], 3) for c in report["criteria"]]
            + [_latex_cell(j["system_kendall_tau_b"], 3)]
        )
    rows.append(
        ["Human (LOO)"] + [_latex_cell(report["human"][c]["loo_kendall_tau_b"], 3) for c in report["criteria"]] + ["--"]
    )
    rows.append(
        [r"Krippendorff $\alpha$"]
        + [_latex_cell(report["human"][c]["krippendorff_alpha"], 3) for c in report["criteria"]]
        + ["--"]
    )
    table = latex_table(["H"] * len(header), rows, "Judge-human agreement (Kendall tau-b per criterion)")
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
