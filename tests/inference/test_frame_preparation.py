"""Frames prepared off the GPU path (inference.services.frames): prepare runs on the default
queue before a video job's chunks, chunks that decode nothing, the warning and count when frames
are missing anyway, a failed preparation that still sends its chunk, keyframe mode's recorded
positions, and the order of the queues with real Celery workers."""

import logging

import pytest

from background.claim import run_claim
from background.models import RunStatus
from inference import media, services
from inference.models import Backend, BackgroundRun, InferenceJob, JobStatus, ModelEndpoint, Prediction
from inference.services import frames, recovery, runs

from . import factories
from .worker import start_worker, stop_worker, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

PREPARE, API_CHUNK = "inference.tasks.prepare_frames", "inference.tasks.run_api_chunk"


def _random():
    return ModelEndpoint.objects.filter(name="Random").first() or services.endpoint_create(
        name="Random", backend="random", options={"seed": 0}
    )


def osc_job(make_project, tmp_path, *, n_items=4, start=True, slug="osc", **params):
    project = make_project(slug, "oscbench")
    items = factories.oscbench_items(project, n_items, tmp_path)
    params = {"frames": 3, "chunk_size": 2, "prepare_frames": True, **params}
    job = services.job_create(
        endpoint=_random(), project=project, release=factories.release_of(project, items), params=params, start=start
    )
    return job, items


@pytest.fixture
def sent(monkeypatch):
    messages = []
    monkeypatch.setattr(
        runs, "enqueue", lambda task, *args, queue=None, tracked_run=None: messages.append((task, args, queue))
    )
    monkeypatch.setattr(
        recovery, "enqueue", lambda task, *args, queue=None, tracked_run=None: messages.append((task, args, queue))
    )
    return messages


@pytest.fixture
def decodes(monkeypatch):
    """Calls of the one frame decoder (media.extract_frames), by phase: preparing or in a chunk."""
    calls, phase = [], ["prepare"]
    real_extract, real_chunk = media.extract_frames, services.job_run_chunk

    def extract(*args, **kwargs):
        calls.append(phase[0])
        return real_extract(*args, **kwargs)

    def chunk(**kwargs):
        phase[0] = "chunk"
        try:
            return real_chunk(**kwargs)
        finally:
            phase[0] = "prepare"

    monkeypatch.setattr(media, "extract_frames", extract)
    monkeypatch.setattr(services, "job_run_chunk", chunk)
    return calls


def test_video_jobs_on_the_gpu_queue_prepare_frames_by_default(db):
    vllm, api = ModelEndpoint(backend=Backend.VLLM), ModelEndpoint(backend=Backend.OPENAI)
    assert services.job_prepares_frames(InferenceJob(endpoint=vllm, protocol="oscbench", params={}))
    assert services.job_prepares_frames(InferenceJob(endpoint=vllm, protocol="m3verse", params={}))
    assert not services.job_prepares_frames(InferenceJob(endpoint=vllm, protocol="status", params={}))
    assert not services.job_prepares_frames(InferenceJob(endpoint=api, protocol="oscbench", params={}))
    assert services.job_prepares_frames(
        InferenceJob(endpoint=api, protocol="oscbench", params={"prepare_frames": True})
    )
    assert not services.job_prepares_frames(
        InferenceJob(endpoint=vllm, protocol="m3verse", params={"prepare_frames": False})
    )


def test_bad_frame_params_are_refused(make_project, tmp_path):
    for i, params in enumerate(({"frames_mode": "fastest"}, {"prepare_frames": "yes"})):
        with pytest.raises(services.JobRefused):
            osc_job(make_project, tmp_path, start=False, slug=f"osc{i}", **params)


