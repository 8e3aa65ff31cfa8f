"""What each tool's predictions file says, row by row: the reply, the StateLab ids the row carries
(when it was made from a StateLab export), and what the tool logged beside the reply.

- lmms-eval: the ``--log_samples`` file (``<date>_samples_<task>.jsonl``), one sample per
  document of any task: ``doc_id`` (the document's index in the task's split), ``target``
  (``doc_to_target``, logged as text), ``filtered_resps`` (the scored reply: a list, or the text
  itself when the document had one request), ``resps`` (left out when equal), ``doc_hash``,
  ``input``, ``token_counts``, and one key per metric the task's ``process_results`` returned
  (a number such as ``exact_match``, or a record). Older versions also log ``doc``; the task
  StateLab exports logs its ids as ``item`` ({"id", "query"}).
- VLMEvalKit: a prediction file (``<model>_<dataset>.xlsx`` by default, ``.tsv`` or ``.json``
  with ``PRED_FORMAT``, or ``.csv``): the benchmark's own columns (``index``, ``question``,
  ``answer``, option and category columns; the images left out) with ``prediction`` added, and
  ``hit`` (0/1) in the files its evaluation writes.
- A protocol's own formats of kind "predictions" (protocols/kit/releases.py), and StateLab's
  JSON lines ({"item", "query", "answer"[, "logprobs", "source"]}).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from protocols.kit.releases import FormatRefused

from ..predictions import PredictionImportError
from .sheets import Rows, clean, json_rows, table_rows, xlsx_rows

BUILT_IN = ("statelab", "lmms-eval", "vlmevalkit")
# Keys of an lmms-eval sample that are not a metric's value ("item": the ids StateLab's task logs).
LMMS_SAMPLE_KEYS = frozenset(
    {
        "doc_id",
        "doc",
        "target",
        "arguments",
        "input",
        "resps",
        "filtered_resps",
        "doc_hash",
        "prompt_hash",
        "target_hash",
        "token_counts",
        "input_media",
        "item",
    }
)
# VLMEvalKit's per-row verdict column in the result files its evaluation writes.
VLMEVALKIT_METRICS = ("hit",)
TABLE_SUFFIXES = (".tsv", ".csv", ".xlsx")


@dataclass
class ToolRow:
    """One row of a tool's file. ``record`` is what a --match path reads."""

    at: int
    record: Any
    answer: Any = None
    item: Any = None  # the StateLab item id the row carries (its format's own ids), or None
    item_error: str = ""  # why it carries none
    query: Any = None  # the StateLab query the row names, or None
    logprobs: Any = None
    source: dict[str, Any] | None = None  # kept on the prediction
    error: str = ""  # the row cannot be read whatever the match


@dataclass
class ToolFile:
    format: str
    unit: str
    rows: list[ToolRow] = field(default_factory=list)
    # StateLab's own lines, passed on as they are (checked by parse_prediction_lines) when no
    # mapping is named; None for every other format.
    lines: list[str] | None = None
    notes: list[str] = field(default_factory=list)


def _first_text(value: Any) -> Any:
    """The first response of a request list (lmms-eval nests them: [[text], …] or [text, …])."""
    while isinstance(value, list):
        if not value:
            return None
        value = value[0]
    return value


