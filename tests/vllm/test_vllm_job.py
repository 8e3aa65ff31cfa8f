"""A STATUS job through the production path (services, Celery tasks in eager mode, backend
registry) on a `vllm` endpoint that points at the tiny model, against PostgreSQL."""

from __future__ import annotations

import math

import pytest

from inference import services
from inference.backends.vllm_backend import engine_stats
from inference.models import JobStatus, Prediction, PredictionStatus
from tests.inference import factories

pytestmark = [pytest.mark.vllm, pytest.mark.django_db(transaction=True)]

ALLOWED = {"osi_a": "AB", "osi_b": "AB", "ir_a": "AB", "ir_b": "AB", "sci2": "AB", "sci4": "ABCD"}


def _outputs(job) -> dict[tuple[int, str], tuple[str, int, int]]:
    return {
        (p.item_id, p.query): (p.raw_output, p.prompt_tokens, p.completion_tokens)
        for p in Prediction.objects.filter(job=job)
    }


def test_status_job_on_the_vllm_endpoint_stores_valid_predictions_and_reruns_identically(
    eager, vllm_backend, tiny_model_dir, tiny_options, make_project, tmp_path
):
    vllm_backend.llm  # the session's engine is up before counting starts
    starts = engine_stats()["starts"]
    project = make_project("status-vllm", "status")
    items = factories.status_items(project, 5, tmp_path)
    release = factories.release_of(project, items)
    endpoint = services.endpoint_create(
        name="tiny-qwen2-vl", backend="vllm", model_id=str(tiny_model_dir), options=dict(tiny_options)
    )

    job = services.job_create(endpoint=endpoint, project=project, release=release, params={"chunk_size": 2, "seed": 0})
    rerun = services.job_create(
        endpoint=endpoint, project=project, release=release, params={"chunk_size": 3, "seed": 0}
    )

    job.refresh_from_db()
    rerun.refresh_from_db()
    assert (job.status, job.error) == (JobStatus.FINISHED, "")
    assert (job.total_queries, job.done_queries, job.failed_queries) == (30, 30, 0)
    predictions = list(Prediction.objects.filter(job=job))
    assert len({(p.item_id, p.query) for p in predictions}) == len(predictions) == 30
    for p in predictions:
        allowed = set(ALLOWED[p.query])
        assert p.status == PredictionStatus.OK
        assert p.raw_output in allowed and p.answer == p.raw_output
        assert set(p.logprobs) == allowed and all(math.isfinite(v) for v in p.logprobs.values())
        assert max(p.logprobs, key=p.logprobs.get) == p.answer
        assert p.completion_tokens == 2 and p.prompt_tokens > 0
        assert "base64" not in p.prompt
    assert job.prompt_tokens == sum(p.prompt_tokens for p in predictions)
    assert job.completion_tokens == 60
    # Five chunks over two jobs, one engine: loaded before, kept for every chunk.
    assert engine_stats()["starts"] == starts
    # Same release, same seed, other chunking: the same tokens for every (item, query).
    assert rerun.status == JobStatus.FINISHED
    assert _outputs(rerun) == _outputs(job)
