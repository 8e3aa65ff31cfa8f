"""A researcher who is not staff finds the admin from the page header, sees only their project in it,
launches a job there that a real Celery worker runs, and meets the admin's "doesn't exist" for the
other project's job and a refusal for accounts; an annotator gets no link and the admin's refusal."""

import pytest

from annotation.models import Role
from inference import services
from inference.models import InferenceJob
from tests.helpers.browser import option_texts
from tests.inference import factories
from tests.inference.worker import start_worker, stop_worker

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_researcher_launches_a_job_for_their_project_and_sees_nothing_of_another(
    page, login, live_server, make_user, make_project, broker, tmp_path
):
    researcher, other, annotator = make_user("res"), make_user("res_b"), make_user("ann")
    mine = make_project("mine", "status", members={researcher: Role.RESEARCHER, annotator: Role.ANNOTATOR})
    theirs = make_project("theirs", "status", members={other: Role.RESEARCHER})
    release = factories.release_of(mine, factories.status_items(mine, 3, tmp_path), version="v1")
    their_release = factories.release_of(theirs, factories.status_items(theirs, 1, tmp_path, start=10), version="t1")
    endpoint = services.endpoint_create(name="random-baseline", backend="random")
    their_job = InferenceJob.objects.create(
        endpoint=endpoint,
        model_name="secret-model",
        project=theirs,
        release=their_release,
        protocol="status",
        status="finished",
    )
    worker = start_worker("admin-researcher", tmp_path / "worker.log")
    try:
        login(page, "res")
        assert not researcher.is_staff
        page.click("#admin-link")
        page.wait_for_url(f"{live_server.url}/admin/")
        assert page.locator("#content h1").inner_text() == "Site administration"
        assert page.locator("a[href='/admin/auth/user/']").count() == 0

        page.goto(f"{live_server.url}/admin/inference/inferencejob/")
        assert "secret-model" not in page.content() and page.locator("#result_list").count() == 0

        page.goto(f"{live_server.url}/admin/inference/inferencejob/add/")
        assert option_texts(page, "#id_project") == ["mine"]
        assert option_texts(page, "#id_release") == ["mine@v1"]
        assert option_texts(page, "#id_endpoint") == ["random-baseline"]
        page.select_option("#id_endpoint", str(endpoint.pk))
        page.select_option("#id_project", str(mine.pk))
        page.select_option("#id_release", str(release.pk))
        page.click('input[name="_save"]')
        page.wait_for_url(f"{live_server.url}/jobs/*/")
        job = InferenceJob.objects.exclude(pk=their_job.pk).get()
        assert (job.project, job.created_by) == (mine, researcher)
        page.wait_for_function("() => document.getElementById('job-status').textContent === 'finished'", timeout=60_000)

        page.goto(f"{live_server.url}/admin/inference/inferencejob/")
        assert page.locator(f'.job-live[data-job="{job.pk}"][data-field="status"]').inner_text() == "finished"
        assert page.locator("#result_list tbody tr").count() == 1
        page.goto(f"{live_server.url}/admin/inference/inferencejob/{job.pk}/change/")
        assert page.locator(".field-status .readonly").inner_text() == "Finished"

        # The other project's job by its URL: the admin's page for a missing object, not the job.
        page.goto(f"{live_server.url}/admin/inference/inferencejob/{their_job.pk}/change/")
        assert page.url == f"{live_server.url}/admin/"
        assert "doesn’t exist" in page.locator(".messagelist").inner_text()
        assert "secret-model" not in page.content()
        response = page.goto(f"{live_server.url}/admin/auth/user/")
        assert response.status == 403
    finally:
        stop_worker(worker)

    page.context.clear_cookies()
    login(page, "ann")
    assert page.locator("#admin-link").count() == 0
    page.goto(f"{live_server.url}/admin/")
    assert page.url == f"{live_server.url}/admin/login/?next=/admin/"
    assert (
        "You are authenticated as ann, but are not authorized to access this page."
        in page.locator("#content").inner_text()
    )


def test_the_header_link_for_a_superuser_and_not_for_a_non_member(page, login, live_server, make_user):
    make_user("root", superuser=True)
    make_user("nobody")
    login(page, "root")
    page.click("#admin-link")
    page.wait_for_url(f"{live_server.url}/admin/")
    assert page.locator("#content th a[href='/admin/auth/user/']").count() == 1
    page.context.clear_cookies()
    login(page, "nobody")
    assert page.locator(".who").count() == 1 and page.locator("#admin-link").count() == 0
