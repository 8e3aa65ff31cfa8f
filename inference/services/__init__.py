"""Write paths of the inference app, one module per job:

- endpoints.py   model endpoints;
- jobs.py        create, validate, start, cancel, retry, finish and re-score a job;
- inputs.py      each item's input, the protocol's queries for it, the parsing of a reply;
- chunks.py      running one chunk of a job (the backend call, JSON repair, rows from replies);
- frames.py      video frames prepared on CPU workers before a job's gpu chunks run;
- cache.py       bounding a host's caches of media copies and sampled frames (prune_cache);
- predictions.py upserting a chunk's predictions, importing predictions computed elsewhere;
- prediction_formats/ other tools' files (lmms-eval, VLMEvalKit, a protocol's formats) read and matched to a release;
- suggestions.py suggestions a suggest job leaves on the annotation form;
- exports.py     results.json and samples.jsonl.

A job runs as chunk tasks (tasks.py) over its items. Each chunk loads the job by id, skips the
queries that already have an OK prediction, asks the backend, and upserts one prediction per
(job, item, query) under the job's row lock, adjusting the progress counters by exact deltas.
So a crashed worker, a redelivered Celery task, a retry or a re-run fills gaps and never duplicates.
Services enqueue Celery tasks by name (config.enqueue) and never import them.

Callers import this package (`from inference import services; services.job_create(...)`).
"""

from .chunks import JSON_REPAIR_PROMPT, job_run_chunk, row_from_reply, sampling_for
from .endpoints import endpoint_create, endpoint_options_check, parse_key_values
from .exports import job_export_dir, job_write_exports
from .frames import job_prepare_frames, job_prepares_frames
from .inputs import build_queries, item_inputs, parse_reply
from .jobs import (
    ACTIVE,
    SUGGEST_WORKFLOWS,
    JobRefused,
    error_message,
    failure_summary,
    job_cancel,
    job_create,
    job_enqueue_start,
    job_fail,
    job_refresh_finished,
    job_rescore,
    job_retry_failed,
    job_start,
    job_validate,
    queries_per_item,
)
from .predictions import (
    PredictionImportError,
    PredictionRow,
    parse_prediction_lines,
    predictions_import,
    predictions_upsert,
)
from .suggestions import suggestion_source, suggestions_store

__all__ = [
    "ACTIVE",
    "JSON_REPAIR_PROMPT",
    "SUGGEST_WORKFLOWS",
    "JobRefused",
    "PredictionImportError",
    "PredictionRow",
    "build_queries",
    "endpoint_create",
    "endpoint_options_check",
    "error_message",
    "failure_summary",
    "item_inputs",
    "job_cancel",
    "job_create",
    "job_enqueue_start",
    "job_export_dir",
    "job_fail",
    "job_refresh_finished",
    "job_rescore",
    "job_prepare_frames",
    "job_prepares_frames",
    "job_retry_failed",
    "job_run_chunk",
    "job_start",
    "job_validate",
    "job_write_exports",
    "parse_key_values",
    "parse_prediction_lines",
    "parse_reply",
    "predictions_import",
    "predictions_upsert",
    "queries_per_item",
    "row_from_reply",
    "sampling_for",
    "suggestion_source",
    "suggestions_store",
]
