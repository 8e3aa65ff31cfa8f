"""Predictions computed elsewhere, read as StateLab prediction lines (docs/inference.md, "Other
tools' outputs"):

- sheets.py    a file's rows: JSON (a records array, one object, JSON lines), TSV/CSV, .xlsx;
- readers.py   what each tool's rows say: lmms-eval's --log_samples, VLMEvalKit's prediction
               files, a protocol's own formats of kind "predictions", StateLab's own lines;
- matching.py  how rows meet the release's items (--match PATH=FIELD), and the tool's per-sample
               verdicts beside StateLab's score;
- importing.py predictions_import_file: read, match, store (all or nothing), report.

Every format ends as StateLab's own lines ({"item", "query", "answer"[, "logprobs", "source"]}),
one per row and at the row's number, so parse_prediction_lines checks them as it checks a file of
StateLab's and its messages name the file's own line, sheet row or record.
"""

from .importing import PredictionFileReport, predictions_import_file, release_lines
from .matching import SHOWN, Comparison, Disagreement, Mapping, MatchError, parse_match, verdict
from .readers import BUILT_IN, ToolFile, ToolRow, read_prediction_file

__all__ = [
    "BUILT_IN",
    "SHOWN",
    "Comparison",
    "Disagreement",
    "Mapping",
    "MatchError",
    "PredictionFileReport",
    "ToolFile",
    "ToolRow",
    "parse_match",
    "predictions_import_file",
    "read_prediction_file",
    "release_lines",
    "verdict",
]
