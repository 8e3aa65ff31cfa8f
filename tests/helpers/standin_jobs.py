"""Inference jobs against the local OpenAI-compatible stand-in (tests/inference/openai_standin.py),
as the openai job tests run them (tests/inference/test_openai_job_*.py): the endpoint they point at
it, with a judge timeout that a paused test process does not trip, and a finished OSCBench judge
job over its replies, laid out by item and by the stand-in's request keys."""

from __future__ import annotations

from inference import services
from inference.models import JobStatus, Prediction
from tests.inference import factories

# The judge's timeout in these tests. It bounds every phase of a request, opening the connection
# included, so a pause of this process longer than it makes a query the stand-in would answer at
# once time out and be retried; when the pause lands while a connection opens, that try counts
# although no request went out. Garbage collection and a loaded machine pause the process for
# 0.5 s and more (a clean-clone CI run: two clean queries with 2 attempts at a 0.5 s timeout; a
# 1.2 s collection seen on a busy 2-core machine), hence the margin. The stand-in's planned hang
# (timeout_sleep, 10 s) outlasts it.
TIMEOUT = 3.0


def standin_endpoint(standin, **options):
    """The stand-in as an openai endpoint ("standin-judge"), with the prices the cost checks use."""
    return services.endpoint_create(
        name="standin-judge",
        backend="openai",
        model_id="standin-1",
        base_url=standin.base_url,
        concurrency=16,
        options={
            "timeout": TIMEOUT,
            "max_retries": 2,
            "price_per_1m_input": 2.0,
            "price_per_1m_output": 8.0,
            **options,
        },
    )


def judge_run(standin, make_project, tmp_path, n: int):
    """A finished OSCBench judge job over n items (4 frames each) against the stand-in: the job,
    its items, its predictions by item id, the stand-in's requests per key (in order) and the item
    each key is (a key is one item's judge query, whose first user message quotes the item's prompt)."""
    project = make_project("osc", "oscbench", settings={"rubric": {"object": "Is it bread?"}})
    items = factories.oscbench_items(project, n, tmp_path)
    job = services.job_create(
        endpoint=standin_endpoint(standin),
        project=project,
        release=factories.release_of(project, items),
        params={"frames": 4},
    )
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED
    preds = {p.item.external_id: p for p in Prediction.objects.filter(job=job).select_related("item")}
    assert len(preds) == n
    requests: dict[str, list[dict]] = {}
    for event in sorted(standin.events, key=lambda e: (e["key"], e["attempt"])):
        requests.setdefault(event["key"], []).append(event)
    item_of = {}
    for key, asked in requests.items():
        [item_of[key]] = [i.external_id for i in items if f'"{i.payload["prompt"]}"' in asked[0]["text"]]
    assert sorted(item_of.values()) == sorted(preds)
    return job, items, preds, requests, item_of
