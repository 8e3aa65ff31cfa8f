"""Stream mode takes turns with the imports already under way in the project (items.py
`stream_if_free`, line_scan.py `stream_lock`): an import streams only when no other import of the
project is checking, waiting its turn or writing. One that streams holds the project's import lock
through its whole check, so an import that had started checking its lines first would otherwise
wait for all of that check instead of for the write alone.

These run outside a test transaction (transaction=True): each import is its own transaction on its
own connection, as two requests are.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.db import connection, connections

from annotation.importing import items, items_import
from annotation.importing.copy_spool import IMPORT_LOCK_CLASS
from annotation.importing.media_cache import media_cache_clear
from annotation.importing.runs import import_media_root
from annotation.importing.samples import sample_line, sample_media_paths, write_sample_media
from annotation.models import Item

pytestmark = pytest.mark.django_db(transaction=True)

LINES = 300


def write_file(tmp_path, tag: str) -> object:
    lines = []
    for i in range(LINES):
        line = sample_line("changeit", i, media=sample_media_paths("changeit", i))
        line["id"] = f"{tag}-{i}"
        lines.append(json.dumps(line))
    path = tmp_path / f"{tag}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class Imports:
    """Imports in threads of their own; the one tagged T stops at its first line's check until
    `go(T)`, and `streamed[T]` says whether it took stream mode."""

    def __init__(self, project, tmp_path, monkeypatch):
        self.project, self.tmp_path = project, tmp_path
        self.gates: dict[str, threading.Event] = {}
        self.reached: dict[str, threading.Event] = {}
        self.streamed: dict[str, bool] = {}
        self.errors: dict[str, BaseException] = {}
        self.threads: dict[str, threading.Thread] = {}
        real_check, real_decide = items.check_item, items._Validation.stream_if_free

        def gated_check(protocol, obj, **kwargs):
            tag, _, n = obj["id"].partition("-")
            if n == "0" and tag in self.gates:
                self.reached[tag].set()
                assert self.gates[tag].wait(60)
            return real_check(protocol, obj, **kwargs)

        def deciding(validation, parsed):
            real_decide(validation, parsed)
            self.streamed[parsed[0][2]["id"].partition("-")[0]] = validation.existing is not None

        monkeypatch.setattr(items, "check_item", gated_check)
        monkeypatch.setattr(items._Validation, "stream_if_free", deciding)

    def start(self, tag: str, *, gated: bool = False) -> None:
        path = write_file(self.tmp_path, tag)
        if gated:
            self.gates[tag], self.reached[tag] = threading.Event(), threading.Event()

        def body():
            try:
                items_import(project=self.project, path=path, media_root=import_media_root())
            except BaseException as exc:  # noqa: BLE001 - the test inspects it
                self.errors[tag] = exc
            finally:
                connections.close_all()

        self.threads[tag] = threading.Thread(target=body, name=f"import-{tag}")
        self.threads[tag].start()
        if gated:  # stopped inside its check: it has decided how it imports
            assert self.reached[tag].wait(60), f"import {tag} never reached its check"

    def go(self, tag: str) -> None:
        self.gates[tag].set()

    def join(self, tag: str) -> None:
        self.threads[tag].join(timeout=120)
        assert not self.threads[tag].is_alive(), f"import {tag} did not end"
        assert tag not in self.errors, self.errors[tag]

    def close(self) -> None:
        for gate in self.gates.values():
            gate.set()
        for thread in self.threads.values():
            thread.join(timeout=120)


@pytest.fixture
def imports(make_project, tmp_path, monkeypatch):
    media_cache_clear()
    write_sample_media(import_media_root(), "changeit")
    running = Imports(make_project("turns", "changeit"), tmp_path, monkeypatch)
    yield running
    running.close()


def test_an_import_under_way_makes_the_next_one_check_first(imports):
    # "first" streams (nothing else is under way) and stops inside its check, holding the lock.
    imports.start("first", gated=True)
    # "second" finds the lock held: it checks its lines first, and stops there.
    imports.start("second", gated=True)
    imports.go("first")
    imports.join("first")
    # The lock is free now, but "second" is still checking: "third" checks first too, instead of
    # holding the lock through its own check while "second" waits for it.
    imports.start("third")
    imports.join("third")
    imports.go("second")
    imports.join("second")
    assert imports.streamed == {"first": True, "second": False, "third": False}
    # Alone again (every mark ends with its import's transaction): the next import streams.
    imports.start("fourth")
    imports.join("fourth")
    assert imports.streamed["fourth"] is True
    project = imports.project
    assert Item.objects.filter(project=project).count() == 4 * LINES
    for tag in ("first", "second", "third", "fourth"):
        assert Item.objects.filter(project=project, external_id__startswith=f"{tag}-").count() == LINES


def test_an_import_waiting_for_its_turn_makes_the_next_one_check_first(imports):
    imports.start("first", gated=True)  # streams, holds the lock
    # "second" checks first (the lock is held), finishes its check and waits for the lock.
    imports.start("second")
    deadline = time.monotonic() + 60
    while not _waiting_for_the_lock():
        assert time.monotonic() < deadline and imports.threads["second"].is_alive()
        time.sleep(0.02)
    # "third" arrives while "second" waits: checks first as well (the lock is held, and stays
    # handed on to "second" the moment "first" commits).
    imports.start("third")
    imports.go("first")
    for tag in ("first", "second", "third"):
        imports.join(tag)
    assert imports.streamed == {"first": True, "second": False, "third": False}
    assert Item.objects.filter(project=imports.project).count() == 3 * LINES


def _waiting_for_the_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = %s::oid"
            " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            [IMPORT_LOCK_CLASS],
        )
        return cursor.fetchone()[0] > 0


def test_the_later_files_of_a_request_stream_once_it_holds_the_lock(imports):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from annotation.importing.batch import items_import_batch

    imports.start("first", gated=True)  # streams, holds the lock
    uploads = [
        SimpleUploadedFile(f"{tag}.jsonl", write_file(imports.tmp_path, tag).read_bytes()) for tag in ("one", "two")
    ]
    done: dict = {}

    def request():
        try:
            done["runs"] = items_import_batch(project=imports.project, user=None, uploads=uploads)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            done["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=request)
    thread.start()
    deadline = time.monotonic() + 60
    while not _waiting_for_the_lock():  # its first file, checked, waits for the lock
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.02)
    imports.go("first")
    imports.join("first")
    thread.join(timeout=120)
    assert "error" not in done, done.get("error")
    # The first file checked first ("first" was under way); the second is imported once the
    # request holds the lock: nobody waits for it, so it streams.
    assert imports.streamed == {"first": True, "one": False, "two": True}
    assert Item.objects.filter(project=imports.project).count() == 3 * LINES
