"""`statelab import PROJECT items.jsonl` with the media beside the file (statelab_client/media.py):
the client sends one zip of the file and the files its lines name, and the server finds them;
only relative paths inside the file's folder, reached without a symbolic link, go into it."""

from __future__ import annotations

import json
import zipfile

import pytest

from annotation.importing.samples import write_sample_dataset
from annotation.models import Item
from statelab_client import cli
from statelab_client.media import media_named, zip_with_media

pytestmark = pytest.mark.django_db(transaction=True)  # live server: committed rows


def test_items_file_with_its_images_beside_it_imports_with_the_media(capsys, api_world):
    lines = write_sample_dataset(api_world["tmp"] / "beside", "status", 3)
    (lines.parent / "unrelated.bin").write_bytes(b"not named by any line")
    code = cli.main(
        ["--url", api_world["url"], "--token", api_world["token"], "import", "lemons", str(lines), "--poll", "0.05"]
    )
    out, err = capsys.readouterr()
    assert code == cli.EXIT_OK, err
    assert "not found under the media root" not in out + err
    assert "created 3" in out and "media_files 6" in out, out
    assert Item.objects.filter(project=api_world["project"]).count() == 3
    # Off a terminal each bar is one final line.
    assert [line for line in err.splitlines() if line.startswith(("zip ", "upload "))] == [
        "zip [############################] 100.0% 7 files",
        f"upload [############################] 100.0% {err.split('100.0% ')[2].splitlines()[0]}",
    ]


def test_only_the_named_files_inside_the_folder_are_zipped(tmp_path):
    folder = tmp_path / "set"
    (folder / "img").mkdir(parents=True)
    for name in ("a.png", "b.png", "extra.png"):
        (folder / "img" / name).write_bytes(b"png")
    (tmp_path / "secret.png").write_bytes(b"secret")
    (folder / "escape.png").symlink_to(tmp_path / "secret.png")
    (folder / "linked").symlink_to(tmp_path)
    items = folder / "items.jsonl"
    rows = [
        {"id": "1", "image_a": "img/a.png", "image_b": "./img/b.png", "note": "img/a.png"},
        {"id": "2", "image_a": "../secret.png", "image_b": str(tmp_path / "secret.png")},
        {"id": "3", "image_a": "escape.png", "image_b": "linked/secret.png", "url": "https://x.org/img/a.png"},
    ]
    items.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    assert media_named(items) == ["img/a.png", "img/b.png"]
    progress: list[tuple[int, int]] = []
    target = zip_with_media(
        items, media_named(items), tmp_path / "up.zip", on_file=lambda d, t: progress.append((d, t))
    )
    with zipfile.ZipFile(target) as zf:
        assert sorted(zf.namelist()) == ["img/a.png", "img/b.png", "items.jsonl"]
        assert zf.read("items.jsonl") == items.read_bytes()
    assert progress == [(1, 3), (2, 3), (3, 3)]
