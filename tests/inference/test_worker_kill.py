"""A real Celery worker is SIGKILLed in the middle of a job; a second worker finishes it exactly."""
import os
import signal
import subprocess
import time

import pytest

from inference import services
from inference.models import InferenceJob, JobStatus, Prediction

from . import factories
from .openai_standin import StandIn
from .worker import broker, start_worker, stop_worker, wait_for  # noqa: F401 (broker is a fixture)

pytestmark = [pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_killed_worker_mid_job_then_new_worker_completes_exactly_once(broker, make_project, tmp_path):
    standin = StandIn(latency=0.25, faults=False).start()
    workers: list[subprocess.Popen] = []
    try:
        project = make_project("vt", "visualtrans")
        items = factories.visualtrans_items(project, 40, tmp_path)
        endpoint = services.endpoint_create(name="slow", backend="openai", model_id="m", base_url=standin.base_url,
                                            concurrency=2, options={"timeout": 5, "max_retries": 1, "slot_ttl": 3})
        job = services.job_create(endpoint=endpoint, project=project, release=factories.release_of(project, items),
                                  params={"chunk_size": 4})

        workers.append(start_worker("first", tmp_path / "w1.log"))
        wait_for(lambda: InferenceJob.objects.get(pk=job.pk).done_queries >= 8, 90, "the first worker to make progress")
        os.killpg(workers[0].pid, signal.SIGKILL)  # the worker and its pool child, no goodbye
        workers[0].wait(10)
        at_kill = InferenceJob.objects.get(pk=job.pk)
        requests_at_kill = len(standin.log)
        assert at_kill.status == JobStatus.RUNNING and 8 <= at_kill.done_queries < 40

        time.sleep(2.5)  # past the visibility timeout
        workers.append(start_worker("second", tmp_path / "w2.log"))
        # The killed worker's in-flight slots (shared through Redis) lapse after slot_ttl; then the
        # second worker takes them.
        wait_for(lambda: InferenceJob.objects.get(pk=job.pk).status == JobStatus.FINISHED, 120, "the job to finish")
        assert standin.max_in_flight <= 2

        job.refresh_from_db()
        rows = list(Prediction.objects.filter(job=job).values_list("item_id", "query", "status"))
        assert len(rows) == 40
        assert sorted((i, q) for i, q, _ in rows) == sorted((it.pk, "qa") for it in items)
        assert {s for _, _, s in rows} == {"ok"}
        assert (job.total_queries, job.done_queries, job.failed_queries) == (40, 40, 0)
        # Only the not-yet-stored queries were asked after the kill.
        assert len(standin.log) - requests_at_kill <= 40 - at_kill.done_queries + 4
    finally:
        for w in workers:
            stop_worker(w)
        standin.stop()
