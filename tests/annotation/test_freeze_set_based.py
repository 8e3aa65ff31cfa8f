"""The set-based freeze (annotation/releases.py) against the item-by-item freeze it replaced.

`reference_freeze` (tests/annotation/freeze_reference.py) is that earlier freeze, kept as the
reference: ORM reads in chunks, the media map and the one-file-per-path check in a Python dict, one
COPY per 2,000 rows. For the
same data both must give the same checksum, the same release items row by row, the same bytes in
every export and the same refusals; a release frozen by either verifies, concurrent freezes of
one version still make one release, and the checksum is also computed here from its documented
definition (docs in annotation/interchange/checksum.py) without either freeze.
"""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
import threading

import psycopg
import pytest
from django.db import connection, transaction

from annotation import freezing
from annotation.importing import items_import
from annotation.importing.samples import write_sample_dataset
from annotation.interchange.checksum import (
    LINES_AND_MEDIA,
    LINES_ONLY,
    checksum_finish,
    checksum_finish_sorted,
    checksum_start,
)
from annotation.models import Item, ItemStatus, MediaAsset, Release, ReleaseItem
from annotation.releases import (
    ReleaseRefused,
    release_checksum,
    release_freeze,
    release_line_texts,
)
from tests.annotation.db_race import Worker, race
from tests.annotation.freeze_reference import reference_freeze

from .test_release_immutability import every_export

PROTOCOLS = ["status", "changeit", "visualtrans", "m3verse", "oscbench"]


def _canonical(obj) -> bytes:
    """The checksum's canonical JSON, as its documentation defines it (documented_checksum)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# --- helpers -------------------------------------------------------------------------------------


def verified_project(make_project, tmp_path, protocol, n=12, slug=None):
    project = make_project(slug or f"fz-{protocol}", protocol, option_seed=11)
    items_import(project=project, path=write_sample_dataset(tmp_path / f"data-{protocol}", protocol, n), verified=True)
    return project


def stored_rows(release) -> list[tuple]:
    """The release items as PostgreSQL holds them (jsonb as its text), in release order."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT item_id, position, payload::text, media::text FROM annotation_releaseitem "
            "WHERE release_id = %s ORDER BY position",
            [release.pk],
        )
        return cur.fetchall()


def documented_checksum(release) -> str:
    """The checksum from its definition: sha256 over canonical {protocol, split, option_seed}, each
    stored line in release order, then {"media": {path: sha256}}, each followed by a newline."""
    head = {"protocol": release.project.protocol, "split": release.split, "option_seed": release.option_seed}
    digest = hashlib.sha256(_canonical(head) + b"\n")
    shipped: dict[str, str] = {}
    for row in ReleaseItem.objects.filter(release=release).order_by("position"):
        digest.update(_canonical(row.payload) + b"\n")
        for path, sha in row.media.items():
            shipped.setdefault(path, sha)
    digest.update(_canonical({"media": shipped}) + b"\n")
    return digest.hexdigest()


class Undo(Exception):
    pass


def frozen_by_reference(project, tmp_path, version="v1") -> tuple[str, list[tuple], dict[str, bytes], object]:
    """Freeze with the reference, read what it wrote and every export, then roll it all back (so
    the new freeze can take the same version); returns (checksum, rows, exports, created_at)."""
    try:
        with transaction.atomic():
            ref = reference_freeze(project=project, version=version)
            out = (ref.checksum, stored_rows(ref), every_export(ref, tmp_path, "ref"), ref.created_at)
            raise Undo
    except Undo:
        pass
    assert not Release.objects.filter(project=project, version=version).exists()
    return out


def freeze_and_compare(project, tmp_path) -> Release:
    checksum, rows, exports, created_at = frozen_by_reference(project, tmp_path)
    release = release_freeze(project=project, version="v1")
    # Exports show the creation time; the reference's is given to the new release so that every
    # other byte can be compared.
    Release.objects.filter(pk=release.pk).update(created_at=created_at)
    release.refresh_from_db()
    assert release.checksum == checksum
    assert stored_rows(release) == rows
    assert release.item_count == len(rows)
    after = every_export(release, tmp_path, "new")
    assert sorted(after) == sorted(exports)
    assert [name for name in exports if after[name] != exports[name]] == []
    assert release_checksum(release) == release.checksum == documented_checksum(release)
    return release


