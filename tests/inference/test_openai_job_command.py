"""Launching openai jobs, against the local stand-in (tests/inference/openai_standin.py) with
eager Celery: `run_inference --wait` exits non-zero when every query failed (the export still
written), warns about partial failures and unreadable judge replies, and `--strict` makes those
fatal; an endpoint's API key is read from the environment, refused before a job exists when unset,
and never stored in the database."""

import json

import pytest

from inference import services
from inference.models import InferenceJob, JobStatus
from tests.helpers.standin_jobs import standin_endpoint as _endpoint

from . import factories

pytestmark = pytest.mark.django_db(transaction=True)


def test_run_inference_wait_warns_about_unreadable_judge_replies_and_strict_makes_them_fatal(
    eager, standin, make_project, tmp_path
):
    from io import StringIO

    from django.core.management import call_command

    standin.rule = lambda key: "alwaysbadjson"  # every reply stays unreadable, no request fails
    project = make_project("osc", "oscbench")
    factories.release_of(project, factories.oscbench_items(project, 3, tmp_path))
    _endpoint(standin)
    args = [
        "run_inference",
        "--endpoint",
        "standin-judge",
        "--project",
        "osc",
        "--release",
        "v1",
        "--protocol",
        "oscbench",
        "--param",
        "frames=4",
        "--wait",
        "--poll",
        "0.05",
    ]
    err = StringIO()
    call_command(*args, stdout=StringIO(), stderr=err)  # no SystemExit: exit status 0
    job = InferenceJob.objects.get()
    assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, 3, 0)
    assert err.getvalue() == (
        f"warning: job {job.pk} finished with 3 of 3 replies unreadable (not valid JSON after the repairs; "
        "scored as missing); ask again with the admin action 'Retry failed items'\n"
    )

    with pytest.raises(SystemExit) as exc:
        call_command(*args, "--strict", stdout=StringIO(), stderr=StringIO())
    assert exc.value.code == 2


def test_api_key_comes_from_the_environment_and_is_never_stored(eager, standin, make_project, tmp_path, monkeypatch):
    project = make_project("vt", "visualtrans")
    items = factories.visualtrans_items(project, 3, tmp_path)
    endpoint = services.endpoint_create(
        name="keyed",
        backend="openai",
        model_id="m",
        base_url=standin.base_url,
        api_key_env="STATELAB_KEY_STANDIN",
        options={"timeout": 0.5, "max_retries": 2},
    )
    # Unset: refused before a job exists (tests/inference/test_job_key_refusal.py has every launch path).
    monkeypatch.delenv("STATELAB_KEY_STANDIN", raising=False)
    with pytest.raises(services.JobRefused, match="reads its API key from STATELAB_KEY_STANDIN, which is not set"):
        services.job_create(endpoint=endpoint, project=project, release=factories.release_of(project, items))
    assert InferenceJob.objects.count() == 0

    monkeypatch.setenv("STATELAB_KEY_STANDIN", "sk-secret-123")
    job2 = services.job_create(endpoint=endpoint, project=project, release=factories.release_of(project, items, "v2"))
    job2.refresh_from_db()
    assert job2.status == JobStatus.FINISHED
    from django.db import connection

    with connection.cursor() as cur:
        for table in ("inference_modelendpoint", "inference_inferencejob", "inference_prediction"):
            cur.execute(f"SELECT * FROM {table}")
            assert "sk-secret-123" not in json.dumps(cur.fetchall(), default=str)


def test_run_inference_wait_exits_non_zero_when_every_query_failed(eager, make_project, tmp_path):
    from io import StringIO

    from django.core.management import call_command

    from tests.inference.openai_standin import StandIn

    gone = StandIn(faults=False).start()
    gone.stop()  # its port now refuses connections: the server is unreachable
    project = make_project("vt", "visualtrans")
    items = factories.visualtrans_items(project, 5, tmp_path)
    factories.release_of(project, items)
    services.endpoint_create(
        name="unreachable",
        backend="openai",
        model_id="m",
        base_url=gone.base_url,
        options={"timeout": 2, "max_retries": 1},
    )
    out, err = StringIO(), StringIO()
    with pytest.raises(SystemExit) as exc:
        call_command(
            "run_inference",
            "--endpoint",
            "unreachable",
            "--project",
            "vt",
            "--release",
            "v1",
            "--protocol",
            "visualtrans",
            "--wait",
            "--poll",
            "0.05",
            stdout=out,
            stderr=err,
        )
    assert exc.value.code == 1
    job = InferenceJob.objects.get()
    assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FAILED, 0, 5)
    assert job.error.startswith("all 5 queries failed: 5× connection failed: ")
    assert job.error.endswith("(after 2 attempts)")
    assert err.getvalue().startswith(f"job {job.pk} failed: all 5 queries failed: 5× connection failed")
    assert out.getvalue().splitlines()[-1].startswith(f"job {job.pk} failed: 100.0% (0 done, 5 failed of 5)")
    # The export is still written, so the errors can be read there too.
    results = json.loads((services.job_export_dir(job) / "results.json").read_text())
    assert (results["status"], results["counts"]["failed"]) == ("failed", 5)


def test_run_inference_wait_warns_about_partial_failures_and_strict_makes_them_fatal(
    eager, standin, make_project, tmp_path
):
    from io import StringIO

    from django.core.management import call_command

    project = make_project("vt", "visualtrans")
    items = factories.visualtrans_items(project, 60, tmp_path)
    factories.release_of(project, items)
    _endpoint(standin)
    args = [
        "run_inference",
        "--endpoint",
        "standin-judge",
        "--project",
        "vt",
        "--release",
        "v1",
        "--protocol",
        "visualtrans",
        "--wait",
        "--poll",
        "0.05",
    ]
    err = StringIO()
    call_command(*args, stdout=StringIO(), stderr=err)  # no SystemExit: exit status 0
    job = InferenceJob.objects.get()
    assert job.status == JobStatus.FINISHED and 1 <= job.failed_queries < 60
    assert err.getvalue().startswith(f"warning: job {job.pk} finished with {job.failed_queries} of 60 queries failed (")
    assert "HTTP 500: internal error (after 3 attempts)" in err.getvalue()

    with pytest.raises(SystemExit) as exc:
        call_command(*args, "--strict", stdout=StringIO(), stderr=StringIO())
    assert exc.value.code == 2
