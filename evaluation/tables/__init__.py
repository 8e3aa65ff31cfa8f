"""Render leaderboards and correlation tables as JSON, CSV, LaTeX and Markdown. No Django.

One module per table (``leaderboard``, ``correlation``) and the cells they share (``text``);
callers import from here.
"""

from .correlation import (
    CORRELATION_HEADER,
    correlation_csv,
    correlation_latex,
    correlation_notes,
    correlation_public,
    correlation_rows,
    render_correlation,
)
from .leaderboard import (
    BOARD_KEYS,
    ERROR_KEYS,
    OPTIONAL_BOARD_KEYS,
    ROW_KEYS,
    UnknownBreakdown,
    breakdown_keys,
    errors_markdown,
    errors_text,
    leaderboard_breakdown,
    leaderboard_columns,
    leaderboard_csv,
    leaderboard_json,
    leaderboard_latex,
    leaderboard_markdown,
    leaderboard_public,
    paired_markdown,
    render_leaderboard,
    row_errors,
    row_value,
)
from .text import DASH, fmt_value, latex_escape, latex_table, places_for

__all__ = [
    "BOARD_KEYS",
    "CORRELATION_HEADER",
    "DASH",
    "ERROR_KEYS",
    "OPTIONAL_BOARD_KEYS",
    "ROW_KEYS",
    "UnknownBreakdown",
    "breakdown_keys",
    "correlation_csv",
    "correlation_latex",
    "correlation_notes",
    "correlation_public",
    "correlation_rows",
    "errors_markdown",
    "errors_text",
    "fmt_value",
    "latex_escape",
    "latex_table",
    "leaderboard_breakdown",
    "leaderboard_columns",
    "leaderboard_csv",
    "leaderboard_json",
    "leaderboard_latex",
    "leaderboard_markdown",
    "leaderboard_public",
    "paired_markdown",
    "places_for",
    "render_correlation",
    "render_leaderboard",
    "row_errors",
    "row_value",
]