# --- the same release as the reference ----------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_freezes_to_the_reference_checksum_rows_and_exports(protocol, make_project, tmp_path):
    project = verified_project(make_project, tmp_path, protocol)
    Item.objects.filter(project=project, external_id__endswith="3").update(status=ItemStatus.ANNOTATED)
    Item.objects.filter(project=project, external_id__endswith="4").update(split="dev")

    release = freeze_and_compare(project, tmp_path)

    assert release.item_count == 10


TRICKY = [
    'tab\there, newline\nthere, carriage\rreturn, backslash \\ and \\\\, quote " and \\"',
    "non-ASCII é ß ü, CJK 日本語, emoji 😀, line separator \u2028, DEL \x7f, NUL-free \x01\x1f",
    "\\N",  # COPY's NULL, as text
    "\\t\\n literally",
]


@pytest.mark.django_db
def test_values_copy_and_json_escape_freeze_to_the_reference(make_project, tmp_path):
    """Backslashes, tabs, newlines, quotes, non-ASCII text and numbers of every JSON shape in the
    payloads, tags and external ids go through COPY both ways and still hash as the reference does."""
    project = verified_project(make_project, tmp_path, "status", n=8)
    numbers = [0.1, 1e-07, 1e16, 12345678901234567890, -0.0, 2.5e300, 1.0, 3]
    for k, item in enumerate(Item.objects.filter(project=project).order_by("external_id")):
        item.payload = {
            **item.payload,
            "note": TRICKY[k % len(TRICKY)],
            "numbers": numbers[k:],
            "nested": {"z": [None, True, False, {"ä": TRICKY[(k + 1) % len(TRICKY)]}], "a": {}},
        }
        item.tags = [TRICKY[k % len(TRICKY)], "plain"] if k % 2 else []
        item.external_id = ["id\twith tab", "id\\back", 'id"q', "idé", "id😀", "ID", "id\nnl", "id"][k]
        item.save()

    release = freeze_and_compare(project, tmp_path)

    texts = list(release_line_texts(release))
    assert len(texts) == 8 and any("\\\\" in t for t in texts)  # backslashes reached the stored lines


@pytest.mark.django_db
def test_many_media_paths_end_the_checksum_in_code_point_order(make_project, tmp_path):
    """The media map is read back from PostgreSQL in path order (COLLATE "C" on UTF-8): the same order
    as canonical JSON's sort_keys, for upper and lower case, prefixes, quotes, backslashes,
    non-ASCII, fullwidth and astral characters."""
    project = verified_project(make_project, tmp_path, "status", n=8)
    names = [
        "img/a.png",
        "img/a.png2",
        "img/A.png",
        "img/ä.png",
        "img/日本.png",
        'img/z"q.png',
        "img/back\\slash.png",
        "img/tab\tpath.png",
        "img/😀.png",
        "img/\uff21.png",
        "img/ÿ.png",
        "img/Ā.png",
        "img/-.png",
        "img/_.png",
        "img/~.png",
        "img/ .png",
    ]
    for k, item in enumerate(Item.objects.filter(project=project).order_by("external_id")):
        a, b = names[2 * k], names[2 * k + 1]
        sha_a, sha_b = hashlib.sha256(a.encode()).hexdigest(), hashlib.sha256(b.encode()).hexdigest()
        for sha in (sha_a, sha_b):
            MediaAsset.objects.create(sha256=sha, kind="image", file=f"assets/{sha}.png")
        Item.objects.filter(pk=item.pk).update(
            payload={**item.payload, "image_a": a, "image_b": b}, media={"image_a": sha_a, "image_b": sha_b}
        )
    try:  # the reference against the new freeze; every export needs the files, so only the checksum
        with transaction.atomic():
            ref = reference_freeze(project=project, version="v1")
            expected, rows = ref.checksum, stored_rows(ref)
            raise Undo
    except Undo:
        pass

    release = release_freeze(project=project, version="v1")

    assert release.checksum == expected == documented_checksum(release)
    assert stored_rows(release) == rows
    assert release_checksum(release) == release.checksum


