"""Jobs: create (validated), start (plan items and totals, enqueue chunks), cancel, retry the
failed queries and unreadable replies, finish (FINISHED, or FAILED when nothing succeeded) and
re-score.

Work is enqueued by Celery task name once the transaction commits, each message a tracked run
(runs.py: a BackgroundRun row written in the same transaction): this module never imports the
Celery tasks. A job that ends FINISHED also enqueues the follow-up Celery tasks that
settings.STATELAB_JOB_FINISHED_TASKS names (the evaluation app's board warming), by name, so
inference imports no other app.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from annotation.audit.record import audit_record
from annotation.models import AuditAction, Item, ItemStatus, Project, Release, ReleaseItem, Workflow
from annotation.protocols import QUERY_KEYS
from protocols import registry
from protocols.kit.prompting import PreparedQuery

from ..backends import BackendUnavailable, check_available
from ..models import Backend, InferenceJob, JobMode, JobStatus, ModelEndpoint, Prediction, PredictionStatus
from ..prompting import prompt_version, suggestion_keys
from ..selectors import job_json_queries, unreadable_replies
from .frames import chunks_enqueue
from .inputs import item_inputs, parse_reply, unreadable_json_error
from .runs import run_enqueue_on_commit

log = logging.getLogger(__name__)

ACTIVE = (JobStatus.QUEUED, JobStatus.RUNNING)
SUGGEST_WORKFLOWS = (Workflow.QUINTUPLET, Workflow.QA)


class JobRefused(ValidationError):
    """The job cannot be created or started as asked (message says why)."""


def error_message(exc: BaseException) -> str:
    """The text recorded as a job's error: a ValidationError's messages, else the exception's."""
    if isinstance(exc, ValidationError):
        return " ".join(exc.messages)
    return str(exc)


# --- creation and control --------------------------------------------------------------------


def endpoint_launch_refusal(*, endpoint: ModelEndpoint, project: Project) -> str | None:
    """Why a job of `project` may not run on `endpoint`, or None: another project's endpoint; a key
    variable it may not read (ModelEndpoint.key_refusal); or, for a backend that sends the key (the
    OpenAI-compatible one), a variable unset or empty in this process, where the job would fail at
    once. The launch is checked here, in the web process; the deployment gives the web server and
    the workers the same environment (docker-compose.yml), so what is set here is set there."""
    if endpoint.project_id is not None and endpoint.project_id != project.pk:
        return f"endpoint {endpoint.name} belongs to another project; pick a shared one or one of {project.slug}"
    refusal = endpoint.key_refusal()
    if refusal:
        return f"endpoint {endpoint.name} cannot be used: {refusal}"
    if endpoint.backend == Backend.OPENAI and endpoint.api_key_env and not os.environ.get(endpoint.api_key_env):
        state = "empty" if endpoint.api_key_env in os.environ else "not set"
        return (
            f"endpoint {endpoint.name} reads its API key from {endpoint.api_key_env}, which is {state} on this "
            f"server: set {endpoint.api_key_env} in the environment of the web server and the workers, or pick "
            "another endpoint"
        )
    return None


def job_validate(
    *, endpoint: ModelEndpoint, project: Project, release: Release | None, protocol: str, mode: str, params: dict
) -> None:
    refusal = endpoint_launch_refusal(endpoint=endpoint, project=project)
    if refusal:
        raise JobRefused(refusal)
    if protocol != project.protocol:
        raise JobRefused(f"project {project.slug} uses the {project.protocol} protocol, not {protocol}")
    if release is not None and release.project_id != project.pk:
        raise JobRefused(f"release {release} does not belong to project {project.slug}")
    if mode == JobMode.SUGGEST:
        if project.workflow not in SUGGEST_WORKFLOWS:
            raise JobRefused("suggestions are made for quintuplet and QA projects only")
        if release is not None:
            raise JobRefused("suggestions run over unlabeled items, not over a release")
    elif mode != JobMode.EVALUATE:
        raise JobRefused(f"jobs run in evaluate or suggest mode, not {mode}")
    strategies = sorted({s for p in registry.protocols() for s in p.strategies})
    strategy = params.get("strategy")
    if strategy not in (None, "", "direct", *strategies):
        raise JobRefused(f"strategy must be {' or '.join(['direct', *strategies])}")
    if strategy not in (None, "", "direct") and strategy not in registry.get(protocol).strategies:
        having = ", ".join(p.name for p in registry.protocols() if strategy in p.strategies)
        raise JobRefused(f"the {strategy} strategy is for video QA ({having})")
    for name in ("item_limit", "frames", "chunk_size"):
        if params.get(name) is not None and (not isinstance(params[name], int) or params[name] < 1):
            raise JobRefused(f"{name} must be a positive integer")
    if params.get("frames") and params["frames"] > 200:
        raise JobRefused("frames must be at most 200")
    if params.get("frames_mode") not in (None, "", "exact", "keyframe"):
        raise JobRefused("frames_mode must be exact or keyframe")
    if params.get("prepare_frames") not in (None, True, False):
        raise JobRefused("prepare_frames must be true or false")


