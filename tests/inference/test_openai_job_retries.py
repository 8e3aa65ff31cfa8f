"""The openai backend end to end on a VisualTrans job: real HTTP to the local stand-in
(tests/inference/openai_standin.py), the real openai client, eager Celery. The stand-in's planned
faults (429 with Retry-After, 500s, timeouts, cut JSON, non-JSON bodies) are retried as the
endpoint's max_retries allows, Retry-After honoured; what never recovers is recorded as failed with
its reason, each prediction is stored once, and the tokens, the cost and the export add up. A rerun
of a finished job asks nothing, and a retry of the failures asks only for them."""

import json
from collections import Counter

import pytest

from inference import services
from inference.models import JobStatus, Prediction, PredictionStatus
from tests.helpers.standin_jobs import standin_endpoint as _endpoint

from . import factories
from .openai_standin import planned_fault

pytestmark = pytest.mark.django_db(transaction=True)


def test_job_of_200_items_stores_each_prediction_once_recovers_retries_and_records_failures(
    eager, standin, make_project, make_user, tmp_path
):
    # Longer than the client's own first backoff (0.375-0.5 s): a wait this long shows the
    # client read the header.
    standin.retry_after = 1.0
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
    assert {"429", "500", "timeout", "always500", "badjson", "badbody", "alwaysbadbody"} <= set(faults.values())
    hopeless = {k for k, f in faults.items() if f in ("always500", "alwaysbadbody")}
    recovered = {k for k, f in faults.items() if f in ("429", "500", "timeout", "badbody")}
    unreadable = {k for k, f in faults.items() if f == "badjson"}  # a letter was asked, cut JSON came back
    for key in hopeless:
        expected = "500" if faults[key] == "always500" else "badbody"
        assert outcomes[key] == [expected] * 3  # 1 try + max_retries=2, then given up
    for key in recovered:
        assert outcomes[key] == [faults[key], "ok"]
    for key in unreadable:
        assert outcomes[key] == ["badjson"]  # a well-formed reply: nothing to retry
    for key in set(outcomes) - hopeless - recovered - unreadable:
        assert outcomes[key] == ["ok"]

    # retry-after is honoured: the second request of a rate-limited query came at least the
    # advertised delay after the 429 went out.
    by_key: dict[str, list[dict]] = {}
    for event in standin.events:
        by_key.setdefault(event["key"], []).append(event)
    limited = [k for k, f in faults.items() if f == "429"]
    assert limited
    for key in limited:
        first, second = sorted(by_key[key], key=lambda e: e["attempt"])
        assert first["outcome"] == "429"
        assert second["received"] - first["replied"] >= 0.95 * standin.retry_after, (
            key,
            second["received"] - first["replied"],
        )

    failed = [p for p in preds if p.status == PredictionStatus.FAILED]
    assert len(failed) == len(hopeless)
    assert job.failed_queries == len(hopeless)
    assert job.done_queries == 200 - len(hopeless)
    for p in failed:
        assert p.error == "HTTP 500: internal error (after 3 attempts)" or p.error.startswith(
            "bad response: the body is not JSON: '<html><body>502 Bad Gateway"
        )
        assert p.error.endswith("(after 3 attempts)") and p.attempts == 3
        assert p.answer is None and p.raw_output == ""
    assert sum(p.error.startswith("bad response: the body is not JSON") for p in failed) == sum(
        faults[k] == "alwaysbadbody" for k in hopeless
    )

    ok = [p for p in preds if p.status == PredictionStatus.OK]
    parsed = [p for p in ok if p.answer is not None]
    garbled = [p for p in ok if p.answer is None]
    assert len(garbled) == len(unreadable)
    assert all(p.raw_output.startswith('{"answer": "') for p in garbled)  # stored as given, never guessed
    assert all(p.answer in ("A", "B", "C", "D") and p.answer == p.raw_output for p in parsed)
    assert all(
        set(p.logprobs) == {"A", "B", "C", "D"} and max(p.logprobs, key=p.logprobs.get) == p.answer for p in parsed
    )
    # The client's own count is exact too: 1 try for a clean or unreadable reply, 2 for a recovered
    # one (its one fault, then "ok"). A try counts even when its request never went out (a
    # connection that timed out), so this also shows that no try was lost before the stand-in.
    assert Counter(p.attempts for p in ok) == {1: len(ok) - len(recovered), 2: len(recovered)}
    # Token usage adds up and the cost follows the endpoint's prices.
    assert job.prompt_tokens == sum(p.prompt_tokens for p in preds)
    assert job.completion_tokens == sum(p.completion_tokens for p in preds)
    # The stored prompt is the rendered one, images as placeholders, and has no data URL.
    assert parsed[0].prompt.startswith(
        "[user]\nImage 1 (initial state):\n<image 1>\nImage 2 (final state):\n<image 2>\n"
    )
    assert "base64" not in parsed[0].prompt
    # The export counts the unreadable replies as parse failures and the hopeless ones as failed.
    results = json.loads((services.job_export_dir(job) / "results.json").read_text())
    assert (results["counts"]["ok"], results["counts"]["failed"], results["counts"]["parse_failures"]) == (
        len(ok),
        len(hopeless),
        len(unreadable),
    )


def test_rerunning_a_finished_job_writes_nothing_and_retry_failed_only_reruns_failures(
    eager, standin, make_project, tmp_path
):
    project = make_project("vt", "visualtrans")
    items = factories.visualtrans_items(project, 60, tmp_path)
    job = services.job_create(
        endpoint=_endpoint(standin), project=project, release=factories.release_of(project, items)
    )
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
