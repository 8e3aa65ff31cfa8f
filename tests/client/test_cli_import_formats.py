"""`statelab import` with an authors' format, against a live server: a release laid out as a folder
is sent as a zip of it, --format and --strict reach the server, and the report says what was read
(the test-only protocol's made-up format, tests/protocols/sample_protocol/formats.py)."""

from __future__ import annotations

import zipfile

import pytest

from annotation.models import Item, Role
from protocols import registry
from statelab_client import cli
from statelab_client.client import zip_folder
from tests.annotation.test_import_authors_formats import sheet_folder

pytestmark = pytest.mark.django_db(transaction=True)  # live server: committed rows


@pytest.fixture
def lids_world(live_server, make_user, make_project, eager, settings, tmp_path):
    from rest_framework.authtoken.models import Token

    settings.STATELAB_PROTOCOLS = [*registry.BUILT_IN, "tests.protocols.sample_protocol"]
    res = make_user("res")
    make_project("lids", "lidcheck", members={res: Role.RESEARCHER})
    return {"url": live_server.url, "token": Token.objects.create(user=res).key, "folder": sheet_folder(tmp_path / "r")}


def run_main(capsys, world, *args: str) -> tuple[int, str, str]:
    code = cli.main(["--url", world["url"], "--token", world["token"], "--quiet", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_folder_is_sent_as_a_zip_and_the_format_read_is_reported(capsys, lids_world):
    folder = str(lids_world["folder"])
    code, out, err = run_main(capsys, lids_world, "import", "lids", folder, "--strict", "--poll", "0.05")
    assert code == cli.EXIT_FAILED and out == ""
    assert err.splitlines()[1].endswith("refused (read as lids.json (the lid check sheet)): 2 error(s)")
    assert not Item.objects.exists()

    code, out, err = run_main(capsys, lids_world, "import", "lids", folder, "--format", "lid-sheet", "--poll", "0.05")
    assert code == cli.EXIT_OK, err
    assert out.splitlines() == [
        "lines 3, created 3, promoted 0, unchanged 0, media_files 3, media_stored 3; by_status: pending 1, annotated 2",
        "read as lid-sheet: lids.json (the lid check sheet)",
        "- 3 rows of lids.json; each question written from the object's name",
        "kept 2 fields not in the protocol: batch, shelf",
    ]


def test_an_unknown_format_is_refused_by_the_server_naming_the_formats(capsys, lids_world):
    code, out, err = run_main(capsys, lids_world, "import", "lids", str(lids_world["folder"]), "--format", "csv")
    assert (code, out) == (cli.EXIT_REFUSED, "")
    assert err == (
        "statelab: POST /api/projects/lids/imports/: HTTP 400: format: unknown format 'csv' for protocol lidcheck; "
        "the formats there are: statelab, lid-sheet\n"
    )


def test_the_folder_zip_leaves_out_links_and_keeps_relative_paths(tmp_path):
    folder = sheet_folder(tmp_path / "r")
    (folder / "outside").symlink_to(tmp_path)
    (folder / "pics" / "link.png").symlink_to(folder / "pics" / "lid-0.png")
    with zipfile.ZipFile(zip_folder(folder, tmp_path / "r.zip")) as zf:
        assert sorted(zf.namelist()) == ["lids.json", "pics/lid-0.png", "pics/lid-1.png", "pics/lid-2.png"]