def _loglikelihood_pairs(value: Any) -> bool:
    """A multiple-choice task's filtered_resps: one [log-likelihood, is_greedy] pair per option."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(v, list) and len(v) == 2 and isinstance(v[0], (int, float)) and isinstance(v[1], bool)
            for v in value
        )
    )


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None and v != {}}


def _with_bad_lines(out: ToolFile, rows: Rows) -> ToolFile:
    """Lines that are not JSON join the rows as rows that cannot be read, in file order."""
    if rows.errors:
        out.rows.extend(ToolRow(at, None, error=reason) for at, reason in rows.errors)
        out.rows.sort(key=lambda r: r.at)
    return out


def lmms_eval_rows(rows: Rows) -> ToolFile:
    out = ToolFile("lmms-eval", rows.unit, notes=list(rows.notes))
    for at, sample in rows.rows:
        if not isinstance(sample, dict):
            out.rows.append(ToolRow(at, sample, error="a sample must be a JSON object"))
            continue
        row = ToolRow(at, sample)
        responses = sample.get("filtered_resps", sample.get("resps"))
        if _loglikelihood_pairs(responses):
            row.error = (
                '"filtered_resps" holds log-likelihoods of options (a multiple_choice task), not a reply: '
                "import the samples of a generate_until task"
            )
        elif "filtered_resps" not in sample and "resps" not in sample:
            row.error = 'no "filtered_resps": not an lmms-eval sample'
        else:
            row.answer = _first_text(responses)
            if row.answer is not None and not isinstance(row.answer, (str, int, float, dict)):
                row.error = 'field "filtered_resps": the response is not text'
        doc = sample.get("doc") or sample.get("item")
        if isinstance(doc, dict):
            row.query = doc.get("query")
            ident = doc.get("id")
            if isinstance(ident, (str, int)) and not isinstance(ident, bool):
                row.item = ident
            else:
                row.item_error = (
                    'field "doc.id": the item id a release export carries is missing '
                    "(a task of your own: name the mapping, e.g. --match doc.question_id=extra.question_id)"
                )
        else:
            row.item_error = (
                'an lmms-eval sample of a task StateLab did not write carries no item id ("doc.id" or '
                '"item.id"): name how its rows meet the release\'s items, e.g. --match doc_id=row'
            )
        metrics = {k: v for k, v in sample.items() if k not in LMMS_SAMPLE_KEYS}
        row.source = _drop_none(
            {
                "format": "lmms-eval",
                rows.unit: at,
                "doc_id": sample.get("doc_id"),
                "target": sample.get("target"),
                "metrics": metrics,
                "doc_hash": sample.get("doc_hash"),
            }
        )
        out.rows.append(row)
    return _with_bad_lines(out, rows)


def vlmevalkit_rows(rows: Rows) -> ToolFile:
    out = ToolFile("vlmevalkit", rows.unit, notes=list(rows.notes))
    first = next((r for _, r in rows.rows if isinstance(r, dict)), None)
    if first is not None and "prediction" not in first:
        found = ", ".join(list(first)[:12]) or "none"
        raise PredictionImportError(
            [
                (
                    0,
                    f'no "prediction" column (found: {found}); a VLMEvalKit prediction file has the '
                    'benchmark\'s columns ("index", "question", "answer", …) and "prediction"',
                )
            ]
        )
    for at, record in rows.rows:
        if not isinstance(record, dict):
            out.rows.append(ToolRow(at, record, error="a row must be an object"))
            continue
        row = ToolRow(at, record, answer=record.get("prediction"), query=record.get("query") or None)
        if "prediction" not in record:
            row.error = 'column "prediction" is missing'
        ident = record.get("index", record.get("id"))
        if ident in (None, "") or isinstance(ident, bool):
            row.item_error = 'column "index": the item id a release export carries is missing'
        else:
            row.item = ident
        row.source = _drop_none(
            {
                "format": "vlmevalkit",
                rows.unit: at,
                "index": record.get("index"),
                "target": record.get("answer"),
                "metrics": {k: record[k] for k in VLMEVALKIT_METRICS if record.get(k) not in (None, "")},
            }
        )
        out.rows.append(row)
    return _with_bad_lines(out, rows)


def line_rows(name: str, lines: list[Any], unit: str, notes: list[str]) -> ToolFile:
    """Lines already in StateLab's shape ({"item", "query", "answer"}): a protocol format's output,
    or StateLab's own file when a mapping is named."""
    out = ToolFile(name, unit, notes=notes)
    for at, line in lines:
        if not isinstance(line, dict):
            out.rows.append(ToolRow(at, line, error="a line must be a JSON object"))
            continue
        row = ToolRow(at, line, answer=line.get("answer"), query=line.get("query"), logprobs=line.get("logprobs"))
        if "answer" not in line:
            row.error = "missing field 'answer'"
        ident = line.get("item")
        if isinstance(ident, (str, int)) and not isinstance(ident, bool):
            row.item = ident
        else:
            row.item_error = "missing field 'item'"
        source = dict(line["source"]) if isinstance(line.get("source"), dict) else {}
        if name != "statelab":
            source.setdefault("format", name)
        if isinstance(line.get("extra"), dict):
            source.setdefault("extra", clean(line["extra"]))
        row.source = source or None
        out.rows.append(row)
    return out


