"""The `statelab` console script against a live server: end to end in a subprocess, and its
exit codes and messages through main() with capsys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from annotation.models import Item, Release
from statelab_client import cli

from .conftest import BAD_IMPORT_ERRORS

pytestmark = pytest.mark.django_db(transaction=True)  # live server: committed rows

STATELAB = Path(sys.executable).with_name("statelab")  # the console script pip installed


def statelab(world, *args: str, token: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "STATELAB_URL": world["url"], "STATELAB_TOKEN": token or world["token"]}
    return subprocess.run(
        [str(STATELAB), *args], env=env, cwd=world["tmp"], capture_output=True, text=True, timeout=120
    )


def test_console_script_imports_freezes_exports_runs_a_job_and_reads_the_leaderboard(api_world, random_endpoint):
    imported = statelab(api_world, "import", "lemons", str(api_world["zip"]), "--verified")
    assert imported.returncode == 0, imported.stderr
    assert (
        imported.stdout
        == "lines 3, created 3, promoted 0, unchanged 0, media_files 6, media_stored 6; by_status: verified 3\n"
    )
    assert "upload [############################] 100.0%" in imported.stderr and "import run " in imported.stderr

    frozen = statelab(api_world, "freeze", "lemons", "v1", "--json")
    assert frozen.returncode == 0, frozen.stderr
    release = json.loads(frozen.stdout)
    assert release["item_count"] == 3

    exported = statelab(api_world, "export", "lemons", "v1", "--format", "jsonl")
    assert exported.returncode == 0, exported.stderr
    path = api_world["tmp"] / "lemons-v1.jsonl"
    assert exported.stdout == "lemons-v1.jsonl\n" and "export [" in exported.stderr
    header = json.loads(path.read_text().splitlines()[0])
    assert header["release"]["checksum"] == release["checksum"]

    launched = statelab(
        api_world,
        "job",
        "launch",
        "lemons",
        "--endpoint",
        "random-vlm",
        "--release",
        "v1",
        "--param",
        "seed=1",
        "--poll",
        "0.1",
        "--json",
    )
    assert launched.returncode == 0, launched.stderr
    final = json.loads(launched.stdout)
    assert (final["status"], final["failed"], final["done"]) == ("finished", 0, final["total"])
    assert f"job {final['id']} [" in launched.stderr and "100.0%" in launched.stderr

    board = statelab(api_world, "leaderboard", "lemons", "--release", "v1", "--format", "csv")
    assert board.returncode == 0, board.stderr
    lines = board.stdout.splitlines()
    assert lines[0].startswith("model,") and any(line.startswith("random-vlm,") for line in lines)
    tex = statelab(api_world, "leaderboard", "lemons", "--release", "v1", "--format", "latex", "-o", "board.tex")
    assert tex.returncode == 0 and "\\begin{tabular}" in (api_world["tmp"] / "board.tex").read_text()


def run_main(capsys, world, *args: str, token: str | None = None) -> tuple[int, str, str]:
    code = cli.main(["--url", world["url"], "--token", token or world["token"], "--quiet", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_refused_import_exits_1_with_its_error_lines(capsys, api_world):
    code, out, err = run_main(capsys, api_world, "import", "lemons", str(api_world["bad"]), "--poll", "0.05")
    assert code == cli.EXIT_FAILED and out == ""
    assert err.splitlines()[1:] == [
        f"statelab: import run {err.split()[2]} refused: 2 error(s)",
        *(f"  {e}" for e in BAD_IMPORT_ERRORS),
    ]
    assert not Item.objects.exists()


def test_exit_codes_and_messages_of_refused_requests(capsys, api_world, monkeypatch):
    assert run_main(capsys, api_world, "projects")[:2] == (
        0,
        "SLUG    PROTOCOL  ROLE        ITEMS  NAME\nlemons  status    researcher  0      lemons\n",
    )
    assert run_main(capsys, api_world, "whoami", token="wrong") == (
        cli.EXIT_AUTH,
        "",
        "statelab: GET /api/me/: HTTP 401: Invalid token.\n",
    )
    code, _, err = run_main(capsys, api_world, "freeze", "lemons", "v1", token=api_world["annotator_token"])
    assert code == cli.EXIT_AUTH and err.startswith("statelab: POST /api/projects/lemons/releases/: HTTP 403: ")
    assert run_main(capsys, api_world, "releases", "nowhere") == (
        cli.EXIT_REFUSED,
        "",
        "statelab: GET /api/projects/nowhere/releases/: HTTP 404: No such project.\n",
    )
    assert run_main(capsys, api_world, "freeze", "lemons", "v1") == (
        cli.EXIT_REFUSED,
        "",
        "statelab: POST /api/projects/lemons/releases/: HTTP 400: split: no verified items in split 'test'\n",
    )
    assert (
        run_main(capsys, api_world, "import", "lemons", str(api_world["zip"]), "--verified", "--poll", "0.05")[0]
        == cli.EXIT_OK
    )
    assert run_main(capsys, api_world, "freeze", "lemons", "v1")[:2] == (
        cli.EXIT_OK,
        f"release v1 frozen: 3 items, checksum {Release.objects.get().checksum}\n",
    )
    assert run_main(capsys, api_world, "freeze", "lemons", "v1") == (
        cli.EXIT_REFUSED,
        "",
        (
            "statelab: POST /api/projects/lemons/releases/: HTTP 400: version: release v1 exists already; releases "
            "are immutable, pick a new version\n"
        ),
    )
    assert Release.objects.count() == 1
    assert run_main(capsys, api_world, "job", "launch", "lemons", "--endpoint", "nope") == (
        cli.EXIT_REFUSED,
        "",
        "statelab: POST /api/projects/lemons/jobs/: HTTP 400: no usable endpoint named 'nope'\n",
    )
    assert (
        run_main(capsys, api_world, "job", "launch", "lemons", "--endpoint", "nope", "--param", "oops")[0]
        == cli.EXIT_USAGE
    )

    monkeypatch.delenv("STATELAB_URL", raising=False)
    monkeypatch.delenv("STATELAB_TOKEN", raising=False)
    assert cli.main(["projects"]) == cli.EXIT_USAGE
    assert "STATELAB_TOKEN" in capsys.readouterr().err
    monkeypatch.setenv("STATELAB_URL", api_world["url"])
    monkeypatch.setenv("STATELAB_TOKEN", api_world["token"])
    assert cli.main(["whoami"]) == 0 and capsys.readouterr().out == f"res on {api_world['url']}\n"
    assert cli.main(["--url", "http://127.0.0.1:9", "whoami"]) == cli.EXIT_SERVER  # nothing listens on port 9
    assert capsys.readouterr().err.startswith("statelab: cannot reach http://127.0.0.1:9: ")


def test_job_wait_prints_progress_lines_on_stderr_and_fails_for_a_cancelled_job(capsys, api_world, random_endpoint):
    from inference import services
    from inference.models import InferenceJob

    job = services.job_create(endpoint=random_endpoint, project=api_world["project"], start=False)
    services.job_cancel(job=job)
    code = cli.main(
        ["--url", api_world["url"], "--token", api_world["token"], "job", "wait", str(job.pk), "--poll", "0.05"]
    )
    err = capsys.readouterr().err
    assert code == cli.EXIT_FAILED
    assert err.splitlines()[-1] == f"statelab: job {job.pk} cancelled"
    assert err.splitlines()[0].startswith(f"job {job.pk} [")  # the bar: its final line only, off a terminal
    assert InferenceJob.objects.get(pk=job.pk).status == "cancelled"
    assert run_main(capsys, api_world, "job", "cancel", str(job.pk)) == (
        cli.EXIT_REFUSED,
        "",
        f"statelab: job {job.pk} had already ended\n",
    )


def test_job_wait_warns_of_unreadable_judge_replies_and_strict_fails_on_them(capsys, api_world, random_endpoint):
    """A reply that stayed unreadable through its repairs is scored as missing: `job wait` says so
    (as the job page and run_inference do), and --strict exits 1 for it as for a failed query."""
    from django.utils import timezone

    from inference import prompting, services
    from inference.models import InferenceJob, Prediction

    assert (
        run_main(capsys, api_world, "import", "lemons", str(api_world["zip"]), "--verified", "--poll", "0.05")[0]
        == cli.EXIT_OK
    )
    job = services.job_create(endpoint=random_endpoint, project=api_world["project"], mode="suggest", start=False)
    (query,) = prompting.json_queries("status", suggest=True)[:1]
    items = list(Item.objects.order_by("pk"))
    for n, item in enumerate(items):
        readable = n > 0
        Prediction.objects.create(
            job=job,
            item=item,
            query=query,
            raw_output='{"ok": 1}' if readable else "{oops",
            answer={"ok": 1} if readable else None,
            json_repairs=0 if readable else 2,
            error="" if readable else "judge reply not valid JSON after 2 repairs",
        )
    InferenceJob.objects.filter(pk=job.pk).update(
        status="finished", total_queries=len(items), done_queries=len(items), finished_at=timezone.now()
    )
    wait = ["job", "wait", str(job.pk), "--poll", "0.05"]
    code, _, err = run_main(capsys, api_world, *wait)
    assert code == cli.EXIT_OK
    assert err.splitlines()[-2:] == [
        f"statelab: warning: job {job.pk} finished with 1 judge replies unreadable after repairs (scored as missing; "
        "retry the failed queries to ask again)",
        f"  {items[0].external_id} / {query}: judge reply not valid JSON after 2 repairs",
    ]
    assert run_main(capsys, api_world, *wait, "--strict")[0] == cli.EXIT_FAILED
    code, out, _ = run_main(capsys, api_world, *wait, "--json")
    assert json.loads(out)["unreadable"] == 1 and json.loads(out)["unreadable_replies"][0]["json_repairs"] == 2