@transaction.atomic
def job_create(
    *,
    endpoint: ModelEndpoint,
    project: Project,
    protocol: str | None = None,
    release: Release | None = None,
    mode: str = JobMode.EVALUATE,
    params: dict[str, Any] | None = None,
    created_by=None,
    start: bool = True,
) -> InferenceJob:
    """Create a job and (by default) start it once the transaction commits."""
    params = dict(params or {})
    protocol = protocol or project.protocol
    job_validate(endpoint=endpoint, project=project, release=release, protocol=protocol, mode=mode, params=params)
    job = InferenceJob.objects.create(
        endpoint=endpoint,
        model_name=endpoint.name,
        project=project,
        release=release,
        protocol=protocol,
        mode=mode,
        params=params,
        prompt_version=prompt_version(protocol, params.get("strategy")),
        created_by=created_by,
    )
    audit_record(action=AuditAction.LAUNCH, actor=created_by, project=project, obj=job, details={"mode": mode})
    if start:
        job_enqueue_start(job=job)
    return job


def job_enqueue_start(*, job: InferenceJob) -> None:
    """Start the job after commit; vLLM jobs start on the gpu queue, where vLLM must be importable."""
    queue = "gpu" if job.endpoint and job.endpoint.backend == Backend.VLLM else "default"
    run_enqueue_on_commit("inference.tasks.start_job", job.pk, queue=queue, job=job)


def _plan_rows(job: InferenceJob, *, with_payload: bool = True, limited: bool = True):
    """(item id, payload) rows of the job's items in run order (release position, else item id);
    just item ids when with_payload is False; all of them, item_limit aside, when limited is False."""
    limit = job.params.get("item_limit") if limited else None
    if job.release_id:
        rows = ReleaseItem.objects.filter(release_id=job.release_id).order_by("position")
        fields = ("item_id", "payload")
    else:
        if job.mode == JobMode.SUGGEST:
            rows = Item.objects.filter(project_id=job.project_id, status=ItemStatus.PENDING, annotation_count=0)
        else:
            rows = Item.objects.filter(project_id=job.project_id, status=ItemStatus.VERIFIED)
        rows = rows.order_by("id")
        fields = ("id", "payload")
    rows = rows.values_list(*fields) if with_payload else rows.values_list(fields[0], flat=True)
    return rows[:limit] if limit else rows


def _plan_items(job: InferenceJob) -> list[int]:
    """The job's item ids; payloads stay in the database (each chunk loads its own)."""
    return list(_plan_rows(job, with_payload=False))


def job_query_keys(job: InferenceJob) -> tuple[str, ...]:
    """The queries every item of this job answers (suggestion mode: one). The one rule for it:
    the job's total, a chunk's skip of answered queries (chunks.py) and the failing of a lost
    chunk's unanswered queries (recovery.py) all read it."""
    if job.mode == JobMode.SUGGEST:
        return suggestion_keys(job.protocol)
    return tuple(QUERY_KEYS[job.protocol])


def queries_per_item(job: InferenceJob) -> int:
    return len(job_query_keys(job))


def _chunk_size(job: InferenceJob) -> int:
    if job.params.get("chunk_size"):
        return int(job.params["chunk_size"])
    if job.endpoint.backend == Backend.VLLM:
        return 64
    # Enough queries per chunk to keep the endpoint's concurrency busy.
    per_item = queries_per_item(job)
    return max(4, math.ceil(2 * job.endpoint.concurrency / per_item))


