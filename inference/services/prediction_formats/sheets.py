"""The rows of a predictions file, before any tool's meaning is given to them: JSON (one document:
a records array or one object; or JSON lines), TSV and CSV (a header row), and .xlsx workbooks.

Each row keeps the number a person finds it by in the file: the line of a JSON-lines or TSV/CSV
file, the record (1-based) of a JSON document, the sheet row of a workbook (the header is row 1).

Workbooks are read with openpyxl in read-only mode: macros are never loaded (only .xlsx is read,
not .xlsm), external links are not followed, and no formula is evaluated. A formula cell is
refused, naming the cell, rather than read as the value cached with it: that value is whatever
the program that last saved the file wrote (openpyxl itself writes none), so it may not be the
formula's result. VLMEvalKit writes its sheets with text never turned into formulas, so its own
files hold none.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openpyxl import load_workbook
from openpyxl.utils.exceptions import InvalidFileException

from ..predictions import PredictionImportError

CSV_FIELD_LIMIT = 64 * 1024 * 1024  # a model's reply with its reasoning can outgrow csv's 128 KiB default


@dataclass
class Rows:
    """A file's rows: ``unit`` names what ``rows``' numbers count (line, record or row)."""

    unit: str
    rows: list[tuple[int, Any]]
    notes: list[str] = field(default_factory=list)
    # (number, reason) of the lines that are not JSON: reported with every other row's problems
    errors: list[tuple[int, str]] = field(default_factory=list)
    text: str | None = None  # the file's text (StateLab's own lines are checked as written)


def clean(value: Any) -> Any:
    """A cell or JSON value as the database can store it: NaN and infinities (VLMEvalKit's empty
    cells, json's NaN) become None, dates their ISO text."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def json_rows(text: str) -> Rows:
    """One JSON document (an array: its records; an object: one record) or JSON lines."""
    body = text.lstrip("\ufeff \t\r\n")
    whole_error: ValueError | None = None
    if body[:1] in ("[", "{"):
        try:
            whole = json.loads(body)
        except ValueError as exc:
            whole_error = exc
        else:
            if isinstance(whole, list):
                return Rows("record", [(n, clean(r)) for n, r in enumerate(whole, start=1)])
            return Rows("record", [(1, clean(whole))])
        if body[:1] == "[":  # an array that does not parse is one error, not one per line
            raise PredictionImportError([(0, f"not a valid JSON array ({whole_error})")])
    rows: list[tuple[int, Any]] = []
    errors: list[tuple[int, str]] = []
    for n, line in enumerate(text.lstrip("\ufeff").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((n, clean(json.loads(line))))
        except ValueError as exc:
            if not rows and not errors and whole_error is not None:
                # Neither one document nor JSON lines: say what the document's parser found.
                raise PredictionImportError([(0, f"neither one JSON document nor JSON lines ({whole_error})")])
            errors.append((n, f"not valid JSON ({exc.msg})"))
    return Rows("line", rows, errors=errors, text=text)


def table_rows(text: str, *, tab: bool) -> Rows:
    """A TSV or CSV file with a header row: one dict per data row, numbered by its last line."""
    csv.field_size_limit(max(csv.field_size_limit(), CSV_FIELD_LIMIT))
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff"), newline=""), dialect="excel-tab" if tab else "excel")
    rows: list[tuple[int, Any]] = []
    try:
        for row in reader:
            row.pop(None, None)  # cells past the header's columns name nothing
            rows.append((reader.line_num, row))
    except csv.Error as exc:
        raise PredictionImportError([(reader.line_num, f"not a readable {'TSV' if tab else 'CSV'} row ({exc})")])
    return Rows("line", rows)


def _sheet_value(cell) -> tuple[Any, str | None]:
    if cell.data_type == "f":
        return (
            None,
            f"cell {cell.coordinate} holds a formula ({cell.value}); formulas are not evaluated: "
            "save the sheet with values only",
        )
    if cell.data_type == "e":
        return None, f"cell {cell.coordinate} holds an error value ({cell.value})"
    return clean(cell.value), None


def xlsx_rows(path: Path) -> Rows:
    """The first sheet of an .xlsx workbook: row 1 is the header, each later row a dict."""
    try:
        workbook = load_workbook(path, read_only=True, data_only=False, keep_links=False)
    except (InvalidFileException, zipfile.BadZipFile, KeyError, ValueError, TypeError) as exc:
        raise PredictionImportError([(0, f"not an .xlsx workbook ({type(exc).__name__}: {exc})")])
    try:
        sheets = workbook.sheetnames
        sheet = workbook.worksheets[0]
        notes = [
            f"sheet {sheets[0]!r} read"
            + (f"; not the other sheets {', '.join(map(repr, sheets[1:]))}" if sheets[1:] else "")
        ]
        header: list[str | None] | None = None
        rows: list[tuple[int, Any]] = []
        errors: list[tuple[int, str]] = []
        for number, cells in enumerate(sheet.iter_rows(), start=1):
            values = []
            for cell in cells:
                value, problem = _sheet_value(cell)
                if problem:
                    errors.append((number, problem))
                values.append(value)
            if header is None:
                if any(v not in (None, "") for v in values):
                    header = [None if v in (None, "") else str(v).strip() for v in values]
                continue
            row = {name: v for name, v in zip(header, values) if name is not None}
            if any(v not in (None, "") for v in row.values()):  # blank rows (and cells past the header) name nothing
                rows.append((number, row))
    finally:
        workbook.close()
    if errors:
        raise PredictionImportError(errors, unit="row")
    return Rows("row", rows, notes)
