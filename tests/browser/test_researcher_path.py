"""The researcher's path in the demo's data (the demo's own seed functions, annotation/management/
commands/demo.py), in Chromium, with background work run at once as the demo runs it: the demo's
researcher (not a superuser) opens the admin from the page header, starts a job on the endpoint the
demo set up and sees it finish; the demo's project lead (a project admin, not a superuser) changes
the lease on the project's Settings page."""

import pytest

from annotation.management.commands import demo
from annotation.models import AuditAction, AuditEvent, Project
from inference.models import InferenceJob, JobStatus, Prediction
from protocols import registry
from tests.helpers.browser import option_texts

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SLUG = "demo-visualtrans"  # images only: quick to draw


@pytest.fixture
def demo_data(tmp_path):
    users = demo.make_users()
    sample = registry.get("visualtrans").samples.DEMO
    project = demo.make_project(SLUG, "visualtrans", sample, users)
    demo.fill(project, sample, tmp_path / "demo" / "visualtrans")
    demo.make_endpoint()
    return users, project


def test_the_demo_researcher_starts_a_job_from_the_admin_and_sees_it_finish(page, login, live_server, eager, demo_data):
    users, project = demo_data
    assert not users["researcher"].is_superuser and not users["researcher"].is_staff
    login(page, "researcher", "researcher-demo")
    page.click("#admin-link")
    page.wait_for_url(f"{live_server.url}/admin/")
    page.click("a[href='/admin/inference/inferencejob/add/']")
    page.wait_for_url(f"{live_server.url}/admin/inference/inferencejob/add/")
    assert page.locator(".messagelist").count() == 0  # an endpoint is there: no advice to add one
    assert option_texts(page, "#id_endpoint") == [demo.DEMO_ENDPOINT]
    page.select_option("#id_endpoint", label=demo.DEMO_ENDPOINT)
    page.select_option("#id_project", label=SLUG)
    page.select_option("#id_release", label=f"{SLUG}@v1")
    page.click('input[name="_save"]')
    page.wait_for_url(f"{live_server.url}/jobs/*/")

    job = InferenceJob.objects.get(endpoint__isnull=False)  # the demo's other jobs are imported predictions
    assert (job.project, job.created_by, job.model_name) == (project, users["researcher"], demo.DEMO_ENDPOINT)
    assert page.url == f"{live_server.url}/jobs/{job.pk}/"
    assert page.locator(".messagelist, .messages").first.inner_text().strip() == f"Job {job.pk} created."
    assert page.locator("#job-status").inner_text() == "finished"
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED and job.failed_queries == 0
    assert job.done_queries == job.total_queries == Prediction.objects.filter(job=job).count() > 0
    page.click("#leaderboard-link")
    page.wait_for_url(f"{live_server.url}/projects/{SLUG}/leaderboard/")
    assert page.locator(f'#panel-main tbody tr[data-model="{demo.DEMO_ENDPOINT}"]').count() == 1


def test_the_demo_lead_changes_the_lease_in_the_app(page, login, live_server, demo_data):
    users, project = demo_data
    assert not users["lead"].is_superuser
    login(page, "lead", "lead-demo")
    page.goto(f"{live_server.url}/projects/{SLUG}/")
    page.click("#settings-link")
    page.wait_for_url(f"{live_server.url}/projects/{SLUG}/settings/")
    assert page.input_value("#id_lease_seconds") == "600"
    page.fill("#id_lease_seconds", "900")
    page.click("#project-save")
    page.wait_for_url(f"{live_server.url}/projects/{SLUG}/settings/")
    assert page.locator(".messages").inner_text().strip() == "Saved: lease seconds."
    assert page.input_value("#id_lease_seconds") == "900"
    assert Project.objects.get(pk=project.pk).settings["lease_seconds"] == 900
    event = AuditEvent.objects.get(action=AuditAction.PROJECT_SETTINGS)
    assert event.actor == users["lead"]
    assert event.details["changes"] == {"settings.lease_seconds": {"before": None, "after": 900}}

    # The researcher sees the lease, and may not change it.
    page.context.clear_cookies()
    login(page, "researcher", "researcher-demo")
    page.goto(f"{live_server.url}/projects/{SLUG}/settings/")
    assert page.input_value("#id_lease_seconds") == "900"
    assert page.locator("#id_lease_seconds").is_disabled()
    assert page.locator("#project-save").count() == 0
