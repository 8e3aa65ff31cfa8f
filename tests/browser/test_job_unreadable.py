"""A researcher watches a judge job on its page: the failed queries and the judge replies that
stayed unreadable JSON are listed apart, each under its own heading with its count, as the page's
script renders them from the progress API (a real Celery worker runs the job against the local
OpenAI-compatible stand-in)."""

import re

import pytest

from annotation.models import Membership, Role
from inference import services
from inference.models import JobStatus, Prediction, PredictionStatus
from tests.inference import factories
from tests.inference.openai_standin import StandIn, four_judge_outcomes
from tests.inference.worker import start_worker, stop_worker

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def _rows(page, table: str) -> list[list[str]]:
    return page.eval_on_selector_all(
        f"#{table} tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )


def test_job_page_lists_unreadable_judge_replies_apart_from_failed_queries(
    page, login, live_server, make_user, make_project, broker, tmp_path
):
    standin = StandIn(latency=0.1, rule=four_judge_outcomes).start()
    worker = start_worker("browser", tmp_path / "worker.log")
    try:
        researcher = make_user("res")
        project = make_project("osc", "oscbench")
        Membership.objects.create(project=project, user=researcher, role=Role.RESEARCHER)
        items = factories.oscbench_items(project, 12, tmp_path)
        endpoint = services.endpoint_create(
            name="standin-judge",
            backend="openai",
            model_id="m",
            base_url=standin.base_url,
            concurrency=2,
            options={"timeout": 10, "max_retries": 2},
        )
        job = services.job_create(
            endpoint=endpoint,
            project=project,
            release=factories.release_of(project, items),
            params={"frames": 4, "chunk_size": 3},
        )

        login(page, "res")
        page.goto(f"{live_server.url}/jobs/{job.pk}/")
        # The rate is written by the page's script only: once it shows with the status finished, the
        # tables below are its rendering of the last progress answer (the finished job's), not just
        # the server's first page (which already says finished when the job ended before it loaded).
        page.wait_for_function(
            """() => document.getElementById('job-status').textContent === 'finished'
            && /^\\d+\\.\\d\\d queries\\/s$/.test(document.getElementById('job-rate').textContent)""",
            timeout=120_000,
        )
        assert re.fullmatch(r"\d+\.\d\d queries/s", page.locator("#job-rate").inner_text())

        job.refresh_from_db()
        assert job.status == JobStatus.FINISHED
        preds = Prediction.objects.filter(job=job).select_related("item").order_by("item_id")
        failed = [p for p in preds if p.status == PredictionStatus.FAILED]
        unreadable = [p for p in preds if p.status == PredictionStatus.OK and p.answer is None]
        assert failed and unreadable, "the rule gives some of 12 judge queries each outcome"
        assert page.locator("#job-counts").inner_text() == f"{12 - len(failed)} done, {len(failed)} failed of 12"

        assert (
            page.locator("h2", has=page.locator("#job-failed-count")).inner_text() == f"Failed queries ({len(failed)})"
        )
        assert _rows(page, "job-failures") == [
            [p.item.external_id, "judge", str(p.attempts), "HTTP 500: internal error (after 3 attempts)"]
            for p in failed
        ]

        heading = page.locator("h2", has=page.locator("#job-unreadable-count"))
        assert heading.inner_text() == f"Unreadable replies ({len(unreadable)})"
        assert _rows(page, "job-unreadable") == [
            [p.item.external_id, "judge", str(p.attempts), str(p.json_repairs), p.error, p.raw_output[:200]]
            for p in unreadable
        ]
        assert {p.error for p in unreadable} <= {
            "judge reply not valid JSON after 2 repairs",
            "judge reply not valid JSON after 1 repair; the last repair request failed: HTTP 500: internal error "
            "(after 3 attempts)",
        }
        assert page.locator("#job-unreadable-more").is_hidden()
    finally:
        stop_worker(worker)
        standin.stop()