def test_start_sends_prepare_runs_to_the_default_queue_and_each_sends_its_chunk_once(make_project, tmp_path, sent):
    job, items = osc_job(make_project, tmp_path, start=False)
    services.job_start(job_id=job.pk)
    ids = [it.pk for it in items]
    assert sent == [(PREPARE, (job.pk, ids[:2]), "default"), (PREPARE, (job.pk, ids[2:]), "default")]
    assert not BackgroundRun.objects.filter(job=job, celery_task=API_CHUNK).exists()

    sent.clear()
    assert services.job_prepare_frames(job_id=job.pk, item_ids=ids[:2]) == 1  # one video, shared by the items
    assert sent == [(API_CHUNK, (job.pk, ids[:2]), None)]
    assert (
        services.job_prepare_frames(job_id=job.pk, item_ids=ids[:2]) == 0
    )  # again (a lost worker): cached, not resent
    assert len(sent) == 1
    chunk = BackgroundRun.objects.get(job=job, celery_task=API_CHUNK)
    assert chunk.chunk_index == 2 and chunk.queue == "api"

    frames.chunks_enqueue(job=job, chunks=[ids[:2]])  # "retry failed" prepares these items again...
    services.job_prepare_frames(job_id=job.pk, item_ids=ids[:2])
    assert sent[1:] == [(PREPARE, (job.pk, ids[:2]), "default"), (API_CHUNK, (job.pk, ids[:2]), None)]  # ...and resends


def test_in_the_normal_flow_chunks_decode_nothing(make_project, tmp_path, eager, decodes):
    job, items = osc_job(make_project, tmp_path)
    job.refresh_from_db()
    assert (job.status, job.done_queries) == (JobStatus.FINISHED, 4)
    assert decodes == ["prepare"]  # the shared video, once, by the first prepare run
    runs_by_task = {
        t: list(BackgroundRun.objects.filter(job=job, celery_task=t).order_by("chunk_index"))
        for t in (PREPARE, API_CHUNK)
    }
    assert [r.status for r in runs_by_task[PREPARE] + runs_by_task[API_CHUNK]] == [RunStatus.FINISHED] * 4
    assert {r.queue for r in runs_by_task[PREPARE]} == {"default"}
    assert Prediction.objects.get(job=job, item=items[0]).frame_indices == {"video": [1, 5, 8]}


def test_a_vllm_m3verse_job_prepares_on_the_default_queue_and_its_gpu_chunks_decode_nothing(
    make_project, tmp_path, eager, decodes, monkeypatch
):
    from inference.backends.random_backend import RandomBackend
    from inference.services import chunks, jobs

    # vLLM is not installed here: the gpu chunks answer with the Random backend, on the gpu path.
    monkeypatch.setattr(jobs, "check_available", lambda endpoint: None)
    monkeypatch.setattr(chunks, "get_backend", lambda endpoint: RandomBackend(seed=0))
    project = make_project("m3", "m3verse")
    items = factories.m3verse_items(project, 3, tmp_path)
    endpoint = services.endpoint_create(name="qwen", backend="vllm", model_id="Qwen/Qwen2-VL-2B-Instruct")
    job = services.job_create(
        endpoint=endpoint,
        project=project,
        release=factories.release_of(project, items),
        params={"frames": 4, "chunk_size": 2},
    )
    job.refresh_from_db()
    assert (job.status, job.done_queries) == (JobStatus.FINISHED, 3)
    assert decodes == ["prepare", "prepare"]  # the before and after videos, once each, off the gpu path
    tasks = list(
        BackgroundRun.objects.filter(job=job, chunk_index__isnull=False)
        .order_by("chunk_index")
        .values_list("celery_task", "queue", "status")
    )
    assert (
        tasks
        == [(PREPARE, "default", RunStatus.FINISHED)] * 2
        + [("inference.tasks.run_gpu_chunk", "gpu", RunStatus.FINISHED)] * 2
    )


def test_a_chunk_without_prepared_frames_decodes_them_warns_and_counts(make_project, tmp_path, sent, decodes, caplog):
    job, items = osc_job(make_project, tmp_path, start=False)
    services.job_start(job_id=job.pk)
    with caplog.at_level(logging.WARNING, logger="inference.services.chunks"):
        services.job_run_chunk(job_id=job.pk, item_ids=[items[0].pk, items[1].pk])
    assert decodes == ["chunk"]
    assert f"job {job.pk}: 1 video(s) of this chunk had no prepared frames" in caplog.text
    assert Prediction.objects.filter(job=job, status="ok").count() == 2


