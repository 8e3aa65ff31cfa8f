"""Jobs through the whole pipeline with the seeded Random backend (eager Celery)."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from annotation.models import ItemStatus, Suggestion
from background.models import RunStatus
from inference import services
from inference.models import BackgroundRun, InferenceJob, JobStatus, ModelEndpoint, Prediction
from inference.services import chunks, runs

from . import factories

pytestmark = pytest.mark.django_db(transaction=True)


def _random(name="Random", seed=0):
    return services.endpoint_create(name=name, backend="random", options={"seed": seed})


def test_random_status_job_six_queries_per_item_deterministic_and_exported(eager, make_project, tmp_path, settings):
    project = make_project("st", "status")
    items = factories.status_items(project, 12, tmp_path)
    release = factories.release_of(project, items)
    job = services.job_create(endpoint=_random(), project=project, release=release, params={"chunk_size": 5})
    job.refresh_from_db()
    assert (job.status, job.total_queries, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, 72, 72, 0)
    assert job.prompt_version == "status-v1"
    answers = dict(((p.item_id, p.query), p.answer) for p in Prediction.objects.filter(job=job))
    assert len(answers) == 72 and set(answers.values()) <= {"A", "B", "C", "D"}

    again = services.job_create(endpoint=ModelEndpoint.objects.get(name="Random"), project=project, release=release)
    assert dict(((p.item_id, p.query), p.answer) for p in Prediction.objects.filter(job=again)) == answers

    folder = services.job_export_dir(job)
    results = json.loads((folder / "results.json").read_text())
    assert results["counts"]["queries"] == 72 and results["counts"]["ok"] == 72
    assert results["counts"]["by_query"]["sci4"] == {"ok": 12, "failed": 0, "parse_failures": 0}
    assert results["versions"]["prompt_version"] == "status-v1" and results["versions"]["release"] == "v1"
    assert results["parameters"] == {"chunk_size": 5}
    # Metrics come from the evaluation app's scoring: a leaderboard row for this model.
    assert (results["metrics"]["model"], results["metrics"]["n"], results["metrics"]["parse_failures"]) == (
        "Random",
        12,
        0,
    )
    from evaluation.scoring import answer_sets

    assert set(results["metrics"]["metrics"]) == set(answer_sets.main_keys("status"))
    lines = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    assert len(lines) == 72
    first = lines[0]
    assert first["item"] == "s0000" and first["query"] in {"osi_a", "osi_b", "ir_a", "ir_b", "sci2", "sci4"}
    assert first["prompt"].startswith("[user]\n") and first["raw_output"] == first["answer"]


def test_a_finished_job_sends_the_follow_up_tasks_settings_name_and_a_failed_send_is_only_logged(
    eager, make_project, tmp_path, settings, monkeypatch, caplog
):
    settings.STATELAB_JOB_FINISHED_TASKS = ["follow.broken", "follow.up"]
    sent = []

    def record(task_name, *args, queue=None, tracked_run=None):
        if task_name.startswith("follow."):
            sent.append((task_name, args))
        if task_name == "follow.broken":
            raise ConnectionError("broker down")
        if not task_name.startswith("follow."):
            real_enqueue(task_name, *args, queue=queue, tracked_run=tracked_run)

    real_enqueue = runs.enqueue
    monkeypatch.setattr(runs, "enqueue", record)
    project = make_project("st", "status")
    items = factories.status_items(project, 2, tmp_path)
    release = factories.release_of(project, items)
    job = services.job_create(endpoint=_random(), project=project, release=release)
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED
    assert sent == [("follow.broken", (project.pk, release.pk)), ("follow.up", (project.pk, release.pk))]
    assert f"could not queue follow.broken for job {job.pk}" in caplog.text
    # Each follow-up is a tracked run: the one that could not be sent failed with the reason.
    broken = BackgroundRun.objects.get(job=job, celery_task="follow.broken")
    assert broken.status == RunStatus.FAILED and broken.reason == "could not be queued: ConnectionError: broker down"


def test_unreadable_video_fails_that_item_only(eager, make_project, tmp_path):
    project = make_project("osc", "oscbench")
    items = factories.oscbench_items(project, 3, tmp_path)
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"\x00not a video" * 100)
    bad = factories.asset(broken, "video")
    items[1].media = {"video": bad.sha256}
    items[1].save()
    job = services.job_create(
        endpoint=_random(), project=project, release=factories.release_of(project, items), params={"frames": 3}
    )
    job.refresh_from_db()
    assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, 2, 1)
    failed = Prediction.objects.get(job=job, status="failed")
    assert failed.item_id == items[1].pk
    assert failed.error.startswith("ffmpeg cannot read video ") and failed.answer is None and failed.raw_output == ""


def test_vllm_job_refuses_to_start_without_vllm(eager, make_project, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    project = make_project("st", "status")
    items = factories.status_items(project, 2, tmp_path)
    endpoint = services.endpoint_create(name="qwen", backend="vllm", model_id="Qwen/Qwen2-VL-2B-Instruct")
    job = services.job_create(endpoint=endpoint, project=project, release=factories.release_of(project, items))
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.error.startswith("vLLM is not installed in this environment")
    assert job.total_queries == 0 and Prediction.objects.filter(job=job).count() == 0


def test_job_refused_when_protocol_or_release_do_not_match(eager, make_project, tmp_path):
    project = make_project("st", "status")
    other = make_project("vt", "visualtrans")
    items = factories.visualtrans_items(other, 2, tmp_path)
    with pytest.raises(services.JobRefused):
        services.job_create(endpoint=_random(), project=project, protocol="visualtrans")
    with pytest.raises(services.JobRefused):
        services.job_create(
            endpoint=ModelEndpoint.objects.get(), project=project, release=factories.release_of(other, items)
        )
    assert InferenceJob.objects.count() == 0


def test_cancelled_job_runs_no_more_chunks(make_project, tmp_path):
    project = make_project("st", "status")
    items = factories.status_items(project, 4, tmp_path)
    job = services.job_create(
        endpoint=_random(), project=project, release=factories.release_of(project, items), start=False
    )
    assert services.job_cancel(job=job) is True
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    assert services.job_run_chunk(job_id=job.pk, item_ids=[i.pk for i in items]) == 0
    assert Prediction.objects.filter(job=job).count() == 0
    assert services.job_cancel(job=job) is False


def test_suggestions_for_unlabeled_quintuplets(eager, make_project, tmp_path):
    project = make_project("q", "status")
    pending = factories.status_items(project, 3, tmp_path / "p", status=ItemStatus.PENDING)
    factories.status_items(project, 2, tmp_path / "v", start=10)  # verified: not unlabeled, no suggestion
    job = services.job_create(endpoint=_random(seed=3), project=project, mode="suggest")
    job.refresh_from_db()
    assert (job.status, job.total_queries, job.done_queries) == (JobStatus.FINISHED, 3, 3)
    rows = Suggestion.objects.order_by("item_id")
    assert [s.item_id for s in rows] == [i.pk for i in pending]
    for s in rows:
        assert s.source == f"job:{job.pk} Random"
        assert s.result["machine"] is True and s.result["job"] == job.pk
        assert set(s.result) == {
            "state_a",
            "state_b",
            "change",
            "change_distractors",
            "category",
            "difference",
            "machine",
            "job",
            "model",
        }
        assert len(s.result["change_distractors"]) == 3


def test_suggestions_for_unlabeled_qa_items(eager, make_project, tmp_path):
    project = make_project("vt", "visualtrans")
    items = factories.visualtrans_items(project, 2, tmp_path)
    for item in items:
        item.status = ItemStatus.PENDING
        item.save()
    job = services.job_create(endpoint=_random(), project=project, mode="suggest")
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED
    results = [s.result for s in Suggestion.objects.order_by("item_id")]
    assert [r["answer"] in ("A", "B", "C", "D") and r["machine"] for r in results] == [True, True]


def test_commands_create_endpoint_and_run_inference_wait(eager, make_project, tmp_path):
    project = make_project("st", "status")
    items = factories.status_items(project, 3, tmp_path)
    factories.release_of(project, items, "v2")
    out = StringIO()
    call_command("create_endpoint", "--name", "rnd", "--backend", "random", "--option", "seed=4", stdout=out)
    assert ModelEndpoint.objects.get(name="rnd").options == {"seed": 4}
    out = StringIO()
    call_command(
        "run_inference",
        "--endpoint",
        "rnd",
        "--project",
        "st",
        "--release",
        "v2",
        "--protocol",
        "status",
        "--param",
        "item_limit=2",
        "--param",
        "temperature=0.5",
        "--wait",
        "--poll",
        "0.05",
        stdout=out,
    )
    job = InferenceJob.objects.get()
    assert job.params == {"item_limit": 2, "temperature": 0.5}
    assert out.getvalue().splitlines()[
        -1
    ] == f"job {job.pk} finished: 100.0% (12 done, 0 failed of 12)" or out.getvalue().splitlines()[-1].startswith(
        f"job {job.pk} finished: 100.0% (12 done, 0 failed of 12)"
    )


def test_run_inference_refuses_an_endpoint_the_launch_api_refuses_saying_why_and_creates_nothing(
    eager, make_project, tmp_path, settings
):
    from django.core.management.base import CommandError

    from annotation.models import AuditEvent
    from inference import selectors
    from inference.backends.keys import key_var_refusal

    project = make_project("st", "status")
    factories.release_of(project, factories.status_items(project, 2, tmp_path))
    services.endpoint_create(name="keyed", backend="random", api_key_env="STATELAB_KEY_RND")
    args = ["run_inference", "--endpoint", "keyed", "--project", "st", "--release", "v1", "--protocol", "status"]
    # The operator no longer allows the variable the endpoint names: the API lists it as unusable.
    settings.STATELAB_ENDPOINT_KEY_VARS = ("OPENAI_API_KEY",)
    settings.STATELAB_ENDPOINT_KEY_PREFIX = ""
    assert not selectors.endpoints_usable().filter(name="keyed").exists()
    audit_before = AuditEvent.objects.count()

    with pytest.raises(CommandError) as refused:
        call_command(*args, stdout=StringIO())
    assert str(refused.value) == f"endpoint keyed cannot be used: {key_var_refusal('STATELAB_KEY_RND')}"
    assert str(refused.value).startswith(
        "endpoint keyed cannot be used: the variable STATELAB_KEY_RND may not hold an API key: the operator allows "
        "OPENAI_API_KEY ("
    )
    assert (InferenceJob.objects.count(), AuditEvent.objects.count()) == (0, audit_before)

    # Allowed again (the default prefix): the same command starts the job.
    settings.STATELAB_ENDPOINT_KEY_PREFIX = "STATELAB_KEY_"
    assert selectors.endpoints_usable().filter(name="keyed").exists()
    call_command(*args, stdout=StringIO())
    assert InferenceJob.objects.get().endpoint.name == "keyed"


def test_run_inference_wait_exits_non_zero_when_the_job_failed(eager, make_project, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    project = make_project("st", "status")
    factories.status_items(project, 1, tmp_path)
    call_command("create_endpoint", "--name", "gpu", "--backend", "vllm", "--model", "some/model", stdout=StringIO())
    err = StringIO()
    with pytest.raises(SystemExit) as exc:
        call_command(
            "run_inference",
            "--endpoint",
            "gpu",
            "--project",
            "st",
            "--protocol",
            "status",
            "--wait",
            "--poll",
            "0.05",
            stdout=StringIO(),
            stderr=err,
        )
    assert exc.value.code == 1
    assert "vLLM is not installed" in err.getvalue()


def break_random_backend(monkeypatch, failing_calls) -> dict:
    """Make the Random backend's nth complete() calls (1-based) raise; returns the call counter."""
    from inference.backends.random_backend import RandomBackend

    real = RandomBackend.complete
    calls = {"n": 0}

    def flaky(self, queries, sampling):
        calls["n"] += 1
        if calls["n"] in failing_calls:
            raise RuntimeError("engine died")
        return real(self, queries, sampling)

    monkeypatch.setattr(RandomBackend, "complete", flaky)
    return calls


