"""Reads for evaluation: release items, predictions of a job, annotations. No writes.

A board's two large inputs, its items and each model's predictions, are read through server-side
cursors as plain rows (never as ORM objects): the columns scoring needs and nothing else, each
JSON value decoded once, repeated values (query names, answer letters, option lists) shared.
"""

from __future__ import annotations

import functools
import gc
import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from django.db import connection
from django.db.models import F, QuerySet

from annotation.models import Annotation, Item, ItemStatus, Project, Release, Review, ReviewDecision
from annotation.protocols import resolve_queries
from inference.models import InferenceJob, JobMode, JobStatus, PredictionStatus
from protocols import registry

from .scoring.answer_sets import ModelAnswer, ScoringItem

ROWS_PER_FETCH = 20_000
SHARED_VALUES_MAX = 100_000  # distinct JSON texts kept for sharing their decoded value, per read

Reader = TypeVar("Reader", bound=Callable[..., Any])


def collector_paused(reader: Reader) -> Reader:
    """Run ``reader`` with Python's cyclic garbage collector paused. A reader builds millions of
    dicts, lists and records that make no reference cycles; left on, the collector would rescan
    the whole growing heap again and again (more than half of a large read's time)."""

    @functools.wraps(reader)
    def paused(*args: Any, **kwargs: Any) -> Any:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return reader(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return paused  # type: ignore[return-value]


def release_for(project: Project, version: str | None = None) -> Release | None:
    """The named release, or the project's newest one; None when the project has none."""
    releases = Release.objects.filter(project=project)
    if version is not None:
        return releases.get(version=version)
    return releases.order_by("-created_at", "-pk").first()


def _chunks(sql: str, params: list[Any]) -> Iterator[list[tuple]]:
    """The rows of ``sql`` through a server-side cursor, ``ROWS_PER_FETCH`` at a time, decoded by
    the driver into tuples of plain values (no model instances, no per-row Python in between)."""
    with connection.chunked_cursor() as cursor:
        cursor.execute(sql, params)
        while rows := cursor.fetchmany(ROWS_PER_FETCH):
            yield rows


def _decoded(texts: list[str | None]) -> list[Any]:
    """Each JSON text decoded (None for None), in one call of the decoder for the whole list: the
    same values as one ``json.loads`` per text, without its per-call cost."""
    return json.loads("[" + ",".join(["null" if t is None else t for t in texts]) + "]")


@collector_paused
def scoring_items(project: Project, release: Release | None) -> list[ScoringItem]:
    """Items with their resolved option orders, in release order (or verified items by id): the
    same items a job answers (inference.selectors.job_items), as scoring's plain records."""
    protocol = project.protocol
    out: list[ScoringItem] = []
    if release is not None:
        chunks = _chunks(
            "SELECT ri.item_id, i.external_id, ri.payload::text FROM annotation_releaseitem ri"
            " JOIN annotation_item i ON i.id = ri.item_id WHERE ri.release_id = %s ORDER BY ri.position",
            [release.pk],
        )
        for rows in chunks:
            for (key, external_id, _), payload in zip(rows, _decoded([r[2] for r in rows]), strict=True):
                resolved = payload.pop("resolved", None)
                payload.pop("id", None)
                if resolved is None:
                    resolved = resolve_queries(protocol, external_id, payload, seed=release.option_seed)
                out.append(ScoringItem(key=key, external_id=external_id, payload=payload, resolved=resolved))
        return out
    chunks = _chunks(
        "SELECT id, external_id, payload::text FROM annotation_item WHERE project_id = %s AND status = %s ORDER BY id",
        [project.pk, str(ItemStatus.VERIFIED)],
    )
    for rows in chunks:
        out.extend(
            ScoringItem(key=key, external_id=external_id, payload=payload, resolved={})
            for (key, external_id, _), payload in zip(rows, _decoded([r[2] for r in rows]), strict=True)
        )
    # The vocabulary (a protocol's options drawn from all items) needs every payload first.
    vocab = registry.get(protocol).vocabulary([it.payload for it in out])
    for it in out:
        it.resolved = resolve_queries(protocol, it.external_id, it.payload, seed=project.option_seed, vocabulary=vocab)
    return out


def latest_finished_jobs(project: Project, release: Release | None) -> list[InferenceJob]:
    """Per model name (endpoint name or imported name), its finished job on the release that finished last."""
    jobs = (
        InferenceJob.objects.filter(
            project=project,
            release=release,
            status=JobStatus.FINISHED,
            mode__in=[JobMode.EVALUATE, JobMode.IMPORTED],
        )
        .select_related("endpoint")
        # Latest = finished last (a job re-run after a newer one was created is the newer result).
        .order_by(F("finished_at").desc(nulls_last=True), "-pk")
    )
    seen: dict[str, InferenceJob] = {}
    for job in jobs:
        name = job.endpoint.name if job.endpoint_id else job.model_name
        seen.setdefault(name, job)
    return sorted(seen.values(), key=lambda j: j.endpoint.name if j.endpoint_id else j.model_name)


def job_name(job: InferenceJob) -> str:
    return job.endpoint.name if job.endpoint_id else job.model_name


@collector_paused
def job_answers(job: InferenceJob) -> dict[tuple, ModelAnswer]:
    """(item pk, query) -> ModelAnswer; failed predictions carry value None.

    Equal query names, string answers and seen option lists are one shared object each (scoring
    only reads a ModelAnswer): a million-item board holds a few distinct ones per item, not one
    per prediction."""
    seen_lists: dict[str, list | None] = {}  # option list JSON -> its decoded list (None: empty)
    strings: dict[str, str] = {}
    ok = str(PredictionStatus.OK)
    out: dict[tuple, ModelAnswer] = {}
    chunks = _chunks(
        "SELECT item_id, query, status, answer::text, options::text, logprobs::text"
        " FROM inference_prediction WHERE job_id = %s",
        [job.pk],
    )
    for rows in chunks:
        answers = _decoded([answer if status == ok else None for _, _, status, answer, _, _ in rows])
        logprobs = _decoded([r[5] for r in rows])
        new = list({r[4] for r in rows if r[4] not in seen_lists})
        if len(seen_lists) + len(new) > SHARED_VALUES_MAX:
            seen_lists.clear()
            new = list({r[4] for r in rows})
        seen_lists.update(zip(new, [v or None for v in _decoded(new)], strict=True))
        for row, value, lp in zip(rows, answers, logprobs, strict=True):
            if type(value) is str:
                value = strings.setdefault(value, value)  # immutable: shared; lists and dicts are not
            query = row[1]
            out[(row[0], strings.setdefault(query, query))] = ModelAnswer(value, seen_lists[row[4]], lp)
        if len(strings) > SHARED_VALUES_MAX:
            strings.clear()
    return out


def annotations_for(items: list[ScoringItem]) -> QuerySet[Annotation]:
    return Annotation.objects.filter(item_id__in=[it.key for it in items]).order_by("item_id", "id")


def rater_key(annotation_row: dict[str, Any]) -> str:
    if annotation_row["annotator_id"] is not None:
        return f"user:{annotation_row['annotator_id']}"
    return f"ext:{annotation_row['external_rater']}"


def blind_answers(items: list[ScoringItem]) -> tuple[dict[int, list[Any]], int]:
    """item pk -> the blind answers given (QA workflows), and how many answers were left out
    because a model suggestion was on the form when they were given (not blind)."""
    out: dict[int, list[Any]] = defaultdict(list)
    with_suggestion = 0
    for row in annotations_for(items).values("item_id", "result", "with_suggestion"):
        if row["with_suggestion"]:
            with_suggestion += 1
            continue
        result = row["result"] or {}
        out[row["item_id"]].append(result.get("answer"))
    return dict(out), with_suggestion


def ratings_by_item(items: list[ScoringItem]) -> dict[int, list[tuple[str, dict]]]:
    """item pk -> [(rater key, {criterion: score | None})] (rating workflow)."""
    out: dict[int, list[tuple[str, dict]]] = defaultdict(list)
    for row in annotations_for(items).values("item_id", "result", "annotator_id", "external_rater"):
        scores = (row["result"] or {}).get("scores")
        if isinstance(scores, dict):
            out[row["item_id"]].append((rater_key(row), scores))
    return dict(out)


def adjudicated_ratings(items: list[ScoringItem]) -> dict[int, dict]:
    """item pk -> {criterion: score | None} a reviewer settled by editing the ratings (the item's
    latest edit review). Ratings never enter the item's payload, so the review is their record."""
    out: dict[int, dict] = {}
    rows = (
        Review.objects.filter(item_id__in=[it.key for it in items], decision=ReviewDecision.EDIT)
        .order_by("item_id", "created_at", "pk")
        .values_list("item_id", "result")
    )
    for item_id, result in rows.iterator(chunk_size=5000):
        scores = (result or {}).get("scores")
        if isinstance(scores, dict):
            out[item_id] = scores
    return out


def consensus_ratings(items: list[ScoringItem], ratings: dict[int, list[tuple[str, dict]]]) -> dict[int, list[dict]]:
    """item pk -> the score dicts whose mean is the item's Human score: the adjudicated scores
    alone where a reviewer edited the ratings, else every rater's (``ratings``, from
    ratings_by_item). Per-rater statistics (agreement, leave-one-rater-out) keep the raw ratings."""
    out = {key: [scores for _, scores in entries] for key, entries in ratings.items()}
    out.update({key: [scores] for key, scores in adjudicated_ratings(items).items()})
    return out


def judge_jobs(project: Project, release: Release | None, name: str | None = None) -> list[InferenceJob]:
    jobs = latest_finished_jobs(project, release)
    if name is not None:
        jobs = [j for j in jobs if job_name(j) == name]
    return jobs


def data_fingerprint(project: Project, release_version: str | None) -> str:
    """Changes whenever a finished job, a prediction import or an annotation changes what a board shows."""
    from django.db.models import Count, Max

    jobs = InferenceJob.objects.filter(project=project, status=JobStatus.FINISHED).aggregate(
        n=Count("id"), last=Max("id"), fin=Max("finished_at")
    )
    anns = Annotation.objects.filter(item__project=project).aggregate(n=Count("id"), last=Max("id"))
    rel = Release.objects.filter(project=project).aggregate(n=Count("id"), last=Max("id"))
    # A live board scores the verified items: a verification or a discard changes it.
    live = (
        Item.objects.filter(project=project, status=ItemStatus.VERIFIED).aggregate(n=Count("id"), last=Max("id"))
        if release_version is None
        else None
    )
    # created_at: ids restart when a database is recreated (a test run, a restore); the cache may outlive it.
    return (
        f"{project.pk}:{project.created_at.isoformat()}:{release_version}:{jobs}:{anns}:{rel}:{live}:"
        f"{project.option_seed}"
    )


def vote_items(project: Project, release: Release | None) -> list[ScoringItem]:
    """The items whose human votes make a votes board (``Protocol.board == "votes"``): the
    release's, or without one every item with its annotations in (verified or annotated): votes
    differing is what a pairwise study measures, so an item need not wait for a reviewer."""
    if release is not None:
        return scoring_items(project, release)
    rows = (
        Item.objects.filter(project=project, status__in=[ItemStatus.VERIFIED, ItemStatus.ANNOTATED], is_gold=False)
        .order_by("pk")
        .values_list("pk", "external_id", "payload")
    )
    return [ScoringItem(key=pk, external_id=ext, payload=payload or {}, resolved={}) for pk, ext, payload in rows]


def votes_by_item(items: list[ScoringItem]) -> dict[int, list[tuple[str, dict]]]:
    """item pk -> [(rater key, stored answer)] of every annotation of the items."""
    out: dict[int, list[tuple[str, dict]]] = defaultdict(list)
    for row in annotations_for(items).values("item_id", "result", "annotator_id", "external_rater"):
        out[row["item_id"]].append((rater_key(row), row["result"] or {}))
    return dict(out)
