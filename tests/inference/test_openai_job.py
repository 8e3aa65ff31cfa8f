"""The openai backend end to end: real HTTP to a local stand-in, the real openai client, eager Celery."""
import json

import pytest

from inference import services
from inference.models import JobStatus, Prediction, PredictionStatus

from . import factories
from .openai_standin import planned_fault

pytestmark = pytest.mark.django_db(transaction=True)


def _endpoint(standin, **options):
    return services.endpoint_create(
        name="standin-judge",
        backend="openai",
        model_id="standin-1",
        base_url=standin.base_url,
        concurrency=16,
        options={"timeout": 0.5, "max_retries": 2, "price_per_1m_input": 2.0, "price_per_1m_output": 8.0, **options},
    )


def test_job_of_200_items_stores_each_prediction_once_recovers_retries_and_records_failures(
    eager, standin, make_project, make_user, tmp_path
):
    project = make_project("vt", "visualtrans")
    items = factories.visualtrans_items(project, 200, tmp_path)
    release = factories.release_of(project, items)
    endpoint = _endpoint(standin)

    job = services.job_create(endpoint=endpoint, project=project, release=release, params={"chunk_size": 25})

    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED
    assert job.total_queries == 200
    preds = list(Prediction.objects.filter(job=job))
    assert len(preds) == 200
    assert len({(p.item_id, p.query) for p in preds}) == 200

    outcomes = standin.outcomes()  # key -> what the server did with each request of that query
    assert len(outcomes) == 200
    faults = {key: planned_fault(key) for key in outcomes}
    # The rule gives every kind of fault somewhere in these 200 queries.
    assert {"429", "500", "timeout", "always500"} <= set(faults.values())
    hopeless = {k for k, f in faults.items() if f == "always500"}
    recovered = {k for k, f in faults.items() if f in ("429", "500", "timeout")}
    for key in hopeless:
        assert outcomes[key] == ["500", "500", "500"]  # 1 try + max_retries=2, then given up
    for key in recovered:
        assert outcomes[key][-1] == "ok" and len(outcomes[key]) == 2

    failed = [p for p in preds if p.status == PredictionStatus.FAILED]
    assert len(failed) == len(hopeless)
    assert job.failed_queries == len(hopeless)
    assert job.done_queries == 200 - len(hopeless)
    for p in failed:
        assert p.error.startswith("HTTP 500: internal error")
        assert p.answer is None and p.raw_output == ""

    ok = [p for p in preds if p.status == PredictionStatus.OK]
    assert all(p.answer in ("A", "B", "C", "D") and p.answer == p.raw_output for p in ok)
    assert all(set(p.logprobs) == {"A", "B", "C", "D"} and max(p.logprobs, key=p.logprobs.get) == p.answer for p in ok)
    assert sorted(p.attempts for p in ok if p.attempts > 1) == [2] * len(recovered)
    # Token usage adds up and the cost follows the endpoint's prices.
    assert job.prompt_tokens == sum(p.prompt_tokens for p in preds)
    assert job.completion_tokens == sum(p.completion_tokens for p in preds) == len(ok)
    # The stored prompt is the rendered one, images as placeholders, and has no data URL.
    assert ok[0].prompt.startswith("[user]\nImage 1 (initial state):\n<image 1>\nImage 2 (final state):\n<image 2>\n")
    assert "base64" not in ok[0].prompt


def test_rerunning_a_finished_job_writes_nothing_and_retry_failed_only_reruns_failures(eager, standin, make_project, tmp_path):
    project = make_project("vt", "visualtrans")
    items = factories.visualtrans_items(project, 60, tmp_path)
    job = services.job_create(endpoint=_endpoint(standin), project=project, release=factories.release_of(project, items))
    job.refresh_from_db()
    failed_before = job.failed_queries
    assert failed_before >= 1 and job.done_queries + failed_before == 60
    requests_before = len(standin.log)
    stamps = dict(Prediction.objects.filter(job=job, status="ok").values_list("id", "updated_at"))

    # A chunk delivered twice finds every query OK or failed-and-not-its-turn: nothing new is asked.
    assert services.job_run_chunk(job_id=job.pk, item_ids=[i.pk for i in items[:20]]) == 0

    # Retry: only the failed items are asked again (they fail again: the rule says always 500).
    assert services.job_retry_failed(job=job) == failed_before
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED
    assert len(standin.log) - requests_before == 3 * failed_before
    assert Prediction.objects.filter(job=job).count() == 60
    assert job.failed_queries == failed_before and job.done_queries == 60 - failed_before
    assert dict(Prediction.objects.filter(job=job, status="ok").values_list("id", "updated_at")) == stamps


def test_judge_json_is_repaired_by_asking_again(eager, standin, make_project, tmp_path):
    project = make_project("osc", "oscbench", settings={"rubric": {"object": "Is it bread?"}})
    items = factories.oscbench_items(project, 40, tmp_path)
    job = services.job_create(
        endpoint=_endpoint(standin), project=project, release=factories.release_of(project, items), params={"frames": 4}
    )
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED
    preds = {p.item.external_id: p for p in Prediction.objects.filter(job=job).select_related("item")}
    assert len(preds) == 40
    outcomes = standin.outcomes()
    bad = [k for k, o in outcomes.items() if o[0] == "badjson"]
    assert bad, "the rule puts at least one malformed reply in 40 judge queries"
    for key in bad:
        assert outcomes[key] == ["badjson", "ok"]
    for p in preds.values():
        if p.status == PredictionStatus.OK:
            assert set(p.answer) == {"subject", "object", "action", "osc_accuracy", "osc_consistency", "scene", "realism", "aesthetics"}
            assert json.loads(p.raw_output)["evidence"]
            assert p.frame_indices == {"video": [1, 3, 6, 8]}
            assert "- object: Is it bread?" in p.prompt and p.prompt.count("<image") == 4
    repaired = [p for p in preds.values() if p.status == "ok" and p.attempts >= 2]
    assert len(repaired) >= len(bad)


def test_api_key_comes_from_the_environment_and_is_never_stored(eager, standin, make_project, tmp_path, monkeypatch):
    project = make_project("vt", "visualtrans")
    items = factories.visualtrans_items(project, 3, tmp_path)
    endpoint = services.endpoint_create(name="keyed", backend="openai", model_id="m", base_url=standin.base_url,
                                        api_key_env="STANDIN_KEY", options={"timeout": 0.5, "max_retries": 2})
    job = services.job_create(endpoint=endpoint, project=project, release=factories.release_of(project, items))
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.error == "the API key variable STANDIN_KEY named by endpoint keyed is not set"
    assert Prediction.objects.filter(job=job).count() == 0

    monkeypatch.setenv("STANDIN_KEY", "sk-secret-123")
    job2 = services.job_create(endpoint=endpoint, project=project, release=factories.release_of(project, items, "v2"))
    job2.refresh_from_db()
    assert job2.status == JobStatus.FINISHED
    from django.db import connection

    with connection.cursor() as cur:
        for table in ("inference_modelendpoint", "inference_inferencejob", "inference_prediction"):
            cur.execute(f"SELECT * FROM {table}")
            assert "sk-secret-123" not in json.dumps(cur.fetchall(), default=str)