def test_a_backend_crash_marks_the_chunk_failed_and_retry_recovers(eager, make_project, tmp_path, monkeypatch):
    project = make_project("st", "status")
    items = factories.status_items(project, 4, tmp_path)
    break_random_backend(monkeypatch, {2})
    job = services.job_create(
        endpoint=_random(), project=project, release=factories.release_of(project, items), params={"chunk_size": 2}
    )
    job.refresh_from_db()
    assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, 12, 12)
    assert set(Prediction.objects.filter(job=job, status="failed").values_list("error", flat=True)) == {
        "backend error: RuntimeError: engine died"
    }
    assert services.job_retry_failed(job=job) == 2
    job.refresh_from_db()
    assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, 24, 0)


def test_retry_failed_reruns_every_failed_chunk_not_just_the_first(eager, make_project, tmp_path, monkeypatch):
    # Three of four chunks break: the retry re-queues three chunks, and the job may end only once
    # all of them are back (each chunk that comes back alone must not find done + failed = total).
    project = make_project("st", "status")
    items = factories.status_items(project, 8, tmp_path)
    calls = break_random_backend(monkeypatch, {2, 3, 4})
    job = services.job_create(
        endpoint=_random(), project=project, release=factories.release_of(project, items), params={"chunk_size": 2}
    )
    job.refresh_from_db()
    assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, 12, 36)
    assert services.job_retry_failed(job=job) == 6
    job.refresh_from_db()
    assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, 48, 0)
    assert Prediction.objects.filter(job=job).count() == 48
    assert calls["n"] == 4 + 3  # one request per re-queued chunk


