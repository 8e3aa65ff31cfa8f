"""The one background-run machinery (background/): every table of runs shares its states and
fields, Celery beat's watchdog recovers every table that settings name, the package names no app,
and the runs recorded before the vocabulary was one keep their meaning.

The claim, heartbeat and watchdog bounds themselves are tested on each table: a job's runs in
tests/inference/test_runs.py and test_worker_kill.py, imports in tests/annotation/test_import_progress.py.
"""

import ast
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from annotation.importing import runs as import_runs
from annotation.models import ImportRun
from background.models import RunStatus, TrackedRun
from background.watchdog import runs_watch_all
from inference.models import BackgroundRun
from inference.services import recovery

ROOT = Path(__file__).resolve().parents[2]


def lapsed() -> datetime:
    return timezone.now() - timedelta(seconds=settings.STATELAB_RUN_LAPSE_SECONDS + 1)


def test_every_table_of_runs_is_a_tracked_run_with_the_one_vocabulary():
    tables = sorted(m._meta.label for m in apps.get_models() if issubclass(m, TrackedRun))
    assert tables == ["annotation.ImportRun", "inference.BackgroundRun"]
    for label in tables:
        field = apps.get_model(label)._meta.get_field("status")
        assert (field.choices, field.default) == (RunStatus.choices, "queued")
    assert RunStatus.values == ["queued", "running", "finished", "refused", "failed"]
    assert apps.get_model(settings.STATELAB_TRACKED_RUN_MODEL) is BackgroundRun


@pytest.mark.django_db
def test_the_beat_watchdog_recovers_every_table_that_settings_name(
    make_project, monkeypatch, django_capture_on_commit_callbacks
):
    from inference.tasks import watch_runs

    sent = []
    monkeypatch.setattr(import_runs, "enqueue", lambda task, *args: sent.append((task, args)))
    monkeypatch.setattr(recovery, "enqueue", lambda task, *args, **kw: sent.append((task, args)))
    project = make_project("p", "changeit")
    upload = ImportRun.objects.create(
        project=project,
        file_name="items.jsonl",
        status=RunStatus.RUNNING,
        attempts=1,
        worker="a@host",
        heartbeat_at=lapsed(),
    )
    chunk = BackgroundRun.objects.create(
        celery_task="inference.tasks.run_api_chunk",
        args=[0, []],
        status=RunStatus.RUNNING,
        attempts=settings.STATELAB_RUN_MAX_ATTEMPTS,
        worker="b@host",
        heartbeat_at=lapsed(),
    )

    with django_capture_on_commit_callbacks(execute=True):
        counts = watch_runs()

    assert counts == {
        "runs_requeued": 0,
        "runs_failed": 1,
        "runs_resent": 0,
        "runs_jobs_settled": 0,
        "imports_requeued": 1,
        "imports_failed": 0,
    }
    upload.refresh_from_db()
    chunk.refresh_from_db()
    assert (upload.status, upload.attempts) == (RunStatus.QUEUED, 1)
    assert upload.reason.startswith("worker a@host lost") and upload.reason.endswith("re-queued (attempt 2 of 3)")
    assert chunk.status == RunStatus.FAILED and chunk.reason.startswith("worker lost 3 times: last worker b@host lost")
    assert sent == [("annotation.tasks.run_import", (upload.pk,))]


def fake_watch() -> dict[str, int]:
    return {"requeued": 2, "failed": 0}


def test_a_table_joins_the_watchdog_by_one_settings_line(settings):
    settings.STATELAB_RUN_WATCHERS = {"exports": "tests.background.test_machinery.fake_watch"}
    assert runs_watch_all() == {"exports_requeued": 2, "exports_failed": 0}


def test_the_machinery_imports_none_of_the_apps():
    apps_named = {"annotation", "inference", "evaluation", "protocols"}
    found = []
    for path in sorted((ROOT / "background").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            )
            found += [f"{path.name}: {n}" for n in names if n.split(".")[0] in apps_named]
    assert found == []


@pytest.mark.django_db(transaction=True)
def test_runs_recorded_before_the_one_vocabulary_keep_their_meaning():
    executor = MigrationExecutor(connection)
    executor.migrate([("inference", "0003_prediction_json_repairs")])
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO inference_backgroundrun (task, args, queue, state, attempts, worker, reason, "
            "created_at) VALUES ('t', '[]', 'default', 'done', 1, '', '', now()), "
            "('t', '[]', 'default', 'failed', 3, '', 'lost', now())"
        )
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert list(BackgroundRun.objects.order_by("pk").values_list("status", "attempts")) == [
        (RunStatus.FINISHED, 1),
        (RunStatus.FAILED, 3),
    ]
