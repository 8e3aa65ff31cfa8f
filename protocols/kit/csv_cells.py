"""CSV cells a spreadsheet will not run: every CSV the project writes goes through `csv_writer`
(or `safe_cell` per cell). Plain Python (no Django), here because every app and every protocol's
own formats may import protocols/kit and it imports nothing of theirs (tests/test_layering.py).

A cell that starts with "=", "+", "-", "@", a tab or a carriage return is one a spreadsheet may
read as a formula (CSV injection, as OWASP describes it), so it gets a leading apostrophe, which
the spreadsheet shows as text and does not run. A cell that is a plain number ("-0.1234",
"+3", "-1e-05") is left as it is: a spreadsheet reads it as that number, never a formula, and the
tables' negative figures stay numbers.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def safe_cell(value: Any) -> Any:
    """The cell as it may be written: text starting like a formula gets a leading apostrophe;
    anything else (numbers, other text, None) is returned unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _PLAIN_NUMBER.fullmatch(value):
        return "'" + value
    return value


def safe_row(cells: Iterable[Any]) -> list[Any]:
    return [safe_cell(cell) for cell in cells]


class SafeCsvWriter:
    """csv.writer's writerow / writerows, each cell through safe_cell."""

    def __init__(self, stream, **kwargs: Any) -> None:
        self._writer = csv.writer(stream, **kwargs)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow(safe_row(row))

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(stream, **kwargs: Any) -> SafeCsvWriter:
    """csv.writer(stream, **kwargs) whose cells cannot run as formulas (see the module)."""
    return SafeCsvWriter(stream, **kwargs)
