"""An import run's progress: how far the worker has read its file, written to the run's row from a
thread of the worker once a second, so that other connections (the API, the run's page) see it
while the import's own transaction is still open; at the end it is the whole file.

The import runs as a worker runs it (`import_run_execute` with its heartbeat and progress
threads, production intervals) in a thread of the test, held in the middle of its file by
wrapping a real function of the importer (db_race.Pause): no sleep decides what is seen.
"""

from __future__ import annotations

import json
import time
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from annotation.importing import annotations as annotation_importer
from annotation.importing import items as item_importer
from annotation.importing import items_import, runs
from annotation.importing.runs import import_media_root, import_run_execute, import_run_queue
from annotation.importing.samples import sample_line, sample_media_paths, write_sample_dataset, write_sample_media
from annotation.importing.sources import ReadMeter, open_source
from annotation.models import Annotation, ImportKind, ImportRun, Item, Role
from background.models import RunStatus

from .db_race import WAIT_S, Pause, Worker

pytestmark = pytest.mark.django_db(transaction=True)  # the worker's threads read committed rows

LINES = 4000  # 740 KB of JSONL: many of the meter's 64 KiB reads
SCORES = {
    "subject": 4,
    "object": 5,
    "action": 3,
    "osc_accuracy": 2,
    "osc_consistency": 3,
    "scene": None,
    "realism": 4,
    "aesthetics": 5,
}


class PauseWhen(Pause):
    """db_race.Pause that stops at the first call for which `when(*args, **kwargs)` holds."""

    def __init__(self, real, when):
        super().__init__(real)
        self.when = when

    def __call__(self, *args, **kwargs):
        if self.first and not self.when(*args, **kwargs):
            return self.real(*args, **kwargs)
        return super().__call__(*args, **kwargs)


@pytest.fixture
def researcher(make_user, client):
    user = make_user("res")
    client.force_login(user)
    return user


def queue(monkeypatch, project, user, name: str, body: bytes, kind: str = ImportKind.ITEMS) -> ImportRun:
    """The run as the upload page or API records it; the task is not sent: the test is the worker."""
    monkeypatch.setattr(runs, "enqueue_on_commit", lambda *args: None)
    return import_run_queue(project=project, user=user, uploaded=SimpleUploadedFile(name, body), kind=kind)


def work(run: ImportRun) -> Worker:
    """What the worker's task runs (annotation.tasks.run_import, not eager), in a thread."""
    worker = Worker(lambda: import_run_execute(run.pk, worker="test@host", heartbeat=True))
    worker.start()
    return worker


