"""Write paths of the inference app: endpoints, jobs, chunks of queries, predictions, suggestions.

A job runs as chunk tasks (tasks.py) over its items. Each chunk loads the job by id, skips the
queries that already have an OK prediction, asks the backend, and upserts one prediction per
(job, item, query) under the job's row lock, adjusting the progress counters by exact deltas.
So a crashed worker, a redelivered task, a retry or a re-run fills gaps and never duplicates.
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from annotation.models import Item, ItemStatus, MediaAsset, Project, Release, ReleaseItem, Suggestion, Workflow
from annotation.protocols import MEDIA_FIELDS, QUERY_KEYS, changeit_vocabulary, resolve_queries
from .answers import parse_answer

from . import protocols
from .backends import BackendUnavailable, check_available, get_backend
from .backends.base import ModelQuery, ModelReply, Sampling
from .media import DEFAULT_BOUND, MediaError, VideoInfo
from .models import Backend, InferenceJob, JobMode, JobStatus, ModelEndpoint, Prediction, PredictionStatus
from .protocols.base import ItemInput, MediaPreparer, PreparedQuery, render_prompt

log = logging.getLogger(__name__)

ACTIVE = (JobStatus.QUEUED, JobStatus.RUNNING)
SUGGEST_WORKFLOWS = (Workflow.QUINTUPLET, Workflow.QA)
JSON_REPAIR_PROMPT = (
    "That reply could not be read as the JSON object that was asked for. "
    "Reply again with only the JSON object, following the requested form exactly."
)


class JobRefused(ValidationError):
    """The job cannot be created or started as asked (message says why)."""


# --- endpoints -----------------------------------------------------------------------------


def _coerce(value: str) -> Any:
    """Command-line option values: JSON when it parses (numbers, booleans, objects), else text."""
    try:
        return json.loads(value)
    except ValueError:
        return value


def parse_key_values(pairs: Iterable[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValidationError(f"expected key=value, got {pair!r}")
        key, value = pair.split("=", 1)
        out[key.strip()] = _coerce(value.strip())
    return out


def endpoint_options_check(options: dict[str, Any]) -> None:
    """Refuse settings that look like secrets: keys live in environment variables only."""
    for key in options:
        lowered = key.lower()
        if any(word in lowered for word in ("api_key", "apikey", "secret", "token", "password")) and "tokens" not in lowered:
            raise ValidationError(
                f"option {key!r} looks like a secret; put it in an environment variable and name that variable "
                "as the endpoint's API key variable"
            )


@transaction.atomic
def endpoint_create(
    *,
    name: str,
    backend: str,
    model_id: str = "",
    revision: str = "",
    base_url: str = "",
    api_key_env: str = "",
    concurrency: int = 8,
    options: dict[str, Any] | None = None,
) -> ModelEndpoint:
    if backend not in Backend.values:
        raise ValidationError(f"backend must be one of {', '.join(Backend.values)}")
    if backend != Backend.RANDOM and not model_id:
        raise ValidationError("a model id is required for the vllm and openai backends")
    if concurrency < 1:
        raise ValidationError("concurrency must be at least 1")
    options = dict(options or {})
    endpoint_options_check(options)
    endpoint = ModelEndpoint(
        name=name,
        backend=backend,
        model_id=model_id,
        revision=revision,
        base_url=base_url,
        api_key_env=api_key_env,
        concurrency=concurrency,
        options=options,
    )
    endpoint.full_clean()
    endpoint.save()
    return endpoint


# --- jobs: creation and control ------------------------------------------------------------


def job_validate(
    *, endpoint: ModelEndpoint, project: Project, release: Release | None, protocol: str, mode: str, params: dict
) -> None:
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
    if params.get("strategy") not in (None, "", "direct", "multistage"):
        raise JobRefused("strategy must be direct or multistage")
    if params.get("strategy") == "multistage" and protocol != "m3verse":
        raise JobRefused("the multistage strategy is for video QA (m3verse)")
    for name in ("item_limit", "frames", "chunk_size"):
        if params.get(name) is not None and (not isinstance(params[name], int) or params[name] < 1):
            raise JobRefused(f"{name} must be a positive integer")
    if params.get("frames") and params["frames"] > 200:
        raise JobRefused("frames must be at most 200")


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
        prompt_version=protocols.prompt_version(protocol, params.get("strategy")),
        created_by=created_by,
    )
    if start:
        job_enqueue_start(job=job)
    return job


def job_enqueue_start(*, job: InferenceJob) -> None:
    """Start the job after commit; vLLM jobs start on the gpu queue, where vLLM must be importable."""
    from .tasks import start_job

    queue = "gpu" if job.endpoint and job.endpoint.backend == Backend.VLLM else "default"
    transaction.on_commit(lambda: start_job.apply_async(args=[job.pk], queue=queue))


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


def queries_per_item(job: InferenceJob) -> int:
    if job.mode == JobMode.SUGGEST:
        return 1
    return len(QUERY_KEYS[job.protocol])


def _query_keys(job: InferenceJob) -> tuple[str, ...]:
    """The queries every item of this job answers (suggestion mode: one)."""
    if job.mode == JobMode.SUGGEST:
        return ("suggest",) if job.protocol == "status" else ("qa",)
    return tuple(QUERY_KEYS[job.protocol])


def _option_seed(job: InferenceJob) -> int:
    return job.release.option_seed if job.release_id else job.project.option_seed


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
        job = InferenceJob.objects.select_for_update(of=("self",)).select_related("endpoint", "release", "project").get(pk=job_id)
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
            job.error = _message(exc)
            job.finished_at = timezone.now()
            job.save(update_fields=["status", "error", "finished_at"])
            return job
        if job.protocol == "changeit" and "changeit_vocabulary" not in job.params:
            # One label vocabulary for the whole run, so every chunk draws candidates alike: from
            # every item of the release or project (an item limit must not change the candidates).
            job.params["changeit_vocabulary"] = changeit_vocabulary(
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
    from .tasks import run_api_chunk, run_gpu_chunk

    task = run_gpu_chunk if job.endpoint.backend == Backend.VLLM else run_api_chunk
    job_id = job.pk
    transaction.on_commit(lambda: [task.delay(job_id, chunk) for chunk in chunks])


@transaction.atomic
def job_cancel(*, job: InferenceJob) -> bool:
    job = InferenceJob.objects.select_for_update().get(pk=job.pk)
    if job.status not in ACTIVE:
        return False
    job.status = JobStatus.CANCELLED
    job.finished_at = timezone.now()
    job.save(update_fields=["status", "finished_at"])
    return True


@transaction.atomic
def job_retry_failed(*, job: InferenceJob) -> int:
    """Re-run every item that lacks an OK prediction for one of its queries. Returns the item count."""
    job = InferenceJob.objects.select_for_update(of=("self",)).select_related("endpoint", "release", "project").get(pk=job.pk)
    if job.status in ACTIVE and job.status != JobStatus.RUNNING:
        return 0
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
    todo = [item_id for item_id in planned if ok_counts.get(item_id, 0) < per_item]
    if not todo:
        return 0
    # The failed rows of these items are asked again: they stop counting, so the job finishes only
    # once every retried chunk has written its outcome (else the first chunk back would find
    # done + failed = total and end the job before the others ran).
    cleared, _ = Prediction.objects.filter(job=job, item_id__in=todo, status=PredictionStatus.FAILED).delete()
    job.failed_queries = max(0, job.failed_queries - cleared)
    job.status = JobStatus.RUNNING
    job.error = ""
    job.finished_at = None
    job.save(update_fields=["status", "error", "finished_at", "failed_queries"])
    _enqueue_chunks(job, _chunks(todo, _chunk_size(job)))
    return len(todo)


# --- running one chunk ---------------------------------------------------------------------


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


def sampling_for(params: dict[str, Any]) -> Sampling:
    return Sampling(
        temperature=float(params.get("temperature", 0.0)),
        top_p=float(params.get("top_p", 1.0)),
        max_tokens=params.get("max_tokens"),
        seed=params.get("seed"),
        logprobs=params.get("logprobs", 5),
    )


def _media_assets(items: list[Item]) -> dict[str, MediaAsset]:
    shas: set[str] = set()
    for item in items:
        for value in (item.media or {}).values():
            shas.update(value if isinstance(value, list) else [value])
    return {a.sha256: a for a in MediaAsset.objects.filter(sha256__in=shas)}


def _video_info(item: Item, field_name: str, assets: dict[str, MediaAsset]) -> VideoInfo | None:
    asset = assets.get((item.media or {}).get(field_name) or "")
    if asset is None or not (asset.width and asset.height and asset.frame_count):
        return None
    return VideoInfo(asset.width, asset.height, asset.frame_count, asset.duration)


def _local_path(item: Item, field_name: str, lookup: dict[str, str], payload: dict) -> Any:
    sha = (item.media or {}).get(field_name)
    rel = payload.get(field_name)
    if isinstance(sha, list) or isinstance(rel, list):
        shas = sha if isinstance(sha, list) else [None] * len(rel or [])
        rels = rel if isinstance(rel, list) else [None] * len(shas)
        return [_one_path(s, r, lookup) for s, r in zip(shas, rels)]
    return _one_path(sha, rel, lookup)


def _one_path(sha: str | None, rel: str | None, lookup: dict[str, str]) -> str | None:
    if sha and sha in lookup:
        return lookup[sha]
    if rel:
        path = Path(settings.MEDIA_ROOT) / rel
        return str(path) if path.exists() else None
    return None


def item_inputs(job: InferenceJob, item_ids: list[int]) -> list[ItemInput]:
    items = {i.pk: i for i in Item.objects.filter(pk__in=item_ids)}
    if job.release_id:
        payloads = dict(ReleaseItem.objects.filter(release_id=job.release_id, item_id__in=item_ids).values_list("item_id", "payload"))
    else:
        payloads = {pk: item.payload for pk, item in items.items()}
    assets = _media_assets(list(items.values()))
    lookup = {sha: asset.file.path for sha, asset in assets.items()}
    seed = _option_seed(job)
    vocabulary = job.params.get("changeit_vocabulary")
    out = []
    for item_id in item_ids:
        if item_id not in items or item_id not in payloads:
            continue
        item, payload = items[item_id], payloads[item_id]
        fields = MEDIA_FIELDS[job.protocol]
        stored = payload.get("resolved") if job.release_id else None
        if job.mode == JobMode.SUGGEST:
            resolved = _resolve_unlabeled(job.protocol, item.external_id, payload, seed)
        elif isinstance(stored, dict) and stored:
            # A release froze the option orders (and ChangeIt candidates) its scores use: show exactly those.
            resolved = stored
        else:
            resolved = resolve_queries(job.protocol, item.external_id, payload, seed=seed, vocabulary=vocabulary)
        out.append(
            ItemInput(
                item_pk=item.pk,
                external_id=item.external_id,
                payload=payload,
                media_paths={f: _local_path(item, f, lookup, payload) for f in fields},
                media_hashes=dict(item.media or {}),
                resolved=resolved,
                media_info={f: info for f, kind in fields.items() if kind == "video" and (info := _video_info(item, f, assets))},
            )
        )
    return out


def _resolve_unlabeled(protocol: str, external_id: str, payload: dict, seed: int) -> dict[str, dict]:
    """Queries of an item that has no answer yet (suggestion mode)."""
    if protocol == "status":
        return {"suggest": {"options": [], "answer": None}}
    if protocol == "m3verse":
        return {"qa": {"options": list(payload.get("options") or []), "answer": None}}
    return {"qa": {"options": list(payload.get("options") or []), "answer": None, "format": payload.get("format")}}


def _judge_rubric(project: Project) -> Any:
    """The rubric human raters of this project see (its own wording over the platform default),
    so judge and humans rate against the same text."""
    custom = (project.settings or {}).get("rubric")
    if isinstance(custom, str) and custom.strip():
        return custom
    from annotation.selectors import rubric_for

    return rubric_for(project=project)


def build_queries(job: InferenceJob, item: ItemInput, media: MediaPreparer) -> list[PreparedQuery]:
    module = protocols.get_protocol(job.protocol)
    params = dict(job.params)
    if job.protocol == "oscbench" and "rubric" not in params:
        params["rubric"] = _judge_rubric(job.project)
    try:
        if job.mode == JobMode.SUGGEST and job.protocol == "status":
            return module.build_suggestion(item, media=media, params=params)
        return module.build(item, media=media, params=params)
    except MediaError as exc:
        return [PreparedQuery(key=k, query=None, options=v.get("options", []), error=str(exc)) for k, v in item.resolved.items()]
    except (KeyError, TypeError, ValueError) as exc:
        msg = f"cannot build the prompt: {type(exc).__name__}: {exc}"
        return [PreparedQuery(key=k, query=None, options=v.get("options", []), error=msg) for k, v in item.resolved.items()]


def parse_reply(job: InferenceJob, prepared: PreparedQuery, text: str) -> Any:
    if job.mode == JobMode.SUGGEST and job.protocol == "status":
        from .protocols.status import parse_suggestion

        return parse_suggestion(text)
    return parse_answer(job.protocol, prepared.key, text, prepared.options, fmt=prepared.fmt)


def _repair_json(backend, job: InferenceJob, pending: list[tuple[PreparedQuery, ModelReply]], sampling: Sampling) -> None:
    """Re-ask judges whose reply was not readable JSON, boundedly; replies are replaced in place."""
    rounds = int(job.params.get("json_retries", 2))
    for _ in range(rounds):
        todo = [
            (i, prepared, reply)
            for i, (prepared, reply) in enumerate(pending)
            if prepared.query.json_schema and not reply.error and parse_reply(job, prepared, reply.text) is None
        ]
        if not todo:
            return
        again = [
            ModelQuery(
                key=prepared.query.key,
                messages=prepared.query.messages
                + [{"role": "assistant", "content": reply.text}, {"role": "user", "content": JSON_REPAIR_PROMPT}],
                json_schema=prepared.query.json_schema,
                max_tokens=prepared.query.max_tokens,
            )
            for _, prepared, reply in todo
        ]
        replies = backend.complete(again, sampling)
        for (i, prepared, old), new, query in zip(todo, replies, again):
            new.attempts += old.attempts
            new.prompt_tokens += old.prompt_tokens
            new.completion_tokens += old.completion_tokens
            new.latency_ms += old.latency_ms
            new.extra = {**old.extra, **new.extra, "json_repairs": old.extra.get("json_repairs", 0) + 1}
            if new.error:  # the repair request itself failed: keep the unreadable reply as the answer
                continue
            # The stored prompt is the conversation that produced the stored output (repair turns included).
            pending[i] = (replace(prepared, query=query, prompt=render_prompt(query.messages)), new)


def job_run_chunk(*, job_id: int, item_ids: list[int]) -> int:
    """Run the not-yet-OK queries of these items. Returns how many predictions it wrote."""
    job = InferenceJob.objects.select_related("endpoint", "project", "release").get(pk=job_id)
    if job.status != JobStatus.RUNNING:
        return 0
    per_item_keys = None if job.mode == JobMode.SUGGEST else set(QUERY_KEYS[job.protocol])
    done_ok = set(
        Prediction.objects.filter(job=job, item_id__in=item_ids, status=PredictionStatus.OK).values_list("item_id", "query")
    )
    if per_item_keys is not None:
        item_ids = [i for i in item_ids if not per_item_keys <= {q for (it, q) in done_ok if it == i}]
    elif done_ok:
        item_ids = [i for i in item_ids if i not in {it for it, _ in done_ok}]
    if not item_ids:
        job_refresh_finished(job_id=job.pk)
        return 0
    try:
        backend = get_backend(job.endpoint)
    except BackendUnavailable as exc:
        job_fail(job=job, error=_message(exc))
        return 0

    bound = int(job.params.get("bound", DEFAULT_BOUND[0]))
    media = MediaPreparer(cache_root=settings.CACHE_ROOT, bound=(bound, bound))
    sampling = sampling_for(job.params)
    rows: list[PredictionRow] = []
    try:
        if job.params.get("strategy") == "multistage":
            from .protocols import multistage

            items = item_inputs(job, item_ids)
            rows = multistage.run(job=job, items=items, media=media, backend=backend, sampling=sampling, done_ok=done_ok)
        else:
            pending: list[tuple[PreparedQuery, int]] = []
            for item in item_inputs(job, item_ids):
                for prepared in build_queries(job, item, media):
                    if (item.item_pk, prepared.key) in done_ok:
                        continue
                    if prepared.error or prepared.query is None:
                        rows.append(
                            PredictionRow(item.item_pk, prepared.key, PredictionStatus.FAILED, error=prepared.error or "no query",
                                          options=prepared.options)
                        )
                    else:
                        pending.append((prepared, item.item_pk))
            if pending and InferenceJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING).exists():
                queries = [p.query for p, _ in pending]
                try:
                    replies = backend.complete(queries, sampling)
                    pairs = [(p, r) for (p, _), r in zip(pending, replies)]
                    _repair_json(backend, job, pairs, sampling)
                except BackendUnavailable as exc:
                    job_fail(job=job, error=_message(exc))
                    return 0
                except Exception as exc:  # the backend broke on the whole chunk: record it per query
                    log.exception("backend failed on a chunk of job %s", job.pk)
                    error = f"backend error: {type(exc).__name__}: {exc}"[:2000]
                    pairs = [(p, ModelReply(key=q.key, error=error)) for (p, _), q in zip(pending, queries)]
                for (prepared, reply), (_, item_pk) in zip(pairs, pending):
                    rows.append(row_from_reply(job, item_pk, prepared, reply))
    except BackendUnavailable as exc:  # e.g. the multistage path losing its engine
        job_fail(job=job, error=_message(exc))
        return 0
    except Exception as exc:
        # Anything else (reading an item, preparing media, a multistage step) fails this chunk's
        # unanswered queries with the reason, so the job still ends and a retry can re-ask them.
        log.exception("chunk of job %s failed", job.pk)
        error = f"chunk error: {type(exc).__name__}: {exc}"[:2000]
        have = done_ok | {(r.item_id, r.query) for r in rows}
        rows += [PredictionRow(item_id, key, PredictionStatus.FAILED, error=error)
                 for item_id in item_ids for key in _query_keys(job) if (item_id, key) not in have]
    finally:
        backend.close()  # a vLLM backend keeps its engine loaded for the next chunk
    written = predictions_upsert(job_id=job.pk, rows=rows)
    if job.mode == JobMode.SUGGEST:
        suggestions_store(job=job, rows=[r for r in rows if r.status == PredictionStatus.OK and r.answer is not None])
    return written


def row_from_reply(job: InferenceJob, item_pk: int, prepared: PreparedQuery, reply: ModelReply) -> PredictionRow:
    common = dict(
        prompt=prepared.prompt,
        options=prepared.options,
        frame_indices=prepared.frame_indices,
        attempts=reply.attempts,
        latency_ms=reply.latency_ms,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
    )
    if reply.error:
        return PredictionRow(item_pk, prepared.key, PredictionStatus.FAILED, error=reply.error, **common)
    return PredictionRow(
        item_pk,
        prepared.key,
        PredictionStatus.OK,
        raw_output=reply.text,
        answer=parse_reply(job, prepared, reply.text),
        logprobs=reply.logprobs,
        **common,
    )


_UPDATE_FIELDS = [
    "status", "error", "prompt", "options", "raw_output", "answer", "logprobs", "frame_indices",
    "attempts", "latency_ms", "prompt_tokens", "completion_tokens", "updated_at",
]


@transaction.atomic
def predictions_upsert(*, job_id: int, rows: list[PredictionRow]) -> int:
    """Insert or update predictions under the job's row lock; an OK prediction is never overwritten.

    Counters move by exact deltas computed against the rows already stored, so redelivered or
    concurrent chunks keep done/failed/token figures equal to what the table holds.
    """
    job = InferenceJob.objects.select_for_update().get(pk=job_id)
    if not rows:
        _finish_if_done(job)
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
            job_id=job_id, item_id=r.item_id, query=r.query, status=r.status, error=r.error, prompt=r.prompt,
            options=r.options, raw_output=r.raw_output, answer=r.answer, logprobs=r.logprobs,
            frame_indices=r.frame_indices, attempts=min(r.attempts, 32767), latency_ms=r.latency_ms,
            prompt_tokens=r.prompt_tokens, completion_tokens=r.completion_tokens, created_at=now, updated_at=now,
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
    _finish_if_done(job)
    return len(to_write)


def failure_summary(job: InferenceJob, *, top: int = 3) -> str:
    """The most frequent errors of the job's failed queries, e.g. "12× connection failed: ...;"."""
    rows = (
        Prediction.objects.filter(job=job, status=PredictionStatus.FAILED)
        .values("error")
        .annotate(n=Count("id"))
        .order_by("-n", "error")[:top]
    )
    return "; ".join(f"{row['n']}× {row['error']}" for row in rows)


