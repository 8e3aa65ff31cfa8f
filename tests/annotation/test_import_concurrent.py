"""Imports into one project are serialized: two identical imports at the same moment give one copy
of each item and no error; an import that cannot get its turn in time is refused cleanly.

These run outside a test transaction (transaction=True) so that the importer works as it does for
the command and the API: its rows stream through COPY on a second connection while it validates.
"""

from __future__ import annotations

import io
import threading

import pytest
from django.core.management import call_command
from django.db import connection, connections, transaction

from annotation.importing import ImportRefused, items_import
from annotation.importing.copy_spool import IMPORT_LOCK_CLASS
from annotation.importing.samples import write_sample_dataset
from annotation.models import Item, MediaAsset, Project

pytestmark = pytest.mark.django_db(transaction=True)

LINES = 3000


def run_in_threads(target, n: int) -> list:
    """Call target() in n threads released together; returns each thread's result or exception."""
    barrier = threading.Barrier(n)
    results: list = [None] * n

    def body(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = target()
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            results[i] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)
    return results


def test_two_identical_imports_at_once_write_each_item_once(make_project, tmp_path):
    project = make_project("race", "changeit")
    path = write_sample_dataset(tmp_path / "data", "changeit", LINES)

    results = run_in_threads(lambda: items_import(project=project, path=path), 2)

    errors = [r for r in results if isinstance(r, BaseException)]
    assert errors == []
    # One import wrote everything; the other waited for it and found every line already there.
    assert sorted((r.created, r.unchanged, r.lines) for r in results) == [(0, LINES, LINES), (LINES, 0, LINES)]
    assert Item.objects.filter(project=project).count() == LINES
    assert Item.objects.filter(project=project).values("external_id").distinct().count() == LINES
    assert MediaAsset.objects.count() == 4


def test_import_waiting_too_long_for_another_import_is_refused(make_project, tmp_path, settings, _media_root):
    settings.IMPORT_LOCK_WAIT_S = 0.3
    project = make_project("busy", "changeit")
    path = write_sample_dataset(tmp_path / "data", "changeit", 20)

    # Another import into the project holds the lock (here: this test's own transaction).
    with transaction.atomic():
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", [IMPORT_LOCK_CLASS, project.pk])
        (result,) = run_in_threads(lambda: items_import(project=project, path=path), 1)

    assert isinstance(result, ImportRefused)
    assert result.errors == [
        "file: field -: another import into project busy is still running; "
        "nothing was written, try again once it has finished"
    ]
    assert Item.objects.count() == 0
    assert MediaAsset.objects.count() == 0
    assert not any(p.is_file() for p in _media_root.rglob("*"))


def test_lock_is_released_after_an_import_so_the_next_one_runs(make_project, tmp_path, settings):
    settings.IMPORT_LOCK_WAIT_S = 0.3
    project = make_project("seq", "changeit")
    path = write_sample_dataset(tmp_path / "data", "changeit", 20)

    first = items_import(project=project, path=path)
    second = items_import(project=project, path=path)

    assert (first.created, first.unchanged) == (20, 0)
    assert (second.created, second.unchanged) == (0, 20)
    assert Item.objects.filter(project=project).count() == 20


def test_two_commands_creating_the_same_project_at_once_share_it(tmp_path):
    path = write_sample_dataset(tmp_path / "data", "changeit", LINES)
    outputs = [io.StringIO(), io.StringIO()]
    turn = iter(outputs)
    lock = threading.Lock()

    def command():
        with lock:
            out = next(turn)
        call_command("import_items", "fresh", str(path), "--protocol", "changeit", "--create", stdout=out)

    results = run_in_threads(command, 2)

    assert results == [None, None]
    assert sorted(out.getvalue().split(";")[0] for out in outputs) == [
        f"fresh: {LINES} lines, 0 items created (none), {LINES} unchanged, 0 promoted to verified",
        f"fresh: {LINES} lines, {LINES} items created (annotated {LINES}), 0 unchanged, 0 promoted to verified",
    ]
    assert Project.objects.filter(slug="fresh").count() == 1
    assert Item.objects.filter(project__slug="fresh").count() == LINES
