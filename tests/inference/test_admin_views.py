"""Admin job creation, the job page, its downloads and the progress API, with role checks."""

import json

import pytest
from django.contrib.auth.models import Permission

from annotation.models import Role
from inference import services
from inference.models import InferenceJob, JobStatus, Prediction

from . import factories

pytestmark = pytest.mark.django_db(transaction=True)


def _researcher(make_user, project, name="res"):
    user = make_user(name)
    user.is_staff = True
    user.save()
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="inference"))
    from annotation.models import Membership

    Membership.objects.create(project=project, user=user, role=Role.RESEARCHER)
    return user


def test_researcher_creates_a_job_in_the_admin_and_it_runs(eager, client, make_user, make_project, tmp_path):
    project = make_project("st", "status")
    items = factories.status_items(project, 4, tmp_path)
    release = factories.release_of(project, items)
    endpoint = services.endpoint_create(name="Random", backend="random")
    user = _researcher(make_user, project)
    client.force_login(user)
    page = client.get("/admin/inference/inferencejob/add/")
    assert page.status_code == 200 and b"item_limit" in page.content
    resp = client.post(
        "/admin/inference/inferencejob/add/",
        {
            "endpoint": endpoint.pk,
            "project": project.pk,
            "release": release.pk,
            "protocol": "",
            "mode": "evaluate",
            "temperature": "0",
            "item_limit": "3",
            "strategy": "direct",
            "extra_params": '{"logprobs": 3}',
        },
    )
    job = InferenceJob.objects.get()
    assert resp.status_code == 302 and resp["Location"] == f"/jobs/{job.pk}/"
    assert job.params == {"logprobs": 3, "temperature": 0.0, "item_limit": 3}
    assert (job.status, job.total_queries, job.done_queries, job.created_by) == (JobStatus.FINISHED, 18, 18, user)
    listing = client.get("/admin/inference/inferencejob/").content.decode()
    assert (
        '<progress value="100.0" max="100"></progress> <span class="pct">100.0%</span> (<span class="n">18/18</span>)'
    ) in listing
    # The live cells: status (with the progress API the list script polls), tokens, cost.
    assert (
        f'<span class="job-live" data-job="{job.pk}" data-field="status" data-status="finished" '
        f'data-progress-url="/api/jobs/{job.pk}/progress/">finished</span>'
    ) in listing
    assert f'<span class="job-live" data-job="{job.pk}" data-field="tokens">0 / 0</span>' in listing
    assert f'<span class="job-live" data-job="{job.pk}" data-field="cost">–</span>' in listing
    assert "inference/admin_job_list.js" in listing
    assert f'href="/jobs/{job.pk}/">live page</a>' in listing


def test_admin_list_shows_tokens_cost_and_failures_with_their_errors(eager, client, make_user, make_project, tmp_path):
    project = make_project("st", "status")
    items = factories.status_items(project, 2, tmp_path)
    endpoint = services.endpoint_create(
        name="R", backend="random", options={"price_per_1m_input": 2.0, "price_per_1m_output": 8.0}
    )
    job = services.job_create(endpoint=endpoint, project=project, release=factories.release_of(project, items))
    Prediction.objects.filter(job=job, item=items[0], query="sci4").update(
        status="failed", error="HTTP 500: boom", answer=None
    )
    InferenceJob.objects.filter(pk=job.pk).update(
        done_queries=11, failed_queries=1, prompt_tokens=1200, completion_tokens=300
    )
    client.force_login(_researcher(make_user, project))
    listing = client.get("/admin/inference/inferencejob/").content.decode()
    assert '<th scope="col" class="column-tokens">' in listing and "column-cost" in listing
    assert f'<span class="job-live" data-job="{job.pk}" data-field="tokens">1200 / 300</span>' in listing
    assert f'<span class="job-live" data-job="{job.pk}" data-field="cost">$0.0048</span>' in listing
    assert (
        f'<a class="job-live" data-job="{job.pk}" data-field="failures" href="/jobs/{job.pk}/#job-failures" '
        f'title="1× HTTP 500: boom">1</a>'
    ) in listing
    # A job whose queries all failed shows its error summary in the list.
    InferenceJob.objects.filter(pk=job.pk).update(
        status=JobStatus.FAILED, error="all 12 queries failed: 12× HTTP 500: boom"
    )
    listing = client.get("/admin/inference/inferencejob/").content.decode()
    assert '<span class="errornote job-error">all 12 queries failed: 12× HTTP 500: boom</span>' in listing


