"""Imports stream: a 200k-line file imports with peak memory under 300 MB, and peak memory does
not grow with the file (20k vs 200k lines).

The import runs as `manage.py import_items` in a subprocess against the test database, so its
peak RSS (VmHWM of its own address space) is the importer's alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from annotation.importing.samples import sample_line, sample_media_paths, write_sample_media
from annotation.models import Item, ItemStatus

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

REPO = Path(settings.BASE_DIR)

CHILD = r"""
import os, resource, sys, time
import django
django.setup()
from django.core.management import call_command
t = time.perf_counter()
call_command("import_items", sys.argv[1], sys.argv[2], "--protocol", "changeit", "--create")
# VmHWM, not ru_maxrss: exec keeps the parent's high-water mark in ru_maxrss when the child was
# spawned by vfork from a large pytest process; VmHWM is this program's own address space.
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print("RESULT", time.perf_counter() - t, hwm)
"""


def write_changeit_items(folder: Path, n: int) -> Path:
    path = folder / f"items-{n}.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):  # 4 shared images: the test measures the item stream, not media
            fh.write(json.dumps(sample_line("changeit", i, media=sample_media_paths("changeit", i))) + "\n")
    return path


def run_import(slug: str, path: Path, tmp_path: Path) -> tuple[float, int]:
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": (
            f"postgres://{db['USER']}:{db.get('PASSWORD') or ''}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"
        ),
        "MEDIA_ROOT": str(tmp_path / "media"),
        "STATELAB_CACHE_ROOT": str(tmp_path / "cache"),
    }
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, slug, str(path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=500
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    _, seconds, rss_kb = proc.stdout.strip().splitlines()[-1].split()
    return float(seconds), int(rss_kb) * 1024


def test_200k_line_import_streams_in_flat_memory(tmp_path):
    data = tmp_path / "data"
    write_sample_media(data, "changeit")
    small = write_changeit_items(data, 20_000)
    large = write_changeit_items(data, 200_000)
    assert large.stat().st_size > 30_000_000

    _, rss_small = run_import("small", small, tmp_path)
    seconds, rss_large = run_import("large", large, tmp_path)

    assert Item.objects.filter(project__slug="large").count() == 200_000
    assert Item.objects.filter(project__slug="large", status=ItemStatus.ANNOTATED).count() == 200_000
    assert Item.objects.get(project__slug="large", external_id="changeit-199999").payload["object"] == "box"
    print(
        f"200k lines: {seconds:.1f} s, {200_000 / seconds:.0f} items/s, peak RSS {rss_large / 2**20:.0f} MiB "
        f"(20k lines: {rss_small / 2**20:.0f} MiB)"
    )
    assert rss_large < 300 * 2**20
    # Ten times the lines, (almost) the same memory: nothing is held per line beyond 8 bytes.
    assert rss_large - rss_small < 40 * 2**20


def test_live_copy_rolls_back_when_a_late_line_is_bad(tmp_path, make_project, monkeypatch, _media_root):
    """Outside a transaction the rows of a large file stream to PostgreSQL while pass 1 runs; a bad
    last line must still leave nothing behind (the writer's transaction is rolled back)."""
    from annotation.importing import ImportRefused, items_import
    from annotation.importing import copy_spool as importer
    from annotation.importing import items as item_importer
    from annotation.models import MediaAsset

    started = []
    original_start = importer.LiveCopy.start
    monkeypatch.setattr(importer, "SPOOL_CHUNK", 4096)  # many chunks reach the server before the error
    monkeypatch.setattr(item_importer, "LIVE_COPY_MIN_BYTES", 4096)  # "large": this file of 3,000 lines
    monkeypatch.setattr(importer.LiveCopy, "start", lambda self: (started.append(self), original_start(self))[1])
    project = make_project("live", "changeit")
    data = tmp_path / "data"
    write_sample_media(data, "changeit")
    path = write_changeit_items(data, 3000)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": "late", "image": "img/gone.png", "object": "door", "state": "a closed door"}) + "\n")

    with pytest.raises(ImportRefused) as exc:
        items_import(project=project, path=path)

    assert exc.value.errors == ["line 3001: field image: img/gone.png: file not found under the media root"]
    assert len(started) == 1 and not started[0].is_alive()
    assert Item.objects.count() == 0 and MediaAsset.objects.count() == 0
    assert [p for p in _media_root.rglob("*") if p.is_file()] == []

    path.write_text("".join(path.read_text().splitlines(keepends=True)[:3000]))
    report = items_import(project=project, path=path)
    assert report.created == 3000 and len(started) == 2
    assert Item.objects.filter(project=project).count() == 3000 and MediaAsset.objects.count() == 4
