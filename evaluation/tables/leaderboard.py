"""Leaderboards as JSON, CSV, LaTeX and Markdown, with their standard errors and paired comparisons
(evaluation/leaderboard.py, evaluation/paired.py). No Django."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any

from protocols import registry
from protocols.kit.csv_cells import csv_writer

from .. import metric_names
from ..scoring import answer_sets
from .text import DASH, fmt_value, latex_escape, latex_table, places_for


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


def _label(protocol: str, key: str, breakdown: str | None) -> str:
    """The column's human name in the tables people read (Markdown, LaTeX): "acc_osi" -> "Acc OSI";
    a breakdown's column names its metric (the caption or tab names the group). CSV and JSON keep
    the keys, for programs."""
    return metric_names.metric_name(protocol, _header(key, breakdown))


# The standard errors of a main-table metric (evaluation/leaderboard.py), in the order they print.
ERROR_KEYS = ("se", "se_clustered", "design_effect")


def row_errors(row: dict[str, Any], key: str) -> tuple[Any, Any, Any]:
    """(se, se_clustered, design_effect) of a main metric in one row; None where it has none (a
    derived metric, a breakdown, a board cached before the errors existed)."""
    return tuple((row.get(name) or {}).get(key) for name in ERROR_KEYS)  # type: ignore[return-value]


def _has_errors(board: dict[str, Any], keys: Sequence[str]) -> bool:
    return any(v is not None for row in board["rows"] for k in keys for v in row_errors(row, k))


def errors_text(row: dict[str, Any], key: str, places: int, dash: str = DASH) -> str:
    """ "1.234 / 1.802 (2.14)": naive / clustered standard error (design effect); ``dash`` without."""
    se, se_clustered, design_effect = row_errors(row, key)
    if se is None:
        return dash
    text = f"{se:.{places}f} / " + (dash if se_clustered is None else f"{se_clustered:.{places}f}")
    return text + (f" ({design_effect:.3f})" if design_effect is not None else "")


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


ROW_KEYS = ("model", "n", "parse_failures", "metrics", "ci", "se", "se_clustered", "design_effect", "usage")
BOARD_KEYS = ("project", "release", "protocol", "cluster_key", "rows")
# Present only when asked for: the paired comparisons against a baseline (evaluation/paired.py).
# A pairwise board's rater screen and the raters excluded from it (evaluation/rater_exclusion.py).
OPTIONAL_BOARD_KEYS = ("paired", "rater_screen", "excluded_raters", "excluded_votes")


# A model row's tokens and cost (evaluation/leaderboard.py: usage_of), as the main table's CSV
# columns after the metrics; only on a board where some row has a price (has_cost).
USAGE_COLUMNS = ("tokens_in", "tokens_out", "cost_usd", "cost_per_correct_usd")


def has_cost(board: dict[str, Any]) -> bool:
    """Whether some row's tokens have a price (its endpoint's): only then do the page and the CSV
    show tokens and cost. Random, Human, imported answers and unpriced endpoints have none."""
    return any((row.get("usage") or {}).get("cost_usd") is not None for row in board["rows"])


def usage_tokens(row: dict[str, Any]) -> tuple[int, int] | None:
    """(tokens in, tokens out) of a row, or None where unknown: no job (Random, Human), or no tokens
    and no price (imported answers, whose tokens nobody counted). A priced job whose answers all
    came from the cache did use 0 tokens."""
    usage = row.get("usage") or {}
    tokens_in, tokens_out = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if tokens_in is None or tokens_out is None or (not tokens_in and not tokens_out and usage.get("cost_usd") is None):
        return None
    return tokens_in, tokens_out


def usage_cells(row: dict[str, Any]) -> list[str]:
    """The row's USAGE_COLUMNS: tokens in and out, cost and cost per correct answer in USD to the
    micro-dollar; empty where unknown (usage_tokens; no price; nothing correct)."""
    usage = row.get("usage") or {}
    cost, per_correct = usage.get("cost_usd"), usage.get("cost_per_correct_usd")
    tokens = usage_tokens(row)
    return [
        *(("", "") if tokens is None else (str(tokens[0]), str(tokens[1]))),
        "" if cost is None else f"{cost:.6f}",
        "" if per_correct is None else f"{per_correct:.6f}",
    ]


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
    text = fmt_value(value, places)
    return text if not ci else f"{text} [{ci[0]:.{places}f}, {ci[1]:.{places}f}]"


def leaderboard_csv(board: dict[str, Any], keys: Sequence[str] | None = None, *, breakdown: str | None = None) -> str:
    keys = leaderboard_columns(board, keys, breakdown)
    places = places_for(board["protocol"])
    # The main table's metrics carry their standard errors (se, se_clustered, design_effect) after
    # the interval; a breakdown tab has none.
    errors = breakdown is None
    usage = breakdown is None and has_cost(board)
    suffixes = ("", "_ci_lo", "_ci_hi") + (tuple(f"_{name}" for name in ERROR_KEYS) if errors else ())
    buf = io.StringIO()
    w = csv_writer(buf, lineterminator="\n")
    columns = [f"{_header(k, breakdown)}{suffix}" for k in keys for suffix in suffixes]
    w.writerow(["model", "rank", "n", "parse_failures"] + columns + (list(USAGE_COLUMNS) if usage else []))
    for row in board["rows"]:
        cells = [row["model"], row.get("rank") if row.get("rank") is not None else "", row["n"], row["parse_failures"]]
        for k in keys:
            value, ci = row_value(row, k)
            cells += ["" if value is None else f"{value:.{places}f}"]
            cells += ["", ""] if not ci else [f"{ci[0]:.{places}f}", f"{ci[1]:.{places}f}"]
            if errors:
                se, se_clustered, design_effect = row_errors(row, k)
                cells += [
                    "" if se is None else f"{se:.{places + 1}f}",
                    "" if se_clustered is None else f"{se_clustered:.{places + 1}f}",
                    "" if design_effect is None else f"{design_effect:.3f}",
                ]
        w.writerow(cells + (usage_cells(row) if usage else []))
    chance = _chance(board, keys)
    if chance is not None:
        pad = [""] * (len(suffixes) - 1)
        cells = [c for v in chance for c in ("" if v is None else str(v), *pad)]
        w.writerow(["Chance", "", "", ""] + cells + ([""] * len(USAGE_COLUMNS) if usage else []))
    return buf.getvalue()


def _caption(board: dict[str, Any], breakdown: str | None) -> str:
    where = f"{board['protocol']}" + (f", release {board['release']}" if board["release"] else "")
    tab = f", {breakdown.replace(':', ' ')}" if breakdown else ""
    return f"{board['project']} ({where}{tab}); 95 % bootstrap intervals in brackets"


def leaderboard_latex(board: dict[str, Any], keys: Sequence[str] | None = None, *, breakdown: str | None = None) -> str:
    keys = leaderboard_columns(board, keys, breakdown)
    places = places_for(board["protocol"])
    rows = [
        [
            latex_escape(r["model"]),
            "--" if r.get("rank") is None else str(r["rank"]),
            str(r["n"]),
            str(r["parse_failures"]),
        ]
        + [_with_ci(*row_value(r, k), places, dash="--") for k in keys]
        for r in board["rows"]
    ]
    chance = _chance(board, keys)
    footer = [["Chance", "", "", ""] + ["--" if v is None else str(v) for v in chance]] if chance is not None else []
    header = ["Model", "Rank", "n", "Parse failures"] + [_label(board["protocol"], k, breakdown) for k in keys]
    table = latex_table(header, rows, _caption(board, breakdown), footer)
    if breakdown is None and _has_errors(board, keys):
        table += "\n" + _errors_latex(board, keys, places + 1)
    return table


def _errors_caption(board: dict[str, Any]) -> str:
    key = board.get("cluster_key")
    clusters = ", ".join(key) if isinstance(key, list) else key
    by = f"clustered by {clusters}" if clusters else "clustered (each item its own cluster)"
    if registry.get(board["protocol"]).board == "votes":  # ratings fitted from votes, not means of items
        return (
            f"{board['project']}: standard errors of the ratings, sandwich with votes independent / {by}, "
            "design effect in parentheses"
        )
    return (
        f"{board['project']}: standard errors of the means, naive / {by}, design effect in parentheses; "
        "metrics derived from several means have none"
    )


def _errors_latex(board: dict[str, Any], keys: Sequence[str], places: int) -> str:
    """The second table of a LaTeX board: each metric's se / se_clustered (design effect)."""
    keys = [k for k in keys if any(row_errors(row, k)[0] is not None for row in board["rows"])]
    header = ["Model"] + [_label(board["protocol"], k, None) for k in keys]
    rows = [[latex_escape(r["model"])] + [errors_text(r, k, places, dash="--") for k in keys] for r in board["rows"]]
    return latex_table(header, rows, _errors_caption(board))


