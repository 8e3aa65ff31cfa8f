"""Media on S3-compatible object storage, end to end, through the production code paths against a
real S3-protocol server on loopback (moto's standalone server, in its own process, started by tests/s3_server.py):
imports write to the bucket, /media/ checks permissions then redirects to a presigned URL, workers
copy media into their cache, release exports read from the bucket. Nothing lands under MEDIA_ROOT.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from annotation.importing import items_import
from annotation.importing.samples import write_sample_dataset
from annotation.models import MediaAsset, Role
from annotation.releases import release_export, release_freeze
from tests.s3_server import zipped

pytestmark = pytest.mark.django_db


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


@pytest.fixture
def imported(bucket, make_project, make_user, tmp_path, settings):
    """A status project (images) and an OSCBench project (a video), each imported from a zip."""
    ann = make_user("ann")
    status = make_project("st", "status", members={ann: Role.ANNOTATOR})
    videos = make_project("osc", "oscbench", members={ann: Role.ANNOTATOR})
    write_sample_dataset(tmp_path / "st", "status", 3, distinct=2)
    write_sample_dataset(tmp_path / "osc", "oscbench", 2, distinct=1)
    reports = [
        items_import(project=status, path=zipped(tmp_path / "st", tmp_path / "st.zip"), verified=True),
        items_import(project=videos, path=zipped(tmp_path / "osc", tmp_path / "osc.zip"), verified=True),
    ]
    return {"ann": ann, "status": status, "videos": videos, "reports": reports, "bucket": bucket, "src": tmp_path}


def test_an_import_writes_its_media_to_the_bucket_and_nothing_under_media_root(imported, settings):
    assets = list(MediaAsset.objects.order_by("kind", "file"))
    assert [a.kind for a in assets].count("video") == 1 and [a.kind for a in assets].count("image") >= 2
    stored = imported["bucket"]["objects"]()
    assert sorted(stored) == sorted(a.file.name for a in assets)
    for asset in assets:  # content-addressed: each object's bytes hash to its name
        assert hashlib.sha256(stored[asset.file.name]).hexdigest() == asset.sha256
    video = next(a for a in assets if a.kind == "video")
    assert (video.mime, video.width, video.frame_count > 0) == ("video/mp4", 160, True)  # probed at import
    assert files_under(settings.MEDIA_ROOT) == []


def test_a_member_is_redirected_to_a_presigned_url_that_serves_the_bytes_as_the_recorded_type(
    imported, client, s3_endpoint
):
    stored = imported["bucket"]["objects"]()
    client.force_login(imported["ann"])
    for asset in MediaAsset.objects.all():
        response = client.get(f"/media/{asset.file.name}")
        assert response.status_code == 302
        location = response["Location"]
        assert location.startswith(f"{s3_endpoint}/{imported['bucket']['name']}/{asset.file.name}?")
        assert "X-Amz-Signature=" in location and "X-Amz-Expires=120" in location
        assert response["Cache-Control"] == "private, max-age=60"
        fetched = httpx.get(location)
        assert fetched.status_code == 200
        assert fetched.content == stored[asset.file.name]
        assert fetched.headers["content-type"] == asset.mime
        assert fetched.headers["content-disposition"] == f'inline; filename="{Path(asset.file.name).name}"'
    # The bucket answers Range requests itself (video players seek).
    video = MediaAsset.objects.get(kind="video")
    part = httpx.get(client.get(f"/media/{video.file.name}")["Location"], headers={"Range": "bytes=4-11"})
    assert part.status_code == 206 and part.content == stored[video.file.name][4:12]
    # The response headers are part of what is signed (moto does not check signatures; S3 and MinIO do).
    assert "response-content-type=" in location and "response-content-disposition=" in location


def test_a_non_member_gets_404_and_no_redirect(imported, client, make_user, make_project):
    stranger = make_user("stranger")
    make_project("other", "status", members={stranger: Role.ADMIN})
    client.force_login(stranger)
    for asset in MediaAsset.objects.all():
        response = client.get(f"/media/{asset.file.name}")
        assert response.status_code == 404 and not response.has_header("Location")
    assert client.get("/media/assets/00/missing.png").status_code == 404


def test_a_superuser_gets_other_objects_only_as_an_attachment(imported, client, make_user):
    imported["bucket"]["client"].put_object(
        Bucket=imported["bucket"]["name"],
        Key="exports/note.html",
        Body=b"<script>alert(1)</script>",
        ContentType="text/html",
    )
    client.force_login(make_user("root", superuser=True))
    response = client.get("/media/exports/note.html")
    assert response.status_code == 302
    fetched = httpx.get(response["Location"])
    assert fetched.headers["content-type"] == "application/octet-stream"
    assert fetched.headers["content-disposition"] == 'attachment; filename="media.bin"'
    assert client.get("/media/exports/absent.html").status_code == 404  # no redirect to a missing object


def test_a_worker_reads_media_through_the_storage_into_its_cache(imported, settings):
    from inference.media import MediaError
    from inference.prompting import MediaPreparer
    from inference.services.inputs import media_file

    video = MediaAsset.objects.get(kind="video")
    image = MediaAsset.objects.filter(kind="image").first()
    prep = MediaPreparer(cache_root=settings.CACHE_ROOT, bound=(64, 64), fetch=media_file)

    urls, indices = prep.frames(video.file.name, 3, content_hash=video.sha256)
    assert len(urls) == 3 and all(u.startswith("data:image/jpeg;base64,") for u in urls) and len(indices) == 3
    assert prep.image(image.file.name).startswith("data:image/")
    for asset in (video, image):  # one copy per host, keyed by the content hash in its name
        local = Path(settings.CACHE_ROOT) / "storage" / asset.file.name
        assert hashlib.sha256(local.read_bytes()).hexdigest() == asset.sha256
    # A copy read again is marked used (its mtime: the cache's pruning keeps what is in use).
    local = Path(settings.CACHE_ROOT) / "storage" / image.file.name
    os.utime(local, (1_000_000_000, 1_000_000_000))
    assert media_file(image.file.name) == str(local) and local.stat().st_mtime > 1_000_000_000
    assert files_under(settings.MEDIA_ROOT) == []

    # A missing object, or one whose bytes do not match its name, fails that media only.
    with pytest.raises(MediaError, match="is missing from the media storage"):
        media_file(f"assets/ab/{'ab' * 32}.png")
    bad = f"assets/cd/{'cd' * 32}.png"
    imported["bucket"]["client"].put_object(Bucket=imported["bucket"]["name"], Key=bad, Body=b"other bytes")
    with pytest.raises(MediaError, match="does not hash to its name"):
        media_file(bad)
    assert not (Path(settings.CACHE_ROOT) / "storage" / bad).exists()


@pytest.mark.django_db(transaction=True)
def test_a_job_runs_on_media_from_the_bucket_and_writes_its_exports_there(imported, eager, settings):
    from inference import services
    from inference.models import JobStatus, Prediction

    endpoint = services.endpoint_create(name="Random", backend="random", options={"seed": 1})
    for project, queries in ((imported["status"], 6), (imported["videos"], 1)):
        release = release_freeze(project=project, version="v1")
        job = services.job_create(endpoint=endpoint, project=project, release=release, params={"frames": 2})
        job.refresh_from_db()
        items = release.item_count
        assert (job.status, job.done_queries, job.failed_queries) == (JobStatus.FINISHED, items * queries, 0)
        assert Prediction.objects.filter(job=job, status="ok").count() == items * queries
        stored = imported["bucket"]["objects"]()
        assert b'"queries": %d' % (items * queries) in stored[f"exports/jobs/{job.pk}/results.json"]
        assert len(stored[f"exports/jobs/{job.pk}/samples.jsonl"].splitlines()) == items * queries
    cached = {
        p.relative_to(Path(settings.CACHE_ROOT) / "storage").as_posix()
        for p in files_under(Path(settings.CACHE_ROOT) / "storage")
    }
    assert cached == set(MediaAsset.objects.values_list("file", flat=True))
    assert files_under(settings.MEDIA_ROOT) == []


@pytest.fixture
def video_job(imported, settings, monkeypatch):
    """A prepared-frames job over the bucket's videos, its messages kept from the broker, and the
    CACHE_ROOT of every decode (one per host: each test gives each host its own CACHE_ROOT)."""
    from inference import media, services
    from inference.services import recovery, runs

    for module in (runs, recovery):
        monkeypatch.setattr(module, "enqueue", lambda task, *args, queue=None, tracked_run=None: None)
    decoded = []
    real_extract = media.extract_frames
    monkeypatch.setattr(
        media, "extract_frames", lambda *a, **k: decoded.append(settings.CACHE_ROOT) or real_extract(*a, **k)
    )
    release = release_freeze(project=imported["videos"], version="v1")
    endpoint = services.endpoint_create(name="Random", backend="random", options={"seed": 1})
    job = services.job_create(
        endpoint=endpoint,
        project=imported["videos"],
        release=release,
        start=False,
        params={"frames": 3, "prepare_frames": True, "chunk_size": 10},
    )
    services.job_start(job_id=job.pk)
    ids = list(release.release_items.order_by("position").values_list("item_id", flat=True))
    return {"job": job, "ids": ids, "decoded": decoded, "objects": imported["bucket"]["objects"]}


def test_frames_prepared_on_one_host_reach_a_gpu_worker_on_another_through_the_bucket(
    video_job, settings, tmp_path, monkeypatch
):
    """No folder is shared: the CPU worker that prepares a job's frames and the GPU worker that
    runs its chunk have their own CACHE_ROOT; the chunk still decodes no video."""
    from storages.backends.s3 import S3Storage

    from inference import services
    from inference.models import JobStatus, Prediction

    job, ids, decoded = video_job["job"], video_job["ids"], video_job["decoded"]
    saved = []
    real_save = S3Storage.save
    monkeypatch.setattr(
        S3Storage, "save", lambda self, name, content, **kw: saved.append(name) or real_save(self, name, content, **kw)
    )
    settings.CACHE_ROOT = str(tmp_path / "cpu-host")
    services.job_prepare_frames(job_id=job.pk, item_ids=ids)
    assert decoded == [settings.CACHE_ROOT]  # the one video, on the CPU host
    shared = sorted(k for k in video_job["objects"]() if k.startswith("cache/frames/"))
    assert len(shared) == 4  # three JPEG frames and their list, which is written last
    assert [Path(n).name for n in saved] == ["frame_0000.jpg", "frame_0001.jpg", "frame_0002.jpg", "frames.json"]

    settings.CACHE_ROOT = str(tmp_path / "gpu-host")
    services.job_run_chunk(job_id=job.pk, item_ids=ids)
    assert decoded == [str(tmp_path / "cpu-host")]  # nothing decoded on the GPU host
    job.refresh_from_db()
    assert (job.status, job.done_queries) == (JobStatus.FINISHED, len(ids))
    (listing,) = [p for p in files_under(tmp_path / "cpu-host" / "frames") if p.name == "frames.json"]
    assert {tuple(p.frame_indices["video"]) for p in Prediction.objects.filter(job=job)} == {
        tuple(json.loads(listing.read_text())["indices"])
    }
    gpu_frames = sorted(p.relative_to(tmp_path / "gpu-host") for p in files_under(tmp_path / "gpu-host" / "frames"))
    cpu_frames = sorted(p.relative_to(tmp_path / "cpu-host") for p in files_under(tmp_path / "cpu-host" / "frames"))
    assert gpu_frames == cpu_frames and len(gpu_frames) == 4
    for rel in gpu_frames:  # the same bytes the CPU host wrote
        assert (tmp_path / "gpu-host" / rel).read_bytes() == (tmp_path / "cpu-host" / rel).read_bytes()
    # A second preparation (a retry) finds the entry shared whole and writes nothing.
    saved.clear()
    settings.CACHE_ROOT = str(tmp_path / "cpu-host")
    services.job_prepare_frames(job_id=job.pk, item_ids=ids)
    assert saved == [] and decoded == [str(tmp_path / "cpu-host")]


def test_frames_cached_on_a_host_before_they_were_shared_are_shared_by_the_next_preparation(
    video_job, settings, tmp_path
):
    from django.core.files.storage import default_storage

    from inference import services

    job, ids, decoded = video_job["job"], video_job["ids"], video_job["decoded"]
    settings.CACHE_ROOT = str(tmp_path / "cpu-host")
    services.job_run_chunk(job_id=job.pk, item_ids=ids[:1])  # decoded here, and shared
    for key in [k for k in video_job["objects"]() if k.startswith("cache/")]:
        default_storage.delete(key)  # (entries cached before frames were shared, say)
    services.job_prepare_frames(job_id=job.pk, item_ids=ids)  # a local hit: shared again
    assert decoded == [settings.CACHE_ROOT]
    assert len([k for k in video_job["objects"]() if k.startswith("cache/frames/")]) == 4


@pytest.mark.parametrize(
    "listing",
    [
        {"files": ["../../../../escape.jpg"], "indices": [0], "size": [8, 8], "source_frames": 9},
        {"files": [], "indices": [], "size": [8, 8], "source_frames": 9},
        {"files": ["frame_0000.jpg"], "size": [8, 8], "source_frames": 9},
        ["frame_0000.jpg"],
    ],
)
def test_a_bad_shared_frame_listing_is_ignored_and_the_frames_decoded(video_job, settings, tmp_path, listing, caplog):
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    from inference import services
    from inference.models import JobStatus

    job, ids, decoded = video_job["job"], video_job["ids"], video_job["decoded"]
    settings.CACHE_ROOT = str(tmp_path / "cpu-host")
    services.job_prepare_frames(job_id=job.pk, item_ids=ids)
    (marker,) = [k for k in video_job["objects"]() if k.endswith("/frames.json")]
    default_storage.delete(marker)
    default_storage.save(marker, ContentFile(json.dumps(listing).encode()))

    settings.CACHE_ROOT = str(tmp_path / "gpu-host")
    services.job_run_chunk(job_id=job.pk, item_ids=ids)
    assert decoded == [str(tmp_path / "cpu-host"), str(tmp_path / "gpu-host")]  # decoded again, not trusted
    assert "not read from the storage" in caplog.text
    job.refresh_from_db()
    assert (job.status, job.done_queries) == (JobStatus.FINISHED, len(ids))
    assert not (tmp_path / "escape.jpg").exists() and not list(tmp_path.rglob("escape.jpg"))


def test_a_release_zip_export_carries_the_media_bytes_from_the_bucket(imported):
    stored = imported["bucket"]["objects"]()
    for project in (imported["status"], imported["videos"]):
        release = release_freeze(project=project, version="v1")
        with zipfile.ZipFile(io.BytesIO(b"".join(release_export(release, "zip")))) as zf:
            media = [n for n in zf.namelist() if n not in ("release.json", "items.jsonl")]
            assert media
            for name in media:  # the export names media as the import did; the bytes are the bucket's
                source = imported["src"] / project.slug / name
                assert zf.read(name) == source.read_bytes()
                assert hashlib.sha256(zf.read(name)).hexdigest() + Path(name).suffix in {Path(k).name for k in stored}


def test_an_upload_is_staged_in_the_bucket_for_a_worker_on_another_host(
    bucket, make_project, make_user, tmp_path, settings
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from annotation.importing.runs import import_run_execute, import_run_queue
    from annotation.models import ImportRun
    from background.models import RunStatus

    project = make_project("up", "status")
    write_sample_dataset(tmp_path / "up", "status", 2, distinct=1)
    upload = SimpleUploadedFile("bundle.zip", zipped(tmp_path / "up", tmp_path / "up.zip").read_bytes())

    run = import_run_queue(project=project, user=make_user("res"), uploaded=upload)  # queued: sent on commit

    assert run.staged_path.startswith("storage:uploads/upload-") and run.staged_path.endswith(".zip")
    assert bucket["objects"]()[run.staged_path.removeprefix("storage:")] == upload.open().read()
    assert files_under(Path(settings.CACHE_ROOT)) == []  # nothing left on the web host
    assert import_run_execute(run.pk) == RunStatus.FINISHED  # what the worker's task runs
    run = ImportRun.objects.get(pk=run.pk)
    assert (run.report["created"], run.staged_path) == (2, "")
    assert sorted(bucket["objects"]()) == sorted(MediaAsset.objects.values_list("file", flat=True))  # upload gone
    assert files_under(Path(settings.CACHE_ROOT)) == [] and files_under(settings.MEDIA_ROOT) == []


def test_the_presigned_url_can_be_signed_for_the_address_browsers_use(imported, client, settings, s3_endpoint):
    # compose: servers reach MinIO as http://minio:9000, browsers as http://localhost:9000.
    settings.MEDIA_STORAGE_PUBLIC_ENDPOINT = s3_endpoint.replace("127.0.0.1", "localhost")
    client.force_login(imported["ann"])
    asset = MediaAsset.objects.filter(kind="image").first()
    location = client.get(f"/media/{asset.file.name}")["Location"]
    assert urlsplit(location).netloc == urlsplit(settings.MEDIA_STORAGE_PUBLIC_ENDPOINT).netloc
    assert httpx.get(location).content == imported["bucket"]["objects"]()[asset.file.name]


def test_pages_allow_the_bucket_origin_and_a_storage_that_cannot_sign_takes_no_page_down(
    imported, client, settings, s3_endpoint, caplog
):
    from config.csp import PAGE_HEADER

    client.force_login(imported["ann"])
    policy = client.get("/")["Content-Security-Policy"]
    assert f"img-src 'self' data: blob: {s3_endpoint};" in policy and f"media-src 'self' blob: {s3_endpoint};" in policy
    # A deployment whose storage options are wrong: /media/ cannot work, but every page still
    # answers, with the strict policy, and the error is logged.
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": {"bucket_name": "b", "no_such_option": 1}},
    }
    response = client.get("/")
    assert response.status_code == 200 and response["Content-Security-Policy"] == PAGE_HEADER
    assert "media storage cannot sign URLs" in caplog.text
