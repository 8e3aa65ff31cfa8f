"""Running one chunk of a job: load the items, skip the queries that already have an OK
prediction, ask the backend (the direct strategy: every query of every item in one batched call,
unreadable JSON re-asked boundedly; another strategy, such as multistage: its stages in the
protocol's module of that name, Protocol.strategy), turn each reply into a PredictionRow and upsert them.

A crashed worker, a redelivered chunk, a retry or a re-run fills gaps and never duplicates: the
upsert under the job's row lock (predictions.py) keeps one prediction per (job, item, query).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from django.db.models import F

from protocols.kit.prompting import PreparedQuery, render_prompt

from ..backends import BackendUnavailable, get_backend
from ..backends.base import ModelQuery, ModelReply, Sampling
from ..models import InferenceJob, JobMode, JobStatus, Prediction, PredictionStatus
from ..prompting import strategy as protocol_strategy
from .frames import job_media, job_prepares_frames
from .inputs import build_queries, item_inputs, parse_reply, unreadable_json_error
from .jobs import error_message, job_fail, job_query_keys, job_refresh_finished
from .predictions import PredictionRow, predictions_upsert
from .suggestions import suggestions_store

log = logging.getLogger(__name__)

JSON_REPAIR_PROMPT = (
    "That reply could not be read as the JSON object that was asked for. "
    "Reply again with only the JSON object, following the requested form exactly."
)


def sampling_for(params: dict[str, Any]) -> Sampling:
    return Sampling(
        temperature=float(params.get("temperature", 0.0)),
        top_p=float(params.get("top_p", 1.0)),
        max_tokens=params.get("max_tokens"),
        seed=params.get("seed"),
        logprobs=params.get("logprobs", 5),
    )


def _repair_json(
    backend, job: InferenceJob, pending: list[tuple[PreparedQuery, ModelReply]], sampling: Sampling
) -> None:
    """Re-ask JSON-schema queries whose reply could not be read, up to `json_retries` rounds
    (default 2); replies are replaced in place.

    Every repair request is accounted to the reply that is stored, whether it succeeded or not:
    its tries, tokens and time add to the stored reply's, and extra["json_repairs"] counts the
    repair requests sent. A repair request that failed (after the backend's own retries) ends the
    repair of that query: the unreadable reply stays the answer, its failure kept in
    extra["json_repair_error"] for the stored reason (row_from_reply)."""
    rounds = int(job.params.get("json_retries", 2))
    given_up: set[int] = set()
    for _ in range(rounds):
        todo = [
            (i, prepared, reply)
            for i, (prepared, reply) in enumerate(pending)
            if i not in given_up
            and prepared.query.json_schema
            and not reply.error
            and parse_reply(job, prepared, reply.text) is None
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
            repairs = old.extra.get("json_repairs", 0) + 1
            if new.error:  # keep the unreadable reply as the answer, with what the failed request cost
                _add_costs(old, new)
                old.extra = {**old.extra, "json_repairs": repairs, "json_repair_error": new.error}
                given_up.add(i)
                continue
            _add_costs(new, old)
            new.extra = {**old.extra, **new.extra, "json_repairs": repairs}
            # The stored prompt is the conversation that produced the stored output (repair turns included).
            pending[i] = (replace(prepared, query=query, prompt=render_prompt(query.messages)), new)


def _add_costs(reply: ModelReply, other: ModelReply) -> None:
    """Count another request of the same query (a repair, or the reply it repaired) into reply."""
    reply.attempts += other.attempts
    reply.prompt_tokens += other.prompt_tokens
    reply.completion_tokens += other.completion_tokens
    reply.latency_ms += other.latency_ms


def job_run_chunk(*, job_id: int, item_ids: list[int]) -> int:
    """Run the not-yet-OK queries of these items. Returns how many predictions it wrote."""
    job = InferenceJob.objects.select_related("endpoint", "project", "release").get(pk=job_id)
    if job.status != JobStatus.RUNNING:
        return 0
    keys = job_query_keys(job)
    done_ok = set(
        Prediction.objects.filter(job=job, item_id__in=item_ids, status=PredictionStatus.OK).values_list(
            "item_id", "query"
        )
    )
    item_ids = [i for i in item_ids if any((i, key) not in done_ok for key in keys)]
    if not item_ids:
        job_refresh_finished(job_id=job.pk)
        return 0
    try:
        backend = get_backend(job.endpoint)
    except BackendUnavailable as exc:
        job_fail(job=job, error=error_message(exc))
        return 0

    media = job_media(job)  # the same bound and frames mode as the frame preparation (frames.py)
    sampling = sampling_for(job.params)
    rows: list[PredictionRow] = []
    cached = 0  # answers the backend served from its response cache (backends/response_cache.py)
    try:
        if job.params.get("strategy") not in (None, "", "direct"):
            items = item_inputs(job, item_ids)
            run_strategy = protocol_strategy(job.protocol, job.params["strategy"]).run
            answered = run_strategy(
                params=job.params, items=items, media=media, backend=backend, sampling=sampling, done_ok=done_ok
            )
            rows = [row_from_reply(job, item_pk, prepared, reply) for item_pk, prepared, reply in answered]
        else:
            pending: list[tuple[PreparedQuery, int]] = []
            for item in item_inputs(job, item_ids):
                for prepared in build_queries(job, item, media):
                    if (item.item_pk, prepared.key) in done_ok:
                        continue
                    if prepared.error or prepared.query is None:
                        rows.append(
                            PredictionRow(
                                item.item_pk,
                                prepared.key,
                                PredictionStatus.FAILED,
                                error=prepared.error or "no query",
                                options=prepared.options,
                            )
                        )
                    else:
                        pending.append((prepared, item.item_pk))
            if pending and InferenceJob.objects.filter(pk=job.pk, status=JobStatus.RUNNING).exists():
                queries = [p.query for p, _ in pending]
                try:
                    replies = backend.complete(queries, sampling)
                    cached += sum(1 for r in replies if r.extra.get("cached"))
                    pairs = [(p, r) for (p, _), r in zip(pending, replies)]
                    _repair_json(backend, job, pairs, sampling)
                except BackendUnavailable as exc:
                    job_fail(job=job, error=error_message(exc))
                    return 0
                except Exception as exc:  # the backend broke on the whole chunk: record it per query
                    log.exception("backend failed on a chunk of job %s", job.pk)
                    error = f"backend error: {type(exc).__name__}: {exc}"[:2000]
                    pairs = [(p, ModelReply(key=q.key, error=error)) for (p, _), q in zip(pending, queries)]
                for (prepared, reply), (_, item_pk) in zip(pairs, pending):
                    rows.append(row_from_reply(job, item_pk, prepared, reply))
    except BackendUnavailable as exc:  # e.g. the multistage path losing its engine
        job_fail(job=job, error=error_message(exc))
        return 0
    except Exception as exc:
        # Anything else (reading an item, preparing media, a multistage step) fails this chunk's
        # unanswered queries with the reason, so the job still ends and a retry can re-ask them.
        log.exception("chunk of job %s failed", job.pk)
        error = f"chunk error: {type(exc).__name__}: {exc}"[:2000]
        have = done_ok | {(r.item_id, r.query) for r in rows}
        rows += [
            PredictionRow(item_id, key, PredictionStatus.FAILED, error=error)
            for item_id in item_ids
            for key in keys
            if (item_id, key) not in have
        ]
    finally:
        backend.close()  # a vLLM backend keeps its engine loaded for the next chunk
        if media.videos_decoded and job_prepares_frames(job):
            log.warning(
                "job %s: %d video(s) of this chunk had no prepared frames; decoded them here, on the %s worker",
                job.pk,
                media.videos_decoded,
                job.endpoint.backend,
            )
    written = predictions_upsert(job_id=job.pk, rows=rows)
    if cached:
        InferenceJob.objects.filter(pk=job.pk).update(cached_answers=F("cached_answers") + cached)
    if job.mode == JobMode.SUGGEST:
        suggestions_store(job=job, rows=[r for r in rows if r.status == PredictionStatus.OK and r.answer is not None])
    return written


def row_from_reply(job: InferenceJob, item_pk: int, prepared: PreparedQuery, reply: ModelReply) -> PredictionRow:
    """The prediction a reply makes: failed with its error (also a query that was never asked, as
    when a multistage stage failed), else OK with the parsed answer; a JSON-schema reply that
    stayed unreadable is OK with a null answer and the reason (unreadable_json_error)."""
    common = dict(
        prompt=prepared.prompt,
        options=prepared.options,
        frame_indices=prepared.frame_indices,
        attempts=reply.attempts,
        json_repairs=int(reply.extra.get("json_repairs", 0)),
        latency_ms=reply.latency_ms,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
    )
    if reply.error or prepared.query is None:
        return PredictionRow(
            item_pk, prepared.key, PredictionStatus.FAILED, error=reply.error or prepared.error or "", **common
        )
    answer = parse_reply(job, prepared, reply.text)
    error = ""
    if answer is None and prepared.query.json_schema:
        error = unreadable_json_error(prepared.key, common["json_repairs"], reply.extra.get("json_repair_error"))
    return PredictionRow(
        item_pk,
        prepared.key,
        PredictionStatus.OK,
        error=error,
        raw_output=reply.text,
        answer=answer,
        logprobs=reply.logprobs,
        **common,
    )