def written_progress(run: ImportRun) -> tuple[int, int]:
    """Wait (bounded) until the worker's progress thread has written a count; (bytes, total)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        row = ImportRun.objects.values_list("status", "progress_bytes", "progress_total").get(pk=run.pk)
        if row[1]:
            assert row[0] == RunStatus.RUNNING
            return row[1], row[2]
        time.sleep(0.05)
    raise AssertionError("no progress written while the import was held")


def through_line(body: bytes, n: int) -> int:
    """Bytes of `body` up to the end of its line `n`."""
    return len(b"".join(body.splitlines(keepends=True)[:n]))


def items_body(n: int) -> bytes:
    write_sample_media(import_media_root(), "changeit")
    return "".join(
        json.dumps(sample_line("changeit", i, media=sample_media_paths("changeit", i))) + "\n" for i in range(n)
    ).encode()


def test_progress_is_seen_mid_file_by_other_connections_and_reaches_the_end(
    make_project, researcher, client, monkeypatch
):
    project = make_project("big", "changeit", members={researcher: Role.RESEARCHER})
    body = items_body(LINES)
    run = queue(monkeypatch, project, researcher, "items.jsonl", body)
    middle = f"changeit-{LINES // 2:05d}"
    pause = PauseWhen(item_importer.check_item, lambda protocol, obj, **kw: obj.get("id") == middle)
    monkeypatch.setattr(item_importer, "check_item", pause)
    worker = work(run)
    try:
        assert pause.reached.wait(WAIT_S), "the import never reached the middle of its file"
        done, total = written_progress(run)
        # One pass over a JSONL: the staged file itself, read through the middle line (one read ahead at most).
        assert total == len(body) == run.file_bytes
        read_through = through_line(body, LINES // 2 + 1)
        assert read_through <= done <= read_through + ReadMeter.BUFFER < total
        assert not Item.objects.filter(project=project).exists()  # its rows: in the COPY's open transaction

        answer = client.get(f"/api/imports/{run.pk}/").json()
        assert (answer["status"], answer["progress_bytes"], answer["progress_total"]) == ("running", done, total)
        assert 0 < answer["progress"] < 1 and answer["progress"] == round(done / total, 4)
        page = client.get(f"/projects/big/imports/{run.pk}/").content.decode()
        assert f'<progress id="run-progress" max="{total}" value="{done}"></progress>' in page
        assert f'<span id="run-percent">{round(100 * done / total)} %</span>' in page
    finally:
        pause.released.set()
        assert worker.done.wait(WAIT_S), "the import hung"
    assert (worker.error, worker.result) == (None, RunStatus.FINISHED)
    run.refresh_from_db()
    assert (run.progress_bytes, run.progress_total) == (len(body), len(body))
    assert Item.objects.filter(project=project).count() == LINES
    answer = client.get(f"/api/imports/{run.pk}/").json()
    assert (answer["status"], answer["progress"]) == ("finished", 1.0)
    assert "run-progress" not in client.get(f"/projects/big/imports/{run.pk}/").content.decode()


def test_annotation_progress_is_seen_during_the_write_pass_inside_its_transaction(
    make_project, researcher, client, monkeypatch, tmp_path
):
    """Annotations are read twice (validate, then write in one transaction on the importing
    connection): held in the second pass, the count is past half and nothing is committed."""
    project = make_project("osc", "oscbench", members={researcher: Role.RESEARCHER})
    items_import(project=project, path=write_sample_dataset(tmp_path / "d", "oscbench", 4))
    body = "".join(
        json.dumps({"item": f"oscbench-{i % 4:05d}", "rater": f"r{i // 4}", "scores": SCORES}) + "\n"
        for i in range(LINES)
    ).encode()
    run = queue(monkeypatch, project, researcher, "ratings.jsonl", body, kind=ImportKind.ANNOTATIONS)
    calls = iter(range(1, 2 * LINES + 1))
    pause = PauseWhen(annotation_importer._check_line, lambda *args: next(calls) == LINES + LINES // 2)
    monkeypatch.setattr(annotation_importer, "_check_line", pause)
    worker = work(run)
    try:
        assert pause.reached.wait(WAIT_S), "the import never reached the middle of its write pass"
        done, total = written_progress(run)
        assert total == 2 * len(body)
        first_pass_and_half = len(body) + through_line(body, LINES // 2)
        assert first_pass_and_half <= done <= first_pass_and_half + ReadMeter.BUFFER < total
        assert not Annotation.objects.exists()  # the first chunk is written, not committed
        assert client.get(f"/api/imports/{run.pk}/").json()["progress"] == round(done / total, 4)
    finally:
        pause.released.set()
        assert worker.done.wait(WAIT_S), "the import hung"
    assert (worker.error, worker.result) == (None, RunStatus.FINISHED)
    assert Annotation.objects.count() == LINES
    assert client.get(f"/api/imports/{run.pk}/").json()["progress"] == 1.0


def test_a_zip_is_measured_by_its_items_member_and_only_the_passes_are_counted(tmp_path):
    lines = write_sample_dataset(tmp_path / "d", "changeit", 50)
    archive = tmp_path / "items.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(lines, "items.jsonl")
        for image in (tmp_path / "d" / "img").iterdir():
            zf.write(image, f"img/{image.name}")
    size = lines.stat().st_size
    source = open_source(archive, max_bytes=1 << 20)  # recognising the file reads it: not counted
    meter = ReadMeter()
    source.follow(meter, passes=2)
    assert (meter.done, meter.total) == (0, 2 * size)
    assert sum(1 for _ in source.lines()) == 50 and meter.done == size
    assert sum(1 for _ in source.lines()) == 50 and meter.done == meter.total
    source.close()


def test_a_json_document_is_counted_as_it_is_parsed(tmp_path):
    lines = write_sample_dataset(tmp_path, "changeit", 50)
    document = tmp_path / "release.json"
    items = [json.loads(text) for text in lines.read_text().splitlines()]
    document.write_text(json.dumps({"protocol": "changeit", "items": items}, indent=2))
    source = open_source(document, max_bytes=1 << 20)
    meter = ReadMeter()
    source.follow(meter, passes=1)
    assert source.format == "json" and sum(1 for _ in source.lines()) == 50
    assert meter.done == meter.total == document.stat().st_size


def test_a_refused_run_keeps_how_far_it_read_and_a_queued_one_has_no_progress(
    make_project, researcher, client, monkeypatch
):
    project = make_project("p", "changeit", members={researcher: Role.RESEARCHER})
    body = items_body(10) + b'{"id": "bad"}\n'
    run = queue(monkeypatch, project, researcher, "items.jsonl", body)
    answer = client.get(f"/api/imports/{run.pk}/").json()
    assert (answer["status"], answer["progress"], answer["progress_bytes"], answer["progress_total"]) == (
        "queued",
        None,
        0,
        0,
    )
    assert import_run_execute(run.pk) == RunStatus.REFUSED  # eager mode: no threads, the count at the end
    answer = client.get(f"/api/imports/{run.pk}/").json()
    assert (answer["progress"], answer["progress_bytes"], answer["progress_total"]) == (1.0, len(body), len(body))


def test_a_claim_starts_the_count_again(make_project, researcher, monkeypatch):
    """A run re-queued after its worker was lost is read from the start by the next worker."""
    project = make_project("p", "changeit", members={researcher: Role.RESEARCHER})
    run = queue(monkeypatch, project, researcher, "items.jsonl", items_body(10))
    ImportRun.objects.filter(pk=run.pk).update(progress_bytes=1000, progress_total=2000, attempts=1)
    pause = Pause(item_importer.check_item)
    monkeypatch.setattr(item_importer, "check_item", pause)
    worker = Worker(lambda: import_run_execute(run.pk))  # eager: no progress thread writes meanwhile
    worker.start()
    try:
        assert pause.reached.wait(WAIT_S)
        assert ImportRun.objects.values_list("attempts", "progress_bytes", "progress_total").get(pk=run.pk) == (2, 0, 0)
    finally:
        pause.released.set()
        assert worker.done.wait(WAIT_S)
    assert worker.result == RunStatus.FINISHED


def test_a_run_the_watchdog_queues_again_shows_no_progress(make_project, researcher, client, monkeypatch):
    """Its worker was lost mid-file: queued again, it has read nothing yet (not the lost count)."""
    from datetime import timedelta

    from django.utils import timezone

    from background.heartbeat import lapse_seconds

    project = make_project("p", "changeit", members={researcher: Role.RESEARCHER})
    run = queue(monkeypatch, project, researcher, "items.jsonl", items_body(10))
    monkeypatch.setattr(runs, "enqueue", lambda *args: None)  # (the test is the broker)
    lapsed = timezone.now() - timedelta(seconds=lapse_seconds() + 1)
    ImportRun.objects.filter(pk=run.pk).update(
        status=RunStatus.RUNNING, attempts=1, heartbeat_at=lapsed, progress_bytes=600, progress_total=1000
    )
    assert client.get(f"/api/imports/{run.pk}/").json()["progress"] == 0.6
    assert runs.import_runs_watch()["requeued"] == 1
    answer = client.get(f"/api/imports/{run.pk}/").json()
    assert (answer["status"], answer["progress"], answer["progress_bytes"]) == ("queued", None, 0)