def test_streamed_media_map_hashes_the_bytes_of_the_canonical_one():
    rng = random.Random(5)
    alphabet = ['"', "\\", "\t", "\n", "\x00", "\x1f", "a", "A", "é", "日", "😀", "\u2028", "/", " ", "\uff21"]
    for size in (0, 1, 2, 7, 40):
        media = {
            "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))): hashlib.sha256(bytes([k])).hexdigest()
            for k in range(size)
        }
        for method in (LINES_AND_MEDIA, LINES_ONLY):
            one = checksum_start(protocol="status", split="test", option_seed=3)
            two = one.copy()
            assert checksum_finish_sorted(one, sorted(media.items()), method=method) == checksum_finish(
                two, media, method=method
            )
    head = checksum_start(protocol="status", split="test", option_seed=3)
    assert (
        head.copy().hexdigest() == hashlib.sha256(b'{"option_seed":3,"protocol":"status","split":"test"}\n').hexdigest()
    )


@pytest.mark.django_db
def test_a_spool_larger_than_memory_goes_to_a_file_and_freezes_alike(make_project, tmp_path, monkeypatch):
    project = verified_project(make_project, tmp_path, "changeit", n=20)
    rolled = []

    class Spool(tempfile.SpooledTemporaryFile):
        def rollover(self):
            rolled.append(True)
            super().rollover()

    monkeypatch.setattr(freezing, "SPOOL_MEMORY", 512)
    monkeypatch.setattr(freezing.tempfile, "SpooledTemporaryFile", Spool)

    freeze_and_compare(project, tmp_path)

    assert rolled == [True]


@pytest.mark.django_db
def test_release_items_are_written_by_one_copy_statement(make_project, tmp_path, monkeypatch):
    """However many chunks the rows are sent in, a release of fewer than freezing_copy.SEGMENT_ROWS
    items takes one COPY (larger ones one per segment: test_freeze_segments.py), and the items are
    read by one."""
    project = verified_project(make_project, tmp_path, "visualtrans", n=30)
    statements, writes = [], []
    real_copy, real_write = psycopg.Cursor.copy, psycopg.Copy.write

    def copy(self, statement, *args, **kwargs):
        statements.append(statement.as_string(self) if hasattr(statement, "as_string") else statement)
        return real_copy(self, statement, *args, **kwargs)

    def write(self, buffer):
        writes.append(len(buffer))
        return real_write(self, buffer)

    monkeypatch.setattr(psycopg.Cursor, "copy", copy)
    monkeypatch.setattr(psycopg.Copy, "write", write)
    monkeypatch.setattr(freezing, "FLUSH_BYTES", 1024)  # many chunks

    release = release_freeze(project=project, version="v1")

    into = [s for s in statements if "annotation_releaseitem" in s and "FROM STDIN" in s]
    read = [s for s in statements if "annotation_item" in s and "TO STDOUT" in s]
    assert len(into) == 1 and len(read) == 1
    assert len(writes) > 3
    assert ReleaseItem.objects.filter(release=release).count() == 30


# --- the same refusals, nothing written -----------------------------------------------------------


def refusal(freeze, project) -> str:
    before = (Release.objects.count(), ReleaseItem.objects.count())
    with pytest.raises(ReleaseRefused) as caught:
        freeze(project=project, version="v1")
    assert (Release.objects.count(), ReleaseItem.objects.count()) == before
    return str(caught.value)