def _finish_if_done(job: InferenceJob) -> None:
    """Every query answered or failed: the job ends FINISHED, or FAILED when not one query
    succeeded (a job with nothing to show is not a finished run), with the main errors."""
    if job.status == JobStatus.RUNNING and job.total_queries and job.done_queries + job.failed_queries >= job.total_queries:
        if job.done_queries == 0:
            job.status = JobStatus.FAILED
            job.error = f"all {job.total_queries} queries failed: {failure_summary(job)}"[:4000]
        else:
            job.status = JobStatus.FINISHED
        job.finished_at = timezone.now()
        job.save(update_fields=["status", "error", "finished_at"])
        from .signals import job_finished
        from .tasks import export_job

        job_id, project_id, release_id = job.pk, job.project_id, job.release_id
        transaction.on_commit(lambda: export_job.delay(job_id))
        if job.status == JobStatus.FINISHED:
            transaction.on_commit(lambda: job_finished.send(sender=InferenceJob, job_id=job_id, project_id=project_id,
                                                            release_id=release_id))


@transaction.atomic
def job_refresh_finished(*, job_id: int) -> None:
    _finish_if_done(InferenceJob.objects.select_for_update().get(pk=job_id))


@transaction.atomic
def job_fail(*, job: InferenceJob, error: str) -> None:
    job = InferenceJob.objects.select_for_update().get(pk=job.pk)
    if job.status in ACTIVE:
        job.status = JobStatus.FAILED
        job.error = error
        job.finished_at = timezone.now()
        job.save(update_fields=["status", "error", "finished_at"])