def leaderboard_markdown(
    board: dict[str, Any], keys: Sequence[str] | None = None, *, breakdown: str | None = None
) -> str:
    keys = leaderboard_columns(board, keys, breakdown)
    places = places_for(board["protocol"])
    header = ["Model", "Rank", "n", "Parse failures"] + [_label(board["protocol"], k, breakdown) for k in keys]
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    for r in board["rows"]:
        cells = [r["model"].replace("|", "\\|"), fmt_value(r.get("rank"), 0), str(r["n"]), str(r["parse_failures"])]
        cells += [_with_ci(*row_value(r, k), places) for k in keys]
        out.append("| " + " | ".join(cells) + " |")
    chance = _chance(board, keys)
    if chance is not None:
        out.append("| " + " | ".join(["Chance", "", "", ""] + [DASH if v is None else str(v) for v in chance]) + " |")
    if breakdown is None and _has_errors(board, keys):
        out += ["", *errors_markdown(board, keys, places + 1)]
    if board.get("paired") and breakdown is None:
        out += ["", *paired_markdown(board["paired"], places)]
    return "\n".join(out) + "\n"


def errors_markdown(board: dict[str, Any], keys: Sequence[str], places: int) -> list[str]:
    """Lines of the standard-error table: per row and metric, se / se_clustered (design effect)."""
    keys = [k for k in keys if any(row_errors(row, k)[0] is not None for row in board["rows"])]
    header = ["Model"] + [_label(board["protocol"], k, None) for k in keys]
    lines = [
        "S" + _errors_caption(board)[len(board["project"]) + 3 :],
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * len(keys)) + "|",
    ]
    for r in board["rows"]:
        cells = [r["model"].replace("|", "\\|")] + [errors_text(r, k, places) for k in keys]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


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
