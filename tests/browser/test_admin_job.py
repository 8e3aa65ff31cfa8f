"""A researcher creates an inference job in the admin page, watches its progress bar reach 100 %
(a real Celery worker runs it against the local OpenAI-compatible stand-in) and opens the leaderboard."""

import pytest
from django.contrib.auth.models import Permission

from annotation.models import Membership, Role
from inference import services
from inference.models import InferenceJob, Prediction
from tests.inference import factories
from tests.inference.openai_standin import StandIn
from tests.inference.worker import start_worker, stop_worker

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_researcher_creates_job_in_admin_watches_progress_and_opens_leaderboard(
    page, login, live_server, make_user, make_project, broker, tmp_path
):
    standin = StandIn(latency=0.15, faults=False).start()
    # The first 4 answers go through, the rest wait until the second tab below is watching: both
    # pages must see the job part-way (a fast machine could otherwise finish it before the tab loads).
    standin.hold(after=4)
    worker = start_worker("browser", tmp_path / "worker.log")
    try:
        researcher = make_user("res")
        researcher.is_staff = True
        researcher.save()
        researcher.user_permissions.add(*Permission.objects.filter(content_type__app_label="inference"))
        project = make_project("st", "status")
        Membership.objects.create(project=project, user=researcher, role=Role.RESEARCHER)
        items = factories.status_items(project, 10, tmp_path)
        release = factories.release_of(project, items)
        endpoint = services.endpoint_create(
            name="standin-vlm",
            backend="openai",
            model_id="m",
            base_url=standin.base_url,
            concurrency=2,
            options={"timeout": 10, "price_per_1m_input": 1.5},
        )

        login(page, "res")
        page.goto(f"{live_server.url}/admin/inference/inferencejob/add/")
        page.select_option("#id_endpoint", str(endpoint.pk))
        page.select_option("#id_project", str(project.pk))
        page.select_option("#id_release", str(release.pk))
        page.fill("#id_chunk_size", "2")
        page.click('input[name="_save"]')
        page.wait_for_url(f"{live_server.url}/jobs/*/")
        job = InferenceJob.objects.get()
        assert page.url == f"{live_server.url}/jobs/{job.pk}/"

        # Record every value the bar shows while the page polls.
        page.evaluate("""() => {
            const bar = document.getElementById('job-bar');
            window.seen = [Number(bar.getAttribute('aria-valuenow'))];
            new MutationObserver(() => window.seen.push(Number(bar.getAttribute('aria-valuenow'))))
                .observe(bar, {attributes: true, attributeFilter: ['aria-valuenow']});
        }""")
        # Meanwhile the admin list, in a second tab, keeps the job's row live too.
        listing = page.context.new_page()
        listing.goto(f"{live_server.url}/admin/inference/inferencejob/")
        row = f'.job-live[data-job="{job.pk}"]'
        listing.evaluate(
            """(row) => {
            const bar = document.querySelector(row + '[data-field="progress"] progress');
            window.listSeen = [bar.value];
            new MutationObserver(() => window.listSeen.push(bar.value)).observe(bar, {attributes: true});
            setInterval(() => window.listSeen.push(bar.value), 100);
        }""",
            row,
        )
        standin.release()
        page.wait_for_function(
            "() => document.getElementById('job-bar').getAttribute('aria-valuenow') === '100'", timeout=90_000
        )
        assert page.locator("#job-status").inner_text() == "finished"
        assert page.locator("#job-counts").inner_text() == "60 done, 0 failed of 60"
        assert page.locator("#job-failures tbody tr.none").inner_text() == "No failures."
        seen = page.evaluate("window.seen")
        assert seen[-1] == 100 and any(0 <= v < 100 for v in seen), seen
        assert Prediction.objects.filter(job=job).count() == 60

        listing.wait_for_function(
            f"() => document.querySelector('{row}[data-field=\"status\"]').textContent === 'finished'", timeout=30_000
        )
        job.refresh_from_db()
        assert listing.locator(f'{row}[data-field="progress"]').inner_text().strip() == "100.0% (60/60)"
        assert (
            listing.locator(f'{row}[data-field="tokens"]').inner_text()
            == f"{job.prompt_tokens} / {job.completion_tokens}"
        )
        assert job.prompt_tokens > 0
        assert listing.locator(f'{row}[data-field="cost"]').inner_text() == f"${job.prompt_tokens * 1.5 / 1e6:.4f}"
        assert listing.locator(f'{row}[data-field="failures"]').inner_text() == "0"
        assert listing.locator("th.column-tokens").inner_text().strip().lower() == "tokens (in / out)"
        assert listing.locator("th.column-cost").count() == 1
        list_seen = listing.evaluate("window.listSeen")
        assert list_seen[-1] == 100 and any(v < 100 for v in list_seen), list_seen  # updated in place, no reload
        listing.close()

        page.click("#leaderboard-link")
        page.wait_for_url(f"{live_server.url}/projects/st/leaderboard/")
        assert page.locator('#panel-main tbody tr[data-model="standin-vlm"]').count() == 1
    finally:
        stop_worker(worker)
        standin.stop()
