"""The multi-stage strategy: captions per clip, a summary per video, an answer from text."""

import pytest

from inference import services
from inference.models import JobStatus, Prediction

from . import factories
from .openai_standin import StandIn

pytestmark = pytest.mark.django_db(transaction=True)


def test_multistage_m3verse_job_asks_captions_summaries_then_answers_from_text(eager, make_project, tmp_path):
    standin = StandIn(faults=False).start()
    try:
        project = make_project("m3", "m3verse")
        items = factories.m3verse_items(project, 3, tmp_path)
        endpoint = services.endpoint_create(
            name="s", backend="openai", model_id="m", base_url=standin.base_url, options={"timeout": 5}
        )
        job = services.job_create(
            endpoint=endpoint,
            project=project,
            release=factories.release_of(project, items),
            params={"strategy": "multistage", "frames": 4, "clips": 2},
        )
        job.refresh_from_db()
        assert job.status == JobStatus.FINISHED and job.prompt_version == "m3verse-v1+multistage-v1"
        # 3 items x (2 videos x 2 clip captions + 2 summaries + 1 answer)
        assert len(standin.log) == 21
        preds = list(Prediction.objects.filter(job=job).order_by("item_id"))
        assert [p.query for p in preds] == ["qa", "qa", "qa"] and {p.status for p in preds} == {"ok"}
        for p in preds:
            assert "<image" not in p.prompt and "Summary of the video BEFORE the change:" in p.prompt
            assert p.frame_indices == {"video_before": [2, 7, 12, 17], "video_after": [3, 11, 18, 26]}
            assert p.attempts == 7 and p.completion_tokens >= 7
        assert "Exactly one option is correct." in preds[0].prompt
        assert "One or more options may be correct." in preds[1].prompt
        assert preds[0].answer in (["A"], ["B"], ["C"], ["D"])
    finally:
        standin.stop()


def test_multistage_is_refused_for_image_protocols(make_project):
    project = make_project("st", "status")
    endpoint = services.endpoint_create(name="r", backend="random")
    with pytest.raises(services.JobRefused):
        services.job_create(endpoint=endpoint, project=project, params={"strategy": "multistage"}, start=False)