def test_a_release_job_shows_the_option_orders_the_release_froze_even_with_an_item_limit(eager, make_project, tmp_path):
    from annotation.models import Item, ReleaseItem
    from annotation.releases import release_freeze

    project = make_project("ci", "changeit")
    image = factories.asset(factories.image_file(tmp_path / "c.png", (10, 20, 30)), "image")
    for i, state in enumerate(["whole", "sliced", "peeled", "diced", "mashed", "juiced"]):
        Item.objects.create(
            project=project,
            external_id=f"c{i}",
            status=ItemStatus.VERIFIED,
            media={"image": image.sha256},
            payload={"image": "c.png", "object": "apple", "state": state, "bbox": [1, 1, 10, 10]},
        )
    release = release_freeze(project=project, version="v1")
    job = services.job_create(endpoint=_random(), project=project, release=release, params={"item_limit": 1})
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED
    frozen = ReleaseItem.objects.get(release=release, position=0).payload["resolved"]
    shown = {p.query: p.options for p in Prediction.objects.filter(job=job)}
    assert shown and shown == {key: spec["options"] for key, spec in frozen.items() if key in shown}
    # The standard strategy offers every apple state of the release, though the job ran one item.
    standard = [options for key, options in shown.items() if key.startswith("state:standard:")]
    assert len(standard) == 2
    assert all(set(options) == {"whole", "sliced", "peeled", "diced", "mashed", "juiced"} for options in standard)