def test_rescore_action_reparses_edited_raw_output_and_rewrites_the_exports(
    eager, client, make_user, make_project, tmp_path
):
    project = make_project("st", "status")
    items = factories.status_items(project, 3, tmp_path)
    job = services.job_create(
        endpoint=services.endpoint_create(name="R", backend="random"),
        project=project,
        release=factories.release_of(project, items),
    )
    folder = services.job_export_dir(job)
    before = json.loads((folder / "results.json").read_text())
    assert before["counts"]["parse_failures"] == 0 and before["metrics"]["parse_failures"] == 0
    flipped = Prediction.objects.get(job=job, item=items[0], query="osi_a")
    other = "B" if flipped.answer == "A" else "A"
    # A researcher edits raw outputs (e.g. after fixing a transcription): one to the other letter
    # in words, one to text no parser can read.
    flipped.raw_output = f"The answer is {other}."
    flipped.save()
    broken = Prediction.objects.get(job=job, item=items[1], query="sci4")
    broken.raw_output = "I cannot tell."
    broken.save()

    client.force_login(_researcher(make_user, project))
    resp = client.post(
        "/admin/inference/inferencejob/", {"action": "rescore", "_selected_action": [job.pk]}, follow=True
    )
    assert "Re-scored; 2 answer(s) changed." in resp.content.decode()
    flipped.refresh_from_db()
    broken.refresh_from_db()
    assert (flipped.answer, broken.answer) == (other, None)

    samples = {(s["item"], s["query"]): s for s in map(json.loads, (folder / "samples.jsonl").read_text().splitlines())}
    assert samples[(items[0].external_id, "osi_a")]["answer"] == other
    assert samples[(items[0].external_id, "osi_a")]["raw_output"] == f"The answer is {other}."
    assert samples[(items[1].external_id, "sci4")]["answer"] is None
    after = json.loads((folder / "results.json").read_text())
    assert after["counts"]["parse_failures"] == 1 and after["counts"]["by_query"]["sci4"]["parse_failures"] == 1
    assert after["metrics"]["parse_failures"] == 1


def test_admin_refuses_a_job_whose_protocol_does_not_match(eager, client, make_user, make_project):
    project = make_project("st", "status")
    endpoint = services.endpoint_create(name="Random", backend="random")
    client.force_login(_researcher(make_user, project))
    resp = client.post(
        "/admin/inference/inferencejob/add/",
        {
            "endpoint": endpoint.pk,
            "project": project.pk,
            "protocol": "oscbench",
            "mode": "evaluate",
            "temperature": "0",
            "strategy": "direct",
            "extra_params": "{}",
        },
    )
    assert resp.status_code == 200
    assert "project st uses the status protocol, not oscbench" in resp.content.decode()
    assert InferenceJob.objects.count() == 0


