"""Other evaluation tools' per-sample outputs, read as StateLab prediction lines.

Both are mapped to items by the ids a release export carries (`id`, and `query` where an item
asks several questions); a protocol with one query per item (every QA and rating protocol)
needs no query column. The lines come out as StateLab's own JSONL ({"item", "query", "answer"}),
one per input line and in the same order, so predictions_import checks them as usual and its
messages name the original line.

- lmms-eval: the `--log_samples` JSONL (`samples_<task>.jsonl`): one object per document with
  `doc_id`, `target`, `filtered_resps` (a list, or the text itself for one request) and the ids:
  `doc` in older versions, `item` ({"id", "query"}, logged by the task export_release writes)
  in 0.7, which leaves `doc` out. The answer is the first filtered response.
- VLMEvalKit: a prediction file saved as TSV or CSV (`PRED_FORMAT=tsv`; the default .xlsx is
  refused with that hint) or JSON lines: a row per question with `index` (or `id`), `prediction`,
  and optionally `query`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator

from annotation.protocols import QUERY_KEYS

from .predictions import PredictionImportError

FORMATS = ("statelab", "lmms-eval", "vlmevalkit")


def detect_format(name: str, first_line: str) -> str:
    """The format of a predictions file, from its name and first line."""
    lower = name.lower()
    if lower.endswith((".tsv", ".csv", ".xlsx")):
        return "vlmevalkit"
    try:
        head = json.loads(first_line)
    except ValueError:
        return "statelab"
    if isinstance(head, dict) and "doc_id" in head and ("filtered_resps" in head or "resps" in head):
        return "lmms-eval"
    if isinstance(head, dict) and "prediction" in head and "item" not in head:
        return "vlmevalkit"
    return "statelab"


def _query(protocol: str, given, n: int, errors: list[tuple[int, str]]) -> str | None:
    keys = QUERY_KEYS[protocol]
    if given not in (None, ""):
        return str(given)
    if len(keys) == 1:
        return keys[0]
    errors.append((n, f"no query: a {protocol} item asks several ({', '.join(keys)}); give the query in the document"))
    return None


def _first_text(value):
    """The first response of a request list (lmms-eval nests them: [[text], …] or [text, …])."""
    while isinstance(value, list):
        if not value:
            return None
        value = value[0]
    return value


def lmms_eval_lines(protocol: str, lines: Iterable[str]) -> list[str]:
    """lmms-eval sample log lines as StateLab prediction lines (all bad lines reported at once)."""
    out: list[str] = []
    errors: list[tuple[int, str]] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            out.append("")
            continue
        try:
            sample = json.loads(line)
        except ValueError as exc:
            errors.append((n, f"not valid JSON ({exc.msg})"))
            continue
        # lmms-eval 0.7 drops "doc" from the samples file; StateLab's task logs the ids as "item".
        doc = (sample.get("doc") or sample.get("item")) if isinstance(sample, dict) else None
        if not isinstance(doc, dict):
            errors.append(
                (
                    n,
                    'an lmms-eval sample needs its "doc" or "item" with the item\'s id (run lmms-eval '
                    "with --log_samples on a task written by export_release --format lmms-eval)",
                )
            )
            continue
        item = doc.get("id")
        if not isinstance(item, (str, int)) or isinstance(item, bool):
            errors.append((n, 'field "doc.id": the item id a release export carries is missing'))
            continue
        query = _query(protocol, doc.get("query"), n, errors)
        responses = sample.get("filtered_resps", sample.get("resps"))
        answer = _first_text(responses)
        if query is None:
            continue
        if answer is not None and not isinstance(answer, (str, int, float, dict)):
            errors.append((n, 'field "filtered_resps": the response is not text'))
            continue
        out.append(json.dumps({"item": str(item), "query": query, "answer": answer}))
    if errors:
        raise PredictionImportError(errors)
    return out


def _table_rows(name: str, text: str) -> Iterator[tuple[int, dict]]:
    if name.lower().endswith((".tsv", ".csv")):
        dialect = "excel-tab" if name.lower().endswith(".tsv") else "excel"
        reader = csv.DictReader(io.StringIO(text), dialect=dialect)
        for row in reader:
            yield reader.line_num, row
        return
    for n, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise PredictionImportError([(n, f"not valid JSON ({exc.msg})")])
            yield n, row


def vlmevalkit_lines(protocol: str, name: str, text: str) -> list[str]:
    """A VLMEvalKit prediction file (TSV, CSV or JSON lines) as StateLab prediction lines."""
    if name.lower().endswith(".xlsx"):
        raise PredictionImportError(
            [(0, "VLMEvalKit's .xlsx is not read: run it with PRED_FORMAT=tsv (or save the sheet as TSV)")]
        )
    out: list[str] = []
    errors: list[tuple[int, str]] = []
    for n, row in _table_rows(name, text):
        if not isinstance(row, dict):
            errors.append((n, "a row must be an object"))
            continue
        item = row.get("index", row.get("id"))
        if item in (None, ""):
            errors.append((n, 'column "index": the item id a release export carries is missing'))
            continue
        if "prediction" not in row:
            errors.append((n, 'column "prediction" is missing'))
            continue
        query = _query(protocol, row.get("query"), n, errors)
        if query is None:
            continue
        out.extend([""] * (n - 1 - len(out)))  # keep line numbers: messages name the file's line
        out.append(json.dumps({"item": str(item), "query": query, "answer": row["prediction"]}))
    if errors:
        raise PredictionImportError(errors)
    return out


def prediction_lines(protocol: str, name: str, text: str, fmt: str = "auto") -> list[str]:
    """StateLab prediction lines from a file's text, in `fmt` (auto: detected)."""
    if name.lower().endswith(".xlsx"):
        return vlmevalkit_lines(protocol, name, "")
    if fmt == "auto":
        fmt = detect_format(name, text.split("\n", 1)[0])
    if fmt == "lmms-eval":
        return lmms_eval_lines(protocol, text.splitlines())
    if fmt == "vlmevalkit":
        return vlmevalkit_lines(protocol, name, text)
    if fmt == "statelab":
        return text.splitlines()
    raise PredictionImportError([(0, f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")])
