"""Writing predictions: the rows a job's chunks produce (upserted under the job's row lock, with
exact counter deltas), and a file of predictions computed elsewhere, stored as a finished
imported job (all lines or nothing)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.utils import timezone

from annotation.agreement import qa_correct
from annotation.audit.record import audit_record
from annotation.models import AuditAction, Item, Project, Release
from annotation.protocols import QUERY_KEYS
from protocols import registry
from protocols.kit.answers import answer_parser, answer_type_error

from ..models import InferenceJob, JobMode, JobStatus, Prediction, PredictionStatus
from ..selectors import job_items
from .jobs import finish_if_done


@dataclass
class PredictionRow:
    item_id: int
    query: str
    status: str
    error: str = ""
    prompt: str = ""
    options: list = field(default_factory=list)
    raw_output: str = ""
    answer: Any = None
    logprobs: dict | None = None
    frame_indices: dict | None = None
    attempts: int = 0
    latency_ms: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    json_repairs: int = 0


_UPDATE_FIELDS = [
    "status",
    "error",
    "prompt",
    "options",
    "raw_output",
    "answer",
    "logprobs",
    "frame_indices",
    "attempts",
    "json_repairs",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "updated_at",
]


@transaction.atomic
def predictions_upsert(*, job_id: int, rows: list[PredictionRow]) -> int:
    """Insert or update predictions under the job's row lock; an OK prediction is never overwritten.

    Counters move by exact deltas computed against the rows already stored, so redelivered or
    concurrent chunks keep done/failed/token figures equal to what the table holds.
    """
    job = InferenceJob.objects.select_for_update().get(pk=job_id)
    if not rows:
        finish_if_done(job)
        return 0
    item_ids = {r.item_id for r in rows}
    existing = {
        (item_id, query): status
        for item_id, query, status in Prediction.objects.filter(job_id=job_id, item_id__in=item_ids).values_list(
            "item_id", "query", "status"
        )
    }
    now = timezone.now()
    to_write: dict[tuple[int, str], Prediction] = {}
    d_done = d_failed = d_prompt = d_completion = 0
    for r in rows:
        key = (r.item_id, r.query)
        before = existing.get(key)
        if before == PredictionStatus.OK:
            continue
        if before is None:
            d_done += r.status == PredictionStatus.OK
            d_failed += r.status == PredictionStatus.FAILED
        elif r.status == PredictionStatus.OK:  # a failed query recovered
            d_done += 1
            d_failed -= 1
        d_prompt += r.prompt_tokens
        d_completion += r.completion_tokens
        existing[key] = r.status
        to_write[key] = Prediction(
            job_id=job_id,
            item_id=r.item_id,
            query=r.query,
            status=r.status,
            error=r.error,
            prompt=r.prompt,
            options=r.options,
            raw_output=r.raw_output,
            answer=r.answer,
            logprobs=r.logprobs,
            frame_indices=r.frame_indices,
            attempts=min(r.attempts, 32767),
            json_repairs=min(r.json_repairs, 32767),
            latency_ms=r.latency_ms,
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
            created_at=now,
            updated_at=now,
        )
    if to_write:
        Prediction.objects.bulk_create(
            list(to_write.values()),
            update_conflicts=True,
            unique_fields=["job", "item", "query"],
            update_fields=_UPDATE_FIELDS,
        )
    job.done_queries += d_done
    job.failed_queries += d_failed
    job.prompt_tokens += d_prompt
    job.completion_tokens += d_completion
    job.save(update_fields=["done_queries", "failed_queries", "prompt_tokens", "completion_tokens"])
    finish_if_done(job)
    return len(to_write)


# --- predictions computed elsewhere ----------------------------------------------------------


MAX_ERRORS_SHOWN = 50


class PredictionImportError(ValueError):
    """The file is refused whole; ``errors`` lists (number, reason), the number counting ``unit``s
    of the file (its lines; a workbook's rows; a JSON document's records), 0 for the whole file."""

    def __init__(self, errors: list[tuple[int, str]], *, unit: str = "line"):
        self.errors = errors
        self.unit = unit
        shown = "; ".join(f"{unit} {n}: {reason}" if n else reason for n, reason in errors[:MAX_ERRORS_SHOWN])
        more = f" (and {len(errors) - MAX_ERRORS_SHOWN} more)" if len(errors) > MAX_ERRORS_SHOWN else ""
        if all(n == 0 for n, _ in errors):  # the file as a whole, not some of its lines
            super().__init__(f"nothing imported: {shown}{more}")
        else:
            super().__init__(f"{len(errors)} bad {unit}(s), nothing imported: {shown}{more}")


@dataclass
class ParsedLine:
    item_pk: int
    query: str
    raw: Any
    answer: Any
    options: list
    logprobs: dict | None
    at: int = 0  # the line (row, record) of the file
    external_id: str = ""
    # StateLab's verdict on the answer (None: the query has no right answer, e.g. a judge's ratings)
    correct: bool | None = None
    source: dict | None = None  # what the tool that wrote the file logged beside the reply


def _check_logprobs(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not value:
        return '"logprobs" must be an object such as {"A": -0.1, "B": -2.3}'
    for k, v in value.items():
        if (
            not isinstance(k, str)
            or isinstance(v, bool)
            or not isinstance(v, (int, float))
            or not math.isfinite(v)
            or v > 0
        ):
            return f'"logprobs" entry {k!r}: a log-probability is a finite number <= 0'
    return None


LINE_FIELDS = {"item", "query", "answer", "logprobs", "source"}


def parse_prediction_lines(
    project: Project, release: Release | None, lines: Iterable[str], *, unit: str = "line"
) -> list[ParsedLine]:
    """Validate every line; raise PredictionImportError listing all bad lines."""
    items = job_items(project=project, release=release)
    by_external = {it.external_id: it for it in items}
    verified_elsewhere = set()
    if release is None:
        verified_elsewhere = set(Item.objects.filter(project=project).values_list("external_id", flat=True)) - set(
            by_external
        )
    keys = set(QUERY_KEYS[project.protocol])
    parse_answer = answer_parser(project.protocol)  # the protocol looked up once, not per line
    errors: list[tuple[int, str]] = []
    parsed: list[ParsedLine] = []
    seen: dict[tuple, int] = {}
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as exc:
            errors.append((n, f"not valid JSON ({exc.msg})"))
            continue
        if not isinstance(obj, dict):
            errors.append((n, "a line must be a JSON object"))
            continue
        unknown = sorted(set(obj) - LINE_FIELDS)
        missing = [k for k in ("item", "query", "answer") if k not in obj]
        if unknown or missing:
            errors.append(
                (n, "; ".join([f"unknown field {k!r}" for k in unknown] + [f"missing field {k!r}" for k in missing]))
            )
            continue
        item_id, query = obj["item"], obj["query"]
        if not isinstance(item_id, (str, int)) or isinstance(item_id, bool):
            errors.append((n, '"item" must be the item id (a string)'))
            continue
        item = by_external.get(str(item_id))
        if item is None:
            where = f"release {release.version}" if release is not None else "the project's verified items"
            hint = " (it exists but is not verified)" if str(item_id) in verified_elsewhere else ""
            errors.append((n, f"unknown item {item_id!r}: not in {where}{hint}"))
            continue
        if query not in keys:
            errors.append(
                (n, f"unknown query {query!r} for {project.protocol}; expected one of {', '.join(sorted(keys))}")
            )
            continue
        if (item.key, query) in seen:
            errors.append((n, f"duplicate of line {seen[(item.key, query)]} (item {item_id!r}, query {query!r})"))
            continue
        seen[(item.key, query)] = n
        spec = item.resolved[query]
        fmt = spec.get("format") or item.payload.get("format")
        raw = obj["answer"]
        type_error = answer_type_error(registry.get(project.protocol).answer_kind, raw, fmt=fmt)
        if type_error:
            errors.append((n, type_error))
            continue
        lp_error = _check_logprobs(obj.get("logprobs"))
        if lp_error:
            errors.append((n, lp_error))
            continue
        source = obj.get("source")
        if source is not None and not isinstance(source, dict):
            errors.append((n, '"source" must be an object (what the tool logged beside the reply)'))
            continue
        options = list(spec.get("options") or [])
        unshown = spec.get("unshown") or ()
        answer = None if raw in (None, "", []) else parse_answer(query, raw, options, fmt=fmt, unshown=unshown)
        truth = spec.get("answer")
        parsed.append(
            ParsedLine(
                item.key,
                query,
                raw,
                answer,
                options,
                obj.get("logprobs"),
                at=n,
                external_id=item.external_id,
                correct=None if truth is None else qa_correct(answer, truth),
                source=source,
            )
        )
    if errors:
        raise PredictionImportError(errors, unit=unit)
    if not parsed:
        raise PredictionImportError([(0, "the file holds no prediction")], unit=unit)
    return parsed


@dataclass
class ImportedPredictions:
    job: InferenceJob
    lines: list[ParsedLine]


def predictions_import(
    *, project: Project, lines: Iterable[str], model_name: str, release: Release | None = None, actor=None
) -> InferenceJob:
    """Store a file of predictions as a finished imported job; all lines or nothing (audited as `actor`'s)."""
    return predictions_import_lines(
        project=project, lines=lines, model_name=model_name, release=release, actor=actor
    ).job


@transaction.atomic
def predictions_import_lines(
    *,
    project: Project,
    lines: Iterable[str],
    model_name: str,
    release: Release | None = None,
    actor=None,
    unit: str = "line",
    details: dict[str, Any] | None = None,
) -> ImportedPredictions:
    """predictions_import, returning the parsed lines too; ``unit`` names what the lines' numbers
    count in the file, ``details`` (the file's format, the mapping) is kept in the job's
    parameters and the audit trail."""
    if not model_name.strip():
        raise PredictionImportError([(0, "a model name is required")])
    parsed = parse_prediction_lines(project, release, lines, unit=unit)
    now = timezone.now()
    failed = sum(1 for p in parsed if p.answer is None)
    job = InferenceJob.objects.create(
        endpoint=None,
        model_name=model_name.strip(),
        project=project,
        release=release,
        protocol=project.protocol,
        mode=JobMode.IMPORTED,
        params={"import": details} if details else {},
        status=JobStatus.FINISHED,
        total_queries=len(parsed),
        done_queries=len(parsed),
        failed_queries=failed,
        started_at=now,
        finished_at=now,
    )
    Prediction.objects.bulk_create(
        [
            Prediction(
                job=job,
                item_id=p.item_pk,
                query=p.query,
                status=PredictionStatus.OK if p.answer is not None else PredictionStatus.FAILED,
                error="" if p.answer is not None else "unparseable or empty answer",
                options=p.options,
                raw_output=p.raw if isinstance(p.raw, str) else json.dumps(p.raw),
                answer=p.answer,
                logprobs=p.logprobs,
                source=p.source,
            )
            for p in parsed
        ],
        batch_size=2000,
    )
    audit_record(
        action=AuditAction.IMPORT,
        actor=actor,
        project=project,
        obj=job,
        details={
            "kind": "predictions",
            "model": job.model_name,
            "lines": len(parsed),
            "failed": failed,
            "release": release.version if release else None,
            **(details or {}),
        },
    )
    return ImportedPredictions(job, parsed)