def test_an_unexpected_error_in_a_chunk_fails_its_queries_and_the_job_still_ends(
    eager, make_project, tmp_path, monkeypatch
):
    project = make_project("st", "status")
    items = factories.status_items(project, 4, tmp_path)
    real = chunks.item_inputs
    calls = {"n": 0}

    def broken_once(job, item_ids):
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyError("image_a")
        return real(job, item_ids)

    monkeypatch.setattr(chunks, "item_inputs", broken_once)
    job = services.job_create(
        endpoint=_random(), project=project, release=factories.release_of(project, items), params={"chunk_size": 2}
    )
    job.refresh_from_db()
    assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, 12, 12)
    assert set(Prediction.objects.filter(job=job, status="failed").values_list("error", flat=True)) == {
        "chunk error: KeyError: 'image_a'"
    }
    assert services.job_retry_failed(job=job) == 2
    job.refresh_from_db()
    assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, 24, 0)


def test_endpoint_options_that_look_like_secrets_are_refused(db):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError):
        services.endpoint_create(name="leaky", backend="openai", model_id="m", options={"api_key": "sk-1"})
    assert ModelEndpoint.objects.count() == 0
    ok = services.endpoint_create(name="fine", backend="openai", model_id="m", options={"max_tokens": 5, "timeout": 3})
    assert ok.options == {"max_tokens": 5, "timeout": 3}


def test_retry_failed_leaves_an_imported_job_alone(eager, make_project, tmp_path):
    # Predictions imported from a file have no model to ask again: retry does nothing (it used to
    # reach for the missing endpoint after deleting the failed rows, and the request broke).
    from annotation.models import AuditEvent

    project = make_project("st", "status")
    items = factories.status_items(project, 2, tmp_path)
    release = factories.release_of(project, items)
    lines = [
        json.dumps({"item": "s0000", "query": "osi_a", "answer": "A"}),
        json.dumps({"item": "s0001", "query": "osi_a", "answer": "no idea"}),
    ]
    job = services.predictions_import(project=project, lines=lines, model_name="elsewhere", release=release)
    rows = list(
        Prediction.objects.filter(job=job).order_by("item_id").values_list("item__external_id", "status", "error")
    )
    assert rows == [("s0000", "ok", ""), ("s0001", "failed", "unparseable or empty answer")]
    events = AuditEvent.objects.count()

    assert services.job_retry_failed(job=job) == 0
    job.refresh_from_db()
    assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, 2, 1)
    assert (
        list(Prediction.objects.filter(job=job).order_by("item_id").values_list("item__external_id", "status", "error"))
        == rows
    )
    assert AuditEvent.objects.count() == events
