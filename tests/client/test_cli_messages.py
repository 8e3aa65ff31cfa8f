"""What `statelab` says when there is nothing to list (statelab_client/cli.py)."""

from __future__ import annotations

import pytest

from statelab_client import cli

pytestmark = pytest.mark.django_db(transaction=True)  # live server: committed rows


def releases(capsys, world, *extra: str) -> tuple[int, str, str]:
    code = cli.main(["--url", world["url"], "--token", world["token"], "releases", "lemons", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_releases_says_when_there_are_none(capsys, api_world):
    assert releases(capsys, api_world) == (
        cli.EXIT_OK,
        "",
        "no releases yet (statelab freeze lemons VERSION makes one)\n",
    )
    code, out, err = releases(capsys, api_world, "--json")
    assert (code, out.strip(), err) == (cli.EXIT_OK, "[]", "")