def test_a_prepare_run_that_failed_for_good_still_sends_its_chunk(make_project, tmp_path, sent):
    job, items = osc_job(make_project, tmp_path, start=False)
    services.job_start(job_id=job.pk)
    prepare = BackgroundRun.objects.filter(job=job, celery_task=PREPARE).order_by("chunk_index").first()
    run = run_claim(BackgroundRun, run_id=prepare.pk, worker="w")
    sent.clear()
    recovery.run_failed(run=run, reason="worker lost 3 times")
    assert sent == [(API_CHUNK, (job.pk, [items[0].pk, items[1].pk]), None)]


def test_keyframe_mode_records_the_keyframes_it_used(make_project, tmp_path, eager):
    project = make_project("osc", "oscbench")
    items = factories.oscbench_items(project, 2, tmp_path)
    # 3 s at 10 fps with a keyframe every 5 frames.
    video = factories.asset(
        media.make_test_video(tmp_path / "gop5.mp4", seconds=3, size="64x48", rate=10, gop=5), "video"
    )
    for item in items:
        item.media = {"video": video.sha256}
        item.save()
    job = services.job_create(
        endpoint=_random(),
        project=project,
        release=factories.release_of(project, items),
        params={"frames": 4, "frames_mode": "keyframe", "prepare_frames": True},
    )
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED
    # Exact positions would be [3, 11, 18, 26]; the nearest keyframes are what the model saw.
    assert {tuple(p.frame_indices["video"]) for p in Prediction.objects.filter(job=job)} == {(5, 10, 20, 25)}


@pytest.mark.worker
@pytest.mark.slow
def test_with_real_workers_chunks_wait_in_their_queue_until_the_cpu_worker_prepared_their_frames(
    broker, make_project, tmp_path, settings
):
    job, items = osc_job(make_project, tmp_path, n_items=6)
    cpu = start_worker("cpu", tmp_path / "cpu.log", queues="default")
    api = None
    try:
        # Only the default queue is consumed: the start and the prepare runs finish, the chunks wait.
        wait_for(
            lambda: (
                BackgroundRun.objects.filter(job=job, celery_task=API_CHUNK).count() == 3
                and not BackgroundRun.objects.filter(job=job, celery_task=PREPARE)
                .exclude(status=RunStatus.FINISHED)
                .exists()
            ),
            90,
            "the prepare runs to finish and send the chunks",
        )
        queued = BackgroundRun.objects.filter(job=job, celery_task=API_CHUNK).values_list("status", flat=True)
        assert set(queued) == {RunStatus.QUEUED}
        sha = items[0].media["video"]
        assert media.frames_cached(settings.CACHE_ROOT, sha, 3, media.DEFAULT_BOUND)

        api = start_worker("api", tmp_path / "api.log", queues="api")
        wait_for(lambda: InferenceJob.objects.get(pk=job.pk).status == JobStatus.FINISHED, 90, "the job to finish")
        prepared_by = set(BackgroundRun.objects.filter(job=job, celery_task=PREPARE).values_list("worker", flat=True))
        chunked_by = set(BackgroundRun.objects.filter(job=job, celery_task=API_CHUNK).values_list("worker", flat=True))
        assert all(w.startswith("cpu@") for w in prepared_by) and all(w.startswith("api@") for w in chunked_by)
        first_chunk = min(
            BackgroundRun.objects.filter(job=job, celery_task=API_CHUNK).values_list("started_at", flat=True)
        )
        last_prepare = max(
            BackgroundRun.objects.filter(job=job, celery_task=PREPARE).values_list("finished_at", flat=True)
        )
        assert first_chunk > last_prepare
    finally:
        stop_worker(cpu)
        if api is not None:
            stop_worker(api)
    assert "had no prepared frames" not in (tmp_path / "api.log").read_text()
    assert InferenceJob.objects.get(pk=job.pk).done_queries == 6
