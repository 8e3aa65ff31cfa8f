"""A researcher reads a judge job's tokens, cost, answers from the cache and cost per correct answer on
its page, in Chromium: first as the server renders a finished job scored by the scorer settings name
(the job ran against the local OpenAI-compatible stand-in), then as the page's script keeps them
current while a re-run of the same job is served from the response cache."""

from __future__ import annotations

import pytest

from annotation.models import Membership, Role
from inference import selectors, services
from inference.models import InferenceJob, JobStatus

from . import factories
from .openai_standin import StandIn
from .test_job_cost import SCORER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_job_page_shows_tokens_cost_cache_and_cost_per_correct_answer(
    eager, page, login, live_server, make_user, make_project, settings, tmp_path
):
    settings.STATELAB_JOB_METRICS = SCORER
    standin = StandIn(faults=False).start()
    try:
        researcher = make_user("res")
        project = make_project("vt", "visualtrans")
        Membership.objects.create(project=project, user=researcher, role=Role.RESEARCHER)
        release = factories.release_of(project, factories.visualtrans_items(project, 12, tmp_path))
        endpoint = services.endpoint_create(
            name="priced-judge",
            backend="openai",
            model_id="m",
            base_url=standin.base_url,
            price_per_1m_input="2",
            price_per_1m_output="8",
        )
        job = services.job_create(endpoint=endpoint, project=project, release=release)
        job.refresh_from_db()
        assert job.status == JobStatus.FINISHED and job.correct_answers
        cost = selectors.job_cost(job)
        per_correct = selectors.job_cost_per_correct(cost, job.correct_answers)
        assert cost > 0 and per_correct > 0

        login(page, "res")
        page.goto(f"{live_server.url}/jobs/{job.pk}/")
        # The rate is written by the page's script only: once it shows, the figures are its rendering.
        page.wait_for_function("() => /queries\\/s$/.test(document.getElementById('job-rate').textContent)")
        assert page.locator("#job-tokens").inner_text() == f"{job.prompt_tokens} in / {job.completion_tokens} out"
        assert page.locator("#job-cost").inner_text() == selectors.usd(cost)
        assert page.locator("#job-cost-per-correct").inner_text() == (
            f"{selectors.usd(per_correct)} ({job.correct_answers} correct)"
        )
        assert not page.locator("#job-cached").is_visible()

        # The same job again: its answers come from the response cache. While it is "running" the
        # page polls and shows each new figure; once finished and scored, the final ones.
        again = services.job_create(endpoint=endpoint, project=project, release=release)
        again.refresh_from_db()
        assert (again.cached_answers, again.prompt_tokens) == (12, 0) and standin.received == 12
        finished = {f: getattr(again, f) for f in ("status", "cached_answers", "correct_answers", "finished_at")}
        InferenceJob.objects.filter(pk=again.pk).update(
            status=JobStatus.RUNNING, cached_answers=5, correct_answers=None, finished_at=None
        )
        page.goto(f"{live_server.url}/jobs/{again.pk}/")
        page.wait_for_function("() => document.getElementById('job-status').textContent === 'running'")
        assert page.locator("#job-cached").inner_text().strip() == "· 5 answers from cache (no cost)"
        assert page.locator("#job-cost").inner_text() == "$0.00"
        assert page.locator("#job-cost-per-correct").inner_text() == "– (not scored)"

        InferenceJob.objects.filter(pk=again.pk).update(**finished)
        page.wait_for_function("() => document.getElementById('job-status').textContent === 'finished'")
        assert page.locator("#job-cached").inner_text().strip() == "· 12 answers from cache (no cost)"
        assert page.locator("#job-cost").inner_text() == "$0.00"
        assert page.locator("#job-cost-per-correct").inner_text() == f"$0.00 ({job.correct_answers} correct)"
        assert page.locator("#job-tokens").inner_text() == "0 in / 0 out"
    finally:
        standin.stop()
