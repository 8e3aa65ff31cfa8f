"""The cells every table prints: numbers, dashes, LaTeX escaping and the LaTeX table frame. No Django."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from protocols import registry

DASH = "–"


def fmt_value(value: Any, places: int) -> str:
    if value is None:
        return DASH
    if isinstance(value, float):
        return f"{value:.{places}f}"
    return str(value)


def places_for(protocol: str) -> int:
    return registry.get(protocol).places


def latex_escape(text: str) -> str:
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


def latex_cell(value: Any, places: int) -> str:
    return "--" if value is None else fmt_value(value, places)


def latex_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], caption: str, footer: Sequence[Sequence[str]] = ()
) -> str:
    cols = "l" + "r" * (len(header) - 1)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{latex_escape(caption)}}}",
        rf"\begin{{tabular}}{{{cols}}}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in header) + r" \\",
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