def _message(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        return " ".join(exc.messages)
    return str(exc)


# --- suggestions ---------------------------------------------------------------------------


def suggestion_source(job: InferenceJob) -> str:
    return f"job:{job.pk} {job.model_name}"[:200]


@transaction.atomic
def suggestions_store(*, job: InferenceJob, rows: list[PredictionRow]) -> int:
    """Machine-made answers that pre-fill the annotation form, marked as such."""
    source = suggestion_source(job)
    for r in rows:
        if job.protocol == "status":
            result = dict(r.answer)
        else:
            result = {"answer": r.answer}
        result.update({"machine": True, "job": job.pk, "model": job.model_name})
        Suggestion.objects.update_or_create(item_id=r.item_id, source=source, defaults={"result": result})
    return len(rows)


# --- re-scoring and exports ----------------------------------------------------------------


@transaction.atomic
def job_rescore(*, job: InferenceJob) -> int:
    """Re-parse every OK prediction's raw output with the current parser; returns how many changed."""
    changed = []
    for pred in Prediction.objects.filter(job=job, status=PredictionStatus.OK).select_for_update():
        fmt = None
        if job.protocol == "visualtrans":
            fmt = (pred.item.payload or {}).get("format")
        prepared = PreparedQuery(key=pred.query, query=None, options=pred.options, fmt=fmt)
        answer = parse_reply(job, prepared, pred.raw_output)
        if answer != pred.answer:
            pred.answer = answer
            changed.append(pred)
    Prediction.objects.bulk_update(changed, ["answer"])
    from .tasks import export_job

    transaction.on_commit(lambda: export_job.delay(job.pk))
    return len(changed)


def job_export_dir(job: InferenceJob) -> Path:
    return Path(settings.MEDIA_ROOT) / "exports" / "jobs" / str(job.pk)


def job_write_exports(*, job: InferenceJob, folder: Path | None = None) -> Path:
    """results.json (metrics, versions, parameters) and samples.jsonl (one line per query)."""
    from .selectors import job_results, job_samples

    folder = folder or job_export_dir(job)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "samples.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for sample in job_samples(job=job):
            fh.write(json.dumps(sample, ensure_ascii=False) + "\n")
    tmp.replace(folder / "samples.jsonl")
    (folder / "results.json").write_text(json.dumps(job_results(job=job), indent=2, ensure_ascii=False, default=str))
    return folder
