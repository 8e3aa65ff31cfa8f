"""`statelab power` and the human column names of `statelab leaderboard` tables, through main()
against a live server."""

from __future__ import annotations

import json

import pytest

from inference.services import predictions_import
from statelab_client import cli
from tests.evaluation.factories import make_release
from tests.helpers.items import status_payload

pytestmark = pytest.mark.django_db(transaction=True)  # live server: committed rows


def run_main(capsys, world, *args: str) -> tuple[int, str, str]:
    code = cli.main(["--url", world["url"], "--token", world["token"], "--quiet", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_power_and_leaderboard_tables_from_the_command_line(capsys, api_world):
    project = api_world["project"]
    release = make_release(project, {f"it{i}": status_payload(i) for i in range(4)})
    resolved = {ri.item.external_id: ri.payload["resolved"] for ri in release.release_items.select_related("item")}
    # "half" answers the first two items right and the others wrong.
    lines = [
        json.dumps({"item": e, "query": q, "answer": r[q]["answer"] if e in ("it0", "it1") else "Z"})
        for e, r in resolved.items()
        for q in r
    ]
    predictions_import(project=project, lines=lines, model_name="half", release=release)

    code, out, err = run_main(capsys, api_world, "leaderboard", "lemons", "--format", "markdown")
    assert code == cli.EXIT_OK, err
    assert out.splitlines()[0] == (
        "| Model | Rank | n | Parse failures | Acc OSI | Acc IR | Acc SCI | OA | RAcc OSI | RAcc IR | RAcc SCI | ROA |"
    )
    assert "Standard errors of the means, naive / clustered" in out

    code, out, err = run_main(capsys, api_world, "power", "lemons", "--half-width", "10", "--metric", "acc_sci")
    assert code == cli.EXIT_OK, err
    # half on Acc SCI: 100, 100, 0, 0 (each item its own cluster): sd² = 10⁴/3, design effect 4/3 · 3/4 = 1;
    # (1.96 · 57.735 / 10)² = 128.05 -> 129 items.
    assert out.startswith("Items needed for a 95% interval of half-width 10 percentage points on Acc SCI")
    row = next(line for line in out.splitlines() if line.startswith("| half |"))
    assert row.split(" | ")[1:4] == ["4", "4", "57.735"] and row.endswith("| 129 | 129 |")
    as_json = run_main(capsys, api_world, "power", "lemons", "--half-width", "10", "--format", "json")[1]
    assert json.loads(as_json)["rows"][0]["model"] == "half"

    code, out, err = run_main(capsys, api_world, "power", "lemons", "--half-width", "0")
    assert (code, out) == (cli.EXIT_REFUSED, "")
    assert err == (
        "statelab: GET /api/projects/lemons/power/: HTTP 400: half_width: expected a number of "
        "percentage points above 0 and at most 100, found '0.0'\n"
    )
