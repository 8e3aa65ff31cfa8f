"""`statelab import` draws the run's real progress: the fraction of the file the worker has read,
as the API reports it while the run is processed, against a live server.

Not eager here: the upload's task is run, as a worker runs it (with its progress thread), in a
thread of the test, held in the middle of the file (tests/annotation/db_race.Pause) until the
command has polled a fraction strictly between 0 and 1 and drawn it."""

from __future__ import annotations

import functools
import io
import json
import time

import pytest

from annotation.importing import items as item_importer
from annotation.importing import runs
from annotation.importing.samples import sample_line, sample_media_paths, write_sample_media
from annotation.models import Item, Role
from statelab_client import StateLabClient, cli
from statelab_client.progress import Progress
from tests.annotation.db_race import WAIT_S, Pause, Worker

pytestmark = pytest.mark.django_db(transaction=True)  # live server: committed rows

LINES = 4000


class Terminal(io.StringIO):
    """A stderr that says it is a terminal, so the bar is redrawn in place."""

    def isatty(self) -> bool:
        return True


def test_the_import_bar_shows_the_share_of_the_file_the_worker_has_read(
    live_server, make_user, make_project, capsys, monkeypatch, tmp_path
):
    from rest_framework.authtoken.models import Token

    researcher = make_user("res")
    make_project("big", "changeit", members={researcher: Role.RESEARCHER})
    write_sample_media(runs.import_media_root(), "changeit")
    path = tmp_path / "items.jsonl"
    path.write_text(
        "".join(
            json.dumps(sample_line("changeit", i, media=sample_media_paths("changeit", i))) + "\n" for i in range(LINES)
        )
    )

    middle = f"changeit-{LINES // 2:05d}"
    pause = Pause(item_importer.check_item)

    def check_item(protocol, obj, **kwargs):  # held at the middle line
        return (pause if obj.get("id") == middle else pause.real)(protocol, obj, **kwargs)

    monkeypatch.setattr(item_importer, "check_item", check_item)
    workers: list[Worker] = []

    def deliver(_task: str, run_id: int) -> None:  # the broker hands the task to a worker
        workers.append(Worker(lambda: runs.import_run_execute(run_id, worker="test@host", heartbeat=True)))
        workers[-1].start()

    monkeypatch.setattr(runs, "enqueue_on_commit", deliver)
    polled: list[dict] = []
    real_import_run = StateLabClient.import_run

    started = time.monotonic()

    def import_run(self, run_id):  # the command's polls; the one after a fraction was drawn lets the import go on
        # (No fraction within WAIT_S: let it finish anyway, and the assertions below fail, not hang.)
        if polled and 0 < (polled[-1]["progress"] or 0) < 1 or time.monotonic() - started > WAIT_S:
            pause.released.set()
        polled.append(real_import_run(self, run_id))
        return polled[-1]

    monkeypatch.setattr(StateLabClient, "import_run", import_run)
    # Drawn on a terminal (off one only the final line is written), every change: the redraw
    # throttle is not what is tested here.
    terminal = Terminal()
    monkeypatch.setattr(cli, "Progress", functools.partial(Progress, stream=terminal, redraw=0))
    token = Token.objects.create(user=researcher).key
    try:
        code = cli.main(["--url", live_server.url, "--token", token, "import", "big", str(path), "--poll", "0.05"])
    finally:
        pause.released.set()
        assert all(w.done.wait(WAIT_S) for w in workers), "the import hung"
    err = capsys.readouterr().err
    assert code == cli.EXIT_OK, err
    assert [w.result for w in workers] == ["finished"] and Item.objects.count() == LINES

    fractions = [r["progress"] for r in polled if 0 < (r["progress"] or 0) < 1]
    assert fractions, f"no progress between 0 and 1 was polled: {[r['progress'] for r in polled]}"
    mid = fractions[0]
    drawn = terminal.getvalue().replace("\n", "\r").split("\r")
    bars = [line.rstrip() for line in drawn if line.startswith(f"import {polled[0]['id']} [")]
    filled = int(mid * 28)
    assert f"import {polled[0]['id']} [{'#' * filled}{'.' * (28 - filled)}] {mid * 100:5.1f}% running" in bars
    assert bars[-1].endswith("100.0% finished")