def set_media(item, pairs: dict[str, tuple[str, str]]) -> None:
    """Point the item's image fields at (path, sha256)."""
    payload, media = dict(item.payload), dict(item.media)
    for field, (path, sha) in pairs.items():
        payload[field], media[field] = path, sha
    Item.objects.filter(pk=item.pk).update(payload=payload, media=media)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "case",
    ["across items", "within one item", "within an item after one across", "across after one within", "unstored"],
)
def test_media_refusals_name_what_the_reference_names(case, make_project, tmp_path):
    project = verified_project(make_project, tmp_path, "status", n=8)
    items = list(Item.objects.filter(project=project).order_by("external_id"))
    stored = list(MediaAsset.objects.values_list("sha256", flat=True))
    one, other = stored[0], stored[1]
    missing = ["f" * 64, "e" * 64]
    if case == "across items":
        set_media(items[2], {"image_a": ("img/shared.png", one)})
        set_media(items[5], {"image_b": ("img/shared.png", other)})
    elif case == "within one item":
        set_media(items[3], {"image_a": ("img/twice.png", one), "image_b": ("img/twice.png", other)})
    elif case == "within an item after one across":
        set_media(items[1], {"image_a": ("img/shared.png", one)})
        set_media(items[4], {"image_b": ("img/shared.png", other)})
        set_media(items[6], {"image_a": ("img/twice.png", one), "image_b": ("img/twice.png", other)})
    elif case == "across after one within":
        set_media(items[2], {"image_a": ("img/twice.png", one), "image_b": ("img/twice.png", other)})
        set_media(items[3], {"image_a": ("img/shared.png", one)})
        set_media(items[7], {"image_a": ("img/shared.png", other)})
    else:
        set_media(items[1], {"image_a": ("img/gone-1.png", missing[0])})
        set_media(items[6], {"image_b": ("img/gone-2.png", missing[1])})

    expected = refusal(reference_freeze, project)
    got = refusal(release_freeze, project)

    assert got == expected
    assert got.startswith(
        "media: 2 media file(s) have no stored copy (sha256 eeee" if case == "unstored" else "media: "
    )


# --- concurrency ------------------------------------------------------------------------------


def race_project(make_project, tmp_path):
    project = verified_project(make_project, tmp_path, "changeit", n=10)
    try:
        with transaction.atomic():
            expected = reference_freeze(project=project, version="ref").checksum
            raise Undo
    except Undo:
        pass
    return project, expected


@pytest.mark.django_db(transaction=True)
def test_two_freezes_of_one_version_at_once_make_one_release(make_project, tmp_path, monkeypatch):
    project, expected = race_project(make_project, tmp_path)

    how, first, second = race(
        monkeypatch,
        stop_in=freezing,
        at="vocabulary",  # inside the freeze, its release row written and its transaction open
        first=lambda: release_freeze(project=project, version="v1"),
        second=lambda: release_freeze(project=project, version="v1"),
    )

    assert how == "blocked"  # on the release's unique (project, version)
    assert first.error is None and first.result.checksum == expected
    assert isinstance(second.error, ReleaseRefused) and "release v1 exists already" in str(second.error)
    (release,) = Release.objects.filter(project=project)
    assert ReleaseItem.objects.filter(release=release).count() == 10
    assert ReleaseItem.objects.count() == 10


@pytest.mark.django_db(transaction=True)
def test_two_versions_frozen_at_once_are_two_whole_releases(make_project, tmp_path, monkeypatch):
    project, expected = race_project(make_project, tmp_path)

    how, first, second = race(
        monkeypatch,
        stop_in=freezing,
        at="vocabulary",
        first=lambda: release_freeze(project=project, version="v1"),
        second=lambda: release_freeze(project=project, version="v2"),
    )

    assert how == "committed" and (first.error, second.error) == (None, None)
    assert first.result.checksum == second.result.checksum == expected
    releases_made = Release.objects.filter(project=project)
    assert sorted(r.version for r in releases_made) == ["v1", "v2"]
    for release in releases_made:
        positions = ReleaseItem.objects.filter(release=release).order_by("position").values_list("position", flat=True)
        assert list(positions) == list(range(10))
        assert release_checksum(release) == expected


@pytest.mark.django_db(transaction=True)
def test_threads_freezing_one_version_leave_one_release(make_project, tmp_path):
    """Without a pause: four threads freeze v1 at the same moment."""
    project, expected = race_project(make_project, tmp_path)
    go = threading.Barrier(4)

    def work():
        go.wait(30)
        return release_freeze(project=project, version="v1")

    workers = [Worker(work) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        assert w.done.wait(60)

    done = [w for w in workers if w.error is None]
    assert len(done) == 1 and done[0].result.checksum == expected
    assert all(isinstance(w.error, ReleaseRefused) for w in workers if w.error is not None)
    assert Release.objects.filter(project=project).count() == 1
    assert ReleaseItem.objects.count() == 10