def _file_rows(path: Path) -> Rows:
    lower = path.name.lower()
    if lower.endswith(".xlsx"):
        return xlsx_rows(path)
    if lower.endswith((".xlsm", ".xls")):
        raise PredictionImportError(
            [(0, f"{path.name}: only .xlsx workbooks are read (no macros, no legacy .xls); save the sheet as .xlsx")]
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise PredictionImportError([(0, f"{path.name} is not UTF-8 text")])
    if lower.endswith((".tsv", ".csv")):
        return table_rows(text, tab=lower.endswith(".tsv"))
    return json_rows(text)


def _detect(rows: Rows, path: Path) -> str:
    if path.name.lower().endswith(TABLE_SUFFIXES):
        return "vlmevalkit"
    head = next((r for _, r in rows.rows), None)
    if isinstance(head, dict) and "doc_id" in head and ("filtered_resps" in head or "resps" in head):
        return "lmms-eval"
    if isinstance(head, dict) and "prediction" in head and "item" not in head:
        return "vlmevalkit"
    return "statelab"


def protocol_formats(protocol) -> tuple:
    return tuple(f for f in protocol.formats if f.kind == "predictions")


def read_prediction_file(
    protocol, path: Path, fmt: str = "auto", *, mapped: bool = False, media_root: Path | None = None
) -> ToolFile:
    """The rows of a predictions file in format ``fmt`` ("auto": the protocol's own formats of kind
    "predictions" are asked first, then the file's name and first record decide).

    ``mapped``: a --match mapping is named, so StateLab's own lines are read as rows too;
    ``media_root``: the release folder a protocol's format reads beside the file, if it needs one."""
    own = protocol_formats(protocol)
    chosen = None
    if fmt == "auto":
        chosen = next((f for f in own if f.detect(path)), None)
    elif fmt not in BUILT_IN:
        chosen = next((f for f in own if f.name == fmt), None)
        if chosen is None:
            names = ", ".join(("auto",) + BUILT_IN + tuple(f.name for f in own))
            raise PredictionImportError([(0, f"unknown format {fmt!r} for {protocol.name}; use one of {names}")])
    if chosen is not None:
        try:
            conversion = chosen.read(path, media_root=media_root)
            lines = list(enumerate(conversion.lines, start=1))
        except FormatRefused as exc:
            raise PredictionImportError([(0, f"{chosen.name}: {exc}")])
        notes = [f"read as {chosen.label or chosen.name}"] + list(conversion.notes)
        return line_rows(chosen.name, lines, "record", notes)
    if not path.is_file():
        raise PredictionImportError([(0, f"{path.name} is not a file")])
    rows = _file_rows(path)
    if fmt == "auto":
        fmt = _detect(rows, path)
    if fmt == "lmms-eval":
        return lmms_eval_rows(rows)
    if fmt == "vlmevalkit":
        return vlmevalkit_rows(rows)
    if mapped:
        return _with_bad_lines(line_rows("statelab", rows.rows, rows.unit, rows.notes), rows)
    if rows.text is not None:  # JSON lines: checked as written, every bad line named
        return ToolFile("statelab", rows.unit, lines=rows.text.splitlines(), notes=rows.notes)
    lines: list[str] = []
    for at, row in rows.rows:  # one JSON document: its records, each at its number
        lines.extend([""] * (at - 1 - len(lines)))
        lines.append(json.dumps(row))
    return ToolFile("statelab", rows.unit, lines=lines, notes=rows.notes)
