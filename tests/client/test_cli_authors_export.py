"""`statelab export --format <authors' format>` (a zip of the paper's own files, as
export_release --format and the API's ?fmt= give it) and `statelab leaderboard --baseline`,
through main() against a live server."""

from __future__ import annotations

import json
import zipfile

import pytest

from annotation.importing import items_import
from annotation.releases import release_freeze
from inference.services import predictions_import
from statelab_client import cli
from tests.evaluation.factories import make_release
from tests.helpers.files import write_lines
from tests.helpers.items import status_payload
from tests.protocols.m3verse import authors_eval
from tests.protocols.m3verse.test_formats import FORMAT, pipeline_lines, write_release

pytestmark = pytest.mark.django_db(transaction=True)  # live server: committed rows


def run_main(capsys, world, *args: str) -> tuple[int, str, str]:
    code = cli.main(["--url", world["url"], "--token", world["token"], "--quiet", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_release_downloads_in_its_authors_format(capsys, api_world, make_project):
    from annotation.models import Membership, Role

    project = make_project("m3", "m3verse")
    Membership.objects.create(
        project=project, user=api_world["project"].memberships.get(role=Role.RESEARCHER).user, role=Role.RESEARCHER
    )
    tmp = api_world["tmp"]
    conversion = FORMAT.read(write_release(tmp / "M3-Verse", videos=True))
    items_import(
        project=project,
        path=write_lines(tmp / "items.jsonl", list(conversion.lines)),
        media_root=conversion.media_root,
        verified=True,
    )
    release_freeze(project=project, version="v1")

    code, out, err = run_main(
        capsys, api_world, "export", "m3", "v1", "--format", "m3verse-pipeline", "-o", f"{tmp}/dl/"
    )
    assert code == cli.EXIT_OK, err
    archive = tmp / "dl" / "m3-v1.m3verse-pipeline.zip"
    assert out.strip() == str(archive)
    unpacked = tmp / "unpacked"
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(unpacked)
    rows = [json.loads(t) for t in (unpacked / "QAs/M3-Verse.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(r["question_id"] for r in rows) == sorted({line["question_id"] for line in pipeline_lines()})
    assert len(authors_eval.load(unpacked / "QAs/M3-Verse.jsonl", unpacked / "data")) == len(rows)

    # another protocol's format: the server's refusal names what the project exports to
    code, out, err = run_main(capsys, api_world, "export", "m3", "v1", "--format", "visualtrans", "-o", f"{tmp}/dl2/")
    assert code == cli.EXIT_REFUSED
    assert "m3verse-pipeline" in err and "visualtrans" not in out
    assert not (tmp / "dl2").exists() or not any((tmp / "dl2").iterdir())


def test_the_leaderboard_compares_with_a_baseline(capsys, api_world):
    project = api_world["project"]
    release = make_release(project, {f"it{i}": status_payload(i) for i in range(6)})
    resolved = {ri.item.external_id: ri.payload["resolved"] for ri in release.release_items.select_related("item")}
    for model, right in (("half", ("it0", "it1", "it2")), ("all", tuple(resolved))):
        lines = [
            json.dumps({"item": e, "query": q, "answer": r[q]["answer"] if e in right else "Z"})
            for e, r in resolved.items()
            for q in r
        ]
        predictions_import(project=project, lines=lines, model_name=model, release=release)

    code, out, err = run_main(capsys, api_world, "leaderboard", "lemons", "--format", "markdown", "--baseline", "half")
    assert code == cli.EXIT_OK, err
    assert "Paired comparisons against half" in out
    assert any(line.startswith("| all |") for line in out.split("Paired comparisons", 1)[1].splitlines())

    code, out, err = run_main(capsys, api_world, "leaderboard", "lemons", "--baseline", "half")
    assert code == cli.EXIT_OK, err
    board = json.loads(out)
    assert board["paired"]["baseline"] == "half"
    compared = [c["model"] for c in board["paired"]["comparisons"]]
    assert "all" in compared and "half" not in compared

    code, out, err = run_main(capsys, api_world, "leaderboard", "lemons", "--baseline", "nobody")
    assert code == cli.EXIT_REFUSED and "nobody" in err

    code, _, err = run_main(capsys, api_world, "leaderboard", "lemons", "--format", "csv", "--baseline", "half")
    assert code == cli.EXIT_REFUSED and "csv" in err