def _chunks(ids: list[int], size: int) -> list[list[int]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def job_start(*, job_id: int) -> InferenceJob:
    """Plan a queued job (items, totals), then enqueue its chunks. Refuses with a recorded error."""
    with transaction.atomic():
        job = (
            InferenceJob.objects.select_for_update(of=("self",))
            .select_related("endpoint", "release", "project")
            .get(pk=job_id)
        )
        if job.status != JobStatus.QUEUED:
            return job  # started already (a redelivered start) or cancelled meanwhile
        try:
            if job.endpoint is None:
                raise BackendUnavailable("the job has no model endpoint")
            check_available(job.endpoint)
            planned = _plan_items(job)
            if not planned:
                raise JobRefused("there are no items to run (check the release, the item status and the item limit)")
        except (BackendUnavailable, JobRefused) as exc:
            job.status = JobStatus.FAILED
            job.error = error_message(exc)
            job.finished_at = timezone.now()
            job.save(update_fields=["status", "error", "finished_at"])
            return job
        found = registry.get(job.protocol)
        if found.vocabulary_param and found.vocabulary_param not in job.params:
            # One vocabulary for the whole run, so every chunk draws options alike: from every
            # item of the release or project (an item limit must not change the candidates).
            job.params[found.vocabulary_param] = found.vocabulary(
                payload for _, payload in _plan_rows(job, limited=False).iterator(chunk_size=5000)
            )
        job.status = JobStatus.RUNNING
        job.started_at = timezone.now()
        job.error = ""
        job.total_queries = len(planned) * queries_per_item(job)
        job.save(update_fields=["status", "started_at", "error", "total_queries", "params"])
        chunks = _chunks(planned, _chunk_size(job))
        _enqueue_chunks(job, chunks)
    return job


def _enqueue_chunks(job: InferenceJob, chunks: list[list[int]]) -> None:
    chunks_enqueue(job=job, chunks=chunks)  # through frame preparation first where it applies (frames.py)


@transaction.atomic
def job_cancel(*, job: InferenceJob, actor=None) -> bool:
    job = InferenceJob.objects.select_for_update().get(pk=job.pk)
    if job.status not in ACTIVE:
        return False
    job.status = JobStatus.CANCELLED
    job.finished_at = timezone.now()
    job.save(update_fields=["status", "finished_at"])
    audit_record(action=AuditAction.CANCEL, actor=actor, project=job.project, obj=job)
    return True


@transaction.atomic
def job_retry_failed(*, job: InferenceJob, actor=None) -> int:
    """Ask again every query of the job that has no answer to show: a failed query (no reply
    came back) and an unreadable reply (a judge's JSON that stayed unreadable through its repairs:
    selectors.unreadable_replies). Returns how many items are re-run.

    Unreadable replies are retried because the rating protocol's spec ("Queries and prompts") has
    unreadable judge JSON repaired or asked again before it counts as missing, and a researcher
    who sees them listed wants the judge asked again; the new outcome (readable, unreadable again,
    or failed) replaces the stored one. Option
    replies that name no option are not retried: they are the evaluated model's answer, and
    asking until one reads would flatter it. An imported job has no model to ask: nothing."""
    job = (
        InferenceJob.objects.select_for_update(of=("self",))
        .select_related("endpoint", "release", "project")
        .get(pk=job.pk)
    )
    if job.status in ACTIVE and job.status != JobStatus.RUNNING:
        return 0
    if job.endpoint_id is None:  # predictions imported from a file (predictions_import)
        return 0
    audit_record(action=AuditAction.RETRY, actor=actor, project=job.project, obj=job, details={"status": job.status})
    if job.total_queries == 0:  # never planned (failed to start): start from scratch
        job.status = JobStatus.QUEUED
        job.error = ""
        job.finished_at = None
        job.save(update_fields=["status", "error", "finished_at"])
        job_enqueue_start(job=job)
        return 0
    planned = _plan_items(job)
    per_item = queries_per_item(job)
    ok_counts = dict(
        Prediction.objects.filter(job=job, status=PredictionStatus.OK)
        .values("item_id")
        .annotate(n=Count("id"))
        .values_list("item_id", "n")
    )
    unreadable = set(unreadable_replies(job).values_list("item_id", flat=True))
    todo = [item_id for item_id in planned if ok_counts.get(item_id, 0) < per_item or item_id in unreadable]
    if not todo:
        return 0
    # The failed rows and unreadable replies of these items are asked again: they stop counting,
    # so the job finishes only once every retried chunk has written its outcome (else the first
    # chunk back would find done + failed = total and end the job before the others ran), and a
    # chunk, which skips the queries that have an OK prediction, asks them. The job's token
    # figures keep what the replies cost: they count what was spent.
    cleared_failed, _ = Prediction.objects.filter(job=job, item_id__in=todo, status=PredictionStatus.FAILED).delete()
    cleared_unreadable, _ = unreadable_replies(job).filter(item_id__in=todo).delete()
    job.failed_queries = max(0, job.failed_queries - cleared_failed)
    job.done_queries = max(0, job.done_queries - cleared_unreadable)
    job.status = JobStatus.RUNNING
    job.error = ""
    job.finished_at = None
    job.correct_answers = None  # scored again when it finishes (exports.py)
    job.save(update_fields=["status", "error", "finished_at", "failed_queries", "done_queries", "correct_answers"])
    _enqueue_chunks(job, _chunks(todo, _chunk_size(job)))
    return len(todo)


# --- finishing -------------------------------------------------------------------------------


def failure_summary(job: InferenceJob, *, top: int = 3) -> str:
    """The most frequent errors of the job's failed queries, e.g. "12× connection failed: ...;"."""
    rows = (
        Prediction.objects.filter(job=job, status=PredictionStatus.FAILED)
        .values("error")
        .annotate(n=Count("id"))
        .order_by("-n", "error")[:top]
    )
    return "; ".join(f"{row['n']}× {row['error']}" for row in rows)


def finish_if_done(job: InferenceJob) -> None:
    """Every query answered or failed: the job ends FINISHED, or FAILED when not one query
    succeeded (a job with nothing to show is not a finished run), with the main errors.
    The caller holds the job's row lock (select_for_update) in the current transaction."""
    if (
        job.status == JobStatus.RUNNING
        and job.total_queries
        and job.done_queries + job.failed_queries >= job.total_queries
    ):
        if job.done_queries == 0:
            job.status = JobStatus.FAILED
            job.error = f"all {job.total_queries} queries failed: {failure_summary(job)}"[:4000]
        else:
            job.status = JobStatus.FINISHED
        job.finished_at = timezone.now()
        job.save(update_fields=["status", "error", "finished_at"])
        run_enqueue_on_commit("inference.tasks.export_job", job.pk, job=job)
        if job.status == JobStatus.FINISHED:
            _enqueue_finished_tasks(job)


def _enqueue_finished_tasks(job: InferenceJob) -> None:
    """Once the FINISHED status commits, send each Celery task settings.STATELAB_JOB_FINISHED_TASKS names
    (project id, release id), as tracked runs: other apps follow a finished job without inference
    importing them. A broker hiccup must not fail the job that just finished: a send that fails is
    logged and fails only its run (quiet)."""
    for task_name in getattr(settings, "STATELAB_JOB_FINISHED_TASKS", ()):
        run_enqueue_on_commit(task_name, job.project_id, job.release_id, job=job, quiet=True)


@transaction.atomic
def job_refresh_finished(*, job_id: int) -> None:
    finish_if_done(InferenceJob.objects.select_for_update().get(pk=job_id))


@transaction.atomic
def job_fail(*, job: InferenceJob, error: str) -> None:
    job = InferenceJob.objects.select_for_update().get(pk=job.pk)
    if job.status in ACTIVE:
        job.status = JobStatus.FAILED
        job.error = error
        job.finished_at = timezone.now()
        job.save(update_fields=["status", "error", "finished_at"])


# --- re-scoring ------------------------------------------------------------------------------


@transaction.atomic
def job_rescore(*, job: InferenceJob) -> int:
    """Re-parse every OK prediction's raw output with the current parser; returns how many changed.

    The reason an OK prediction carries (its error) always matches its stored reply afterwards: a
    JSON reply (a judge's) that now reads loses it; one that no longer reads gets it
    (unreadable_json_error, with the repairs the chunk made), so it is listed with the unreadable
    replies and "retry failed" asks it again. Statuses and counters do not move: an unreadable
    reply is still a reply, scored as missing."""
    json_queries = set(job_json_queries(job))
    changed = []
    preds = list(Prediction.objects.filter(job=job, status=PredictionStatus.OK).select_for_update())
    # The resolved queries the job asked (the release's stored ones): their "unshown" texts.
    resolved = {i.item_pk: i.resolved for i in item_inputs(job, sorted({p.item_id for p in preds}))}
    for pred in preds:
        fmt = None
        if registry.get(job.protocol).answer_kind == "qa":  # the item's format picks the parser
            fmt = (pred.item.payload or {}).get("format")
        spec = resolved.get(pred.item_id, {}).get(pred.query) or {}
        unshown = list(spec.get("unshown") or [])
        prepared = PreparedQuery(key=pred.query, query=None, options=pred.options, fmt=fmt, unshown=unshown)
        answer = parse_reply(job, prepared, pred.raw_output)
        if answer is not None:
            error = ""
        elif pred.query in json_queries:
            # Kept when it is already the reason (it may name a failed repair request).
            error = pred.error or unreadable_json_error(pred.query, pred.json_repairs)
        else:
            error = pred.error  # an option reply that names no option: a parse failure, no reason
        if answer != pred.answer or error != pred.error:
            pred.answer, pred.error = answer, error
            changed.append(pred)
    Prediction.objects.bulk_update(changed, ["answer", "error"])
    run_enqueue_on_commit("inference.tasks.export_job", job.pk, job=job)
    return len(changed)