def test_admin_actions_retry_and_cancel(eager, client, make_user, make_project, tmp_path):
    project = make_project("st", "status")
    items = factories.status_items(project, 2, tmp_path)
    job = services.job_create(
        endpoint=services.endpoint_create(name="R", backend="random"),
        project=project,
        release=factories.release_of(project, items),
    )
    # Pretend two queries failed: retry runs just that item again and recovers them.
    Prediction.objects.filter(job=job, item=items[0], query__in=["osi_a", "sci4"]).update(
        status="failed", error="HTTP 500", answer=None
    )
    InferenceJob.objects.filter(pk=job.pk).update(done_queries=10, failed_queries=2)
    client.force_login(_researcher(make_user, project))
    resp = client.post("/admin/inference/inferencejob/", {"action": "retry_failed", "_selected_action": [job.pk]})
    assert resp.status_code == 302
    job.refresh_from_db()
    assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, 12, 0)
    assert Prediction.objects.filter(job=job, status="ok").count() == 12
    # Cancelling a finished job changes nothing.
    client.post("/admin/inference/inferencejob/", {"action": "cancel_jobs", "_selected_action": [job.pk]})
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED


def test_job_page_downloads_and_progress_api_need_the_researcher_role(eager, client, make_user, make_project, tmp_path):
    project = make_project("st", "status")
    items = factories.status_items(project, 2, tmp_path)
    endpoint = services.endpoint_create(name="R", backend="random", options={"price_per_1m_input": 1.0})
    job = services.job_create(endpoint=endpoint, project=project, release=factories.release_of(project, items))
    annotator = make_user("ann")
    from annotation.models import Membership

    Membership.objects.create(project=project, user=annotator, role=Role.ANNOTATOR)
    outsider = make_user("out")

    client.force_login(outsider)
    assert client.get(f"/jobs/{job.pk}/").status_code == 404
    assert client.get(f"/api/jobs/{job.pk}/progress/").status_code == 404
    client.force_login(annotator)
    assert client.get(f"/jobs/{job.pk}/").status_code == 403
    assert client.get(f"/jobs/{job.pk}/samples.jsonl").status_code == 403
    assert client.post(f"/api/jobs/{job.pk}/cancel/").status_code == 403

    client.force_login(_researcher(make_user, project))
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'href="/projects/st/leaderboard/"' in page and "js/job_progress.js" in page
    progress = client.get(f"/api/jobs/{job.pk}/progress/").json()
    assert {
        k: progress[k] for k in ("status", "total", "done", "failed", "percent", "eta_s", "cost_usd", "failures")
    } == {
        "status": "finished",
        "total": 12,
        "done": 12,
        "failed": 0,
        "percent": 100.0,
        "eta_s": 0.0,
        "cost_usd": 0.0,
        "failures": [],
    }
    samples = b"".join(client.get(f"/jobs/{job.pk}/samples.jsonl").streaming_content).decode().splitlines()
    assert len(samples) == 12 and json.loads(samples[0])["item"] == "s0000"
    results = json.loads(client.get(f"/jobs/{job.pk}/results.json").content)
    assert results["counts"]["ok"] == 12 and results["model"] == "R"
    assert client.post(f"/api/jobs/{job.pk}/cancel/").status_code == 409


def test_endpoint_admin_refuses_secret_options_and_shows_availability(client, make_user, monkeypatch):
    from inference.models import ModelEndpoint

    client.force_login(make_user("root", superuser=True))
    form = {
        "name": "judge",
        "backend": "openai",
        "model_id": "gpt",
        "revision": "",
        "base_url": "http://x/v1",
        "api_key_env": "STATELAB_KEY_JUDGE",
        "concurrency": "8",
    }
    resp = client.post("/admin/inference/modelendpoint/add/", dict(form, options='{"api_key": "sk-1"}'))
    assert resp.status_code == 200 and "looks like a secret" in resp.content.decode()
    assert ModelEndpoint.objects.count() == 0
    resp = client.post("/admin/inference/modelendpoint/add/", dict(form, options='{"timeout": 5}'))
    assert resp.status_code == 302 and ModelEndpoint.objects.get().options == {"timeout": 5}
    monkeypatch.delenv("STATELAB_KEY_JUDGE", raising=False)
    listing = client.get("/admin/inference/modelendpoint/").content.decode()
    assert "no: the API key variable STATELAB_KEY_JUDGE named by endpoint judge is not set" in listing
