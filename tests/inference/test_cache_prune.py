"""A host's caches are bounded (inference/services/cache.py, `manage.py prune_cache`): entries are
the media copied from object storage and the sampled frames; a cache hit marks the entry used;
the least recently used go first, the recently used never, and nothing else under CACHE_ROOT."""

import os
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from inference import media
from inference.services.cache import cache_entries, cache_prune

DAY = 86400.0


def aged(path: Path, days: float) -> None:
    then = time.time() - days * DAY
    os.utime(path, (then, then))


@pytest.fixture
def cache(tmp_path):
    """Two videos' frames and two media copies, of known ages, plus a staged upload."""
    root = tmp_path / "cache"
    video = media.make_test_video(tmp_path / "v.mp4", seconds=1, size="64x48", rate=10)
    frames_old = media.sample_frames(video, 3, cache_root=root, content_hash="a" * 64).paths[0].parent
    frames_new = media.sample_frames(video, 4, cache_root=root, content_hash="a" * 64).paths[0].parent
    copies = []
    for sha, size in (("b" * 64, 3000), ("c" * 64, 5000)):
        copy = root / "storage" / "assets" / sha[:2] / f"{sha}.mp4"
        copy.parent.mkdir(parents=True)
        copy.write_bytes(b"x" * size)
        copies.append(copy)
    upload = root / "uploads" / "upload-1.zip"
    upload.parent.mkdir()
    upload.write_bytes(b"z" * 10_000)
    aged(frames_old / "frames.json", 30)
    aged(copies[0], 10)
    aged(copies[1], 2)
    aged(upload, 365)
    return {
        "root": root,
        "video": video,
        "frames_old": frames_old,
        "frames_new": frames_new,
        "copies": copies,
        "upload": upload,
    }


def test_entries_are_listed_least_recently_used_first(cache):
    assert [e.path for e in cache_entries(cache["root"])] == [
        cache["frames_old"],
        cache["copies"][0],
        cache["copies"][1],
        cache["frames_new"],
    ]


def test_unused_entries_go_and_nothing_else_under_the_cache_root(cache):
    result = cache_prune(cache["root"], unused_for=7 * DAY)
    assert (result["removed"], result["kept"]) == (2, 2)
    assert not cache["frames_old"].exists() and not cache["copies"][0].exists()
    assert cache["frames_new"].is_dir() and cache["copies"][1].is_file()
    assert cache["upload"].is_file()  # a staged upload is not a cache entry, however old
    assert not [p for p in cache["frames_old"].parent.iterdir() if p.name.startswith(".gone-")]


def test_a_size_bound_removes_the_least_recently_used_but_never_the_recently_used(cache):
    sizes = {e.path: e.size for e in cache_entries(cache["root"])}
    # Room for the two most recent entries only: the two oldest go.
    bound = sizes[cache["copies"][1]] + sizes[cache["frames_new"]]
    assert cache_prune(cache["root"], max_bytes=bound)["removed"] == 2
    assert [e.path for e in cache_entries(cache["root"])] == [cache["copies"][1], cache["frames_new"]]
    # Nothing fits: everything but what was used within the hour goes.
    assert cache_prune(cache["root"], max_bytes=0)["removed"] == 1
    assert [e.path for e in cache_entries(cache["root"])] == [cache["frames_new"]]


def test_a_hit_marks_the_entry_used_and_a_pruned_entry_is_decoded_again(cache):
    media.sample_frames(cache["video"], 3, cache_root=cache["root"], content_hash="a" * 64)  # a hit
    assert cache_prune(cache["root"], unused_for=7 * DAY)["removed"] == 1  # only the old copy now
    assert cache["frames_old"].is_dir()
    aged(cache["frames_old"] / "frames.json", 30)
    cache_prune(cache["root"], unused_for=7 * DAY)
    again = media.sample_frames(cache["video"], 3, cache_root=cache["root"], content_hash="a" * 64)
    assert len(again.paths) == 3 and all(p.is_file() for p in again.paths)


def test_the_command_prunes_this_hosts_cache_and_refuses_what_it_cannot_do(cache, settings):
    settings.CACHE_ROOT = cache["root"]
    out = StringIO()
    call_command("prune_cache", "--unused-days", "7", stdout=out)
    assert out.getvalue().startswith("removed 2 cache entries") and f"under {cache['root']}" in out.getvalue()
    with pytest.raises(CommandError, match="say what to remove"):
        call_command("prune_cache")
    with pytest.raises(CommandError, match="--max-gb must not be negative"):
        call_command("prune_cache", "--max-gb", "-1")
