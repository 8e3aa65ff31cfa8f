"""Freezing a release: the set-based freeze against the item-by-item freeze it replaced, in one run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/statelab_bench \
        .venv/bin/python bench/bench_freeze.py --sizes 100000 300000 --rounds 2

For each N: N verified items of one protocol (ChangeIt by default: the sample lines of
``annotation.importing.samples``, four shared images; ``--distinct-media`` gives each item files of
its own instead, so the release's media map has N entries) are imported into a fresh project with
``import_items --verified``; then the project is frozen alternately by

- **old**: the freeze as it was before (tests/annotation/freeze_reference.py, through bench/freeze_baseline.py): items
  read through the ORM in chunks of 2,000 after a separate pass for the protocol's vocabulary, the
  media map and the one-file-per-path check held in a Python dict, release items written by one
  ``COPY`` per 2,000 rows, the option orders drawn by the resolvers as they were
  (``use_old_resolvers``: the standard library's shuffle, ChangeIt's pool of other labels rebuilt
  for every item);
- **new**: ``annotation.releases.release_freeze`` as shipped: one ``COPY … TO STDOUT`` of the items
  into a spool file, one ``COPY … FROM STDIN`` of the release items while the lines are made and
  hashed, the media map and checks as statements over what was written, the resolvers as they are;

each freeze in a fresh subprocess (so peak RSS, ``ru_maxrss``, is its own; Django's start-up is
outside the timed part), ``--rounds`` times each, old first. Besides wall-clock seconds it prints
the CPU seconds (user + system) of the freezing process and of its PostgreSQL backend (read from
the process table when the server runs on this machine): figures a machine shared with other work
disturbs far less than the wall clock. After each round both releases are
compared: equal checksums, and equal release items (item, position, payload, media) row by row —
the script exits non-zero otherwise — then deleted. Use a scratch database: the script creates
projects named bench-freeze-* and deletes them at the end.

``--previous REV`` adds a third freeze to every round, between old and new: commit REV's own
set-based freeze, its files unpacked by ``git archive`` and run by its own bench_freeze.py (so the
gain of the latest change is measured in the same run); its release must equal the new one too.

``--resolver-objects 4 44 150`` times ChangeIt's ``resolve_queries`` alone instead (no database),
as before and as now, over vocabularies of that many objects with three states each.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from freeze_baseline import old_release_freeze, resolver_bench, use_old_resolvers  # noqa: E402

# --- one freeze in a fresh process ------------------------------------------------------------


def child(path: str, slug: str, version: str) -> None:
    import resource

    import django

    django.setup()
    from annotation.models import Project
    from annotation.releases import release_freeze

    project = Project.objects.get(slug=slug)
    freeze = old_release_freeze if path == "old" else release_freeze
    if path == "old":
        use_old_resolvers()
    backend = server_cpu_reader()
    before, server_before = resource.getrusage(resource.RUSAGE_SELF), backend()
    start = time.perf_counter()
    release = freeze(project=project, version=version)
    seconds = time.perf_counter() - start
    after, server_after = resource.getrusage(resource.RUSAGE_SELF), backend()
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    server = None if server_before is None or server_after is None else server_after - server_before
    result = {"seconds": seconds, "cpu": cpu, "server_cpu": server, "rss": after.ru_maxrss * 1024}
    print("RESULT " + json.dumps({**result, "checksum": release.checksum, "id": release.pk}))


def server_cpu_reader():
    """A function returning the CPU seconds (user + system) the freeze's PostgreSQL backend has
    used so far, read from the process table when the server runs on this machine; None otherwise."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        pid = cur.fetchone()[0]
    stat = Path(f"/proc/{pid}/stat")
    ticks = os.sysconf("SC_CLK_TCK")

    def read() -> float | None:
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime

    return read


def run_child(path: str, slug: str, version: str, tree: Path | None = None) -> dict:
    """One freeze in a fresh process: by this checkout, or (`tree`) by another commit's files as
    its own bench_freeze.py runs them (the "new" freeze of that commit)."""
    here = tree or REPO
    command = [sys.executable, str(here / "bench" / "bench_freeze.py"), "--child", path, slug, version]
    proc = subprocess.run(command, cwd=here, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1].removeprefix("RESULT "))


# --- the parent -------------------------------------------------------------------------------


def previous_tree(rev: str, work: Path) -> Path:
    """The files of commit `rev` (``git archive``), unpacked under `work`."""
    tree = work / f"previous-{rev}"
    if not tree.exists():
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", rev], cwd=REPO, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def median(values: list):
    return None if any(v is None for v in values) else statistics.median(values)


def fmt_s(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f} s"


def seed(work: Path, protocol: str, n: int) -> str:
    from django.core.management import call_command

    from annotation.importing.samples import sample_line, sample_media_paths, write_sample_media

    data = work / f"data-{protocol}"
    write_sample_media(data, protocol)
    path = data / f"items-{n}.jsonl"
    if not path.exists():
        with open(path, "w", encoding="utf-8") as fh:
            for i in range(n):
                fh.write(json.dumps(sample_line(protocol, i, media=sample_media_paths(protocol, i))) + "\n")
    slug = f"bench-freeze-{protocol}-{n}"
    call_command("import_items", slug, str(path), "--protocol", protocol, "--create", "--verified", verbosity=0)
    return slug


def distinct_media(slug: str, protocol: str) -> None:
    """Give every item a media file of its own at each single-path media field (a path and a hash
    nobody else names, with a stored-asset row for the hash; no file is needed to freeze), so the
    release ships as many media files as it has items."""
    from django.db import connection

    from annotation.models import Project
    from annotation.protocols import MEDIA_FIELDS

    project = Project.objects.get(slug=slug)
    fields = [name for name, kind in MEDIA_FIELDS[protocol].items() if kind in ("image", "video")]
    if not fields:
        sys.exit(f"{protocol} has no single-path media field for --distinct-media")
    with connection.cursor() as cur:
        for name in fields:
            cur.execute(
                "UPDATE annotation_item SET "
                "payload = payload || jsonb_build_object(%s::text, 'own/' || id || '-' || %s || '.png'), "
                "media = media || jsonb_build_object(%s::text, encode(sha256(convert_to(id || %s, 'UTF8')), 'hex')) "
                "WHERE project_id = %s",
                [name, name, name, name, project.pk],
            )
            cur.execute(
                "INSERT INTO annotation_mediaasset (sha256, kind, file, original_name, mime, size_bytes, created_at) "
                "SELECT media->>%s, 'image', 'bench-freeze/' || (media->>%s), '', '', 0, now() "
                "FROM annotation_item WHERE project_id = %s ON CONFLICT DO NOTHING",
                [name, name, project.pk],
            )


def rows_differ(old_id: int, new_id: int) -> int:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM (SELECT * FROM annotation_releaseitem WHERE release_id = %s) a "
            "FULL JOIN (SELECT * FROM annotation_releaseitem WHERE release_id = %s) b USING (position) "
            "WHERE a.item_id IS DISTINCT FROM b.item_id OR a.payload IS DISTINCT FROM b.payload "
            "OR a.media IS DISTINCT FROM b.media",
            [old_id, new_id],
        )
        return cur.fetchone()[0]


def export_bytes_equal(old_id: int, new_id: int) -> bool:
    """The JSONL export lines (what every export reads: the release items' JSON text) byte for byte."""
    import hashlib

    from annotation.models import Release
    from annotation.releases import release_line_texts

    hashes = []
    for pk in (old_id, new_id):
        digest = hashlib.sha256()
        for text in release_line_texts(Release.objects.get(pk=pk)):
            digest.update(text.encode() + b"\n")
        hashes.append(digest.hexdigest())
    return hashes[0] == hashes[1]


def drop_release(pk: int) -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("DELETE FROM annotation_releaseitem WHERE release_id = %s", [pk])
        cur.execute("DELETE FROM annotation_release WHERE id = %s", [pk])


def vacuum_release_items() -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("VACUUM annotation_releaseitem")


def cleanup() -> None:
    from django.db import connection

    from annotation.models import Project

    projects = list(Project.objects.filter(slug__startswith="bench-freeze-").values_list("id", flat=True))
    if not projects:
        return
    with connection.cursor() as cur:
        cur.execute(
            "DELETE FROM annotation_releaseitem WHERE release_id IN "
            "(SELECT id FROM annotation_release WHERE project_id = ANY(%s))",
            [projects],
        )
        cur.execute("DELETE FROM annotation_release WHERE project_id = ANY(%s)", [projects])
        cur.execute("DELETE FROM annotation_item WHERE project_id = ANY(%s)", [projects])
    Project.objects.filter(id__in=projects).delete()
    with connection.cursor() as cur:
        cur.execute("DELETE FROM annotation_mediaasset WHERE file LIKE %s", ["bench-freeze/%"])
    vacuum_release_items()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 300_000])
    parser.add_argument("--protocol", default="changeit")
    parser.add_argument("--rounds", type=int, default=2, help="old/new pairs per size, alternated")
    parser.add_argument(
        "--distinct-media", action="store_true", help="a media file of its own per item (default: four shared)"
    )
    parser.add_argument("--work-dir", type=Path, default=None, help="where generated files go (default: a temp dir)")
    parser.add_argument(
        "--resolver-objects", type=int, nargs="+", default=None, help="time ChangeIt's resolver alone (no database)"
    )
    parser.add_argument(
        "--previous",
        metavar="REV",
        default=None,
        help="also freeze with commit REV's set-based freeze (its files unpacked by git archive), between old and new",
    )
    parser.add_argument("--child", nargs=3, metavar=("PATH", "SLUG", "VERSION"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.resolver_objects:
        import django

        django.setup()
        for objects in args.resolver_objects:
            resolver_bench(objects)
        return
    if "postgres" not in os.environ.get("DATABASE_URL", ""):
        sys.exit("Set DATABASE_URL to a scratch PostgreSQL database.")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="statelab-bench-freeze-"))
    os.environ.setdefault("MEDIA_ROOT", str(work / "media"))
    os.environ.setdefault("STATELAB_CACHE_ROOT", str(work / "cache"))
    import django

    django.setup()
    cleanup()
    tree = previous_tree(args.previous, work) if args.previous else None
    paths = ("old", "previous", "new") if tree else ("old", "new")
    table = []
    try:
        for n in args.sizes:
            start = time.perf_counter()
            slug = seed(work, args.protocol, n)
            if args.distinct_media:
                distinct_media(slug, args.protocol)
            print(f"seeded {n:,} {args.protocol} items in {time.perf_counter() - start:.1f} s", flush=True)
            runs: dict[str, list[dict]] = {name: [] for name in paths}
            for k in range(args.rounds):
                old = run_child("old", slug, f"old-{k}")
                prev = run_child("new", slug, f"previous-{k}", tree) if tree else None
                new = run_child("new", slug, f"new-{k}")
                same_rows = rows_differ(old["id"], new["id"]) == 0
                same_export = export_bytes_equal(old["id"], new["id"])
                if prev is not None:
                    same_rows = same_rows and rows_differ(prev["id"], new["id"]) == 0
                    same_export = same_export and export_bytes_equal(prev["id"], new["id"])
                    if prev["checksum"] != new["checksum"]:
                        sys.exit("the previous and the new freeze differ")
                for name, r in (("old", old), ("previous", prev), ("new", new)):
                    if r is None:
                        continue
                    runs[name].append(r)
                    print(
                        f"  {n:>9,} {name}: {r['seconds']:6.2f} s  {n / r['seconds']:8,.0f} items/s  "
                        f"CPU {r['cpu']:6.2f} s + PostgreSQL {fmt_s(r['server_cpu'])}  "
                        f"peak RSS {r['rss'] / 2**20:5.0f} MiB",
                        flush=True,
                    )
                print(
                    f"  round {k + 1}: old/new {old['seconds'] / new['seconds']:.2f}×"
                    + (f", previous/new {prev['seconds'] / new['seconds']:.2f}×" if prev else "")
                    + ", checksums equal "
                    f"{old['checksum'] == new['checksum']}, rows equal {same_rows}, export lines equal {same_export}",
                    flush=True,
                )
                if old["checksum"] != new["checksum"] or not same_rows or not same_export:
                    sys.exit("the two freezes differ")
                for r in (old, prev, new):
                    if r is not None:
                        drop_release(r["id"])
                vacuum_release_items()  # the next round writes into a table without the dead rows
            table.append((n, runs))
    finally:
        cleanup()

    media = "a media file per item" if args.distinct_media else "four shared media files"
    print(f"\n{args.protocol}, {media}, medians of {args.rounds} alternated runs (each freeze in its own process)\n")
    print(
        "| items | path | wall s | items/s | process CPU s | PostgreSQL CPU s | CPU s in all | peak RSS | old / new |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n, runs in table:
        med = {k: {f: median([r[f] for r in runs[k]]) for f in ("seconds", "cpu", "server_cpu")} for k in runs}
        for k in runs:
            m, rss = med[k], max(r["rss"] for r in runs[k]) / 2**20
            total = None if m["server_cpu"] is None else m["cpu"] + m["server_cpu"]
            ratio = ""
            for base in ("old", "previous") if k == "new" else ():
                if base not in med:
                    continue
                b = med[base]
                ratio += f"{base}/new: wall **{b['seconds'] / m['seconds']:.2f}×**, "
                ratio += f"process CPU {b['cpu'] / m['cpu']:.2f}×"
                if total is not None:
                    ratio += f", CPU in all {(b['cpu'] + b['server_cpu']) / total:.2f}×"
                ratio += "; " if base == "old" and "previous" in med else ""
            print(
                f"| {n:,} | {k} | {m['seconds']:.2f} | {n / m['seconds']:,.0f} | {m['cpu']:.2f} | "
                f"{fmt_s(m['server_cpu'])} | {fmt_s(total)} | {rss:.0f} MiB | {ratio} |"
            )
    print(f"\nfiles in {work}")


if __name__ == "__main__":
    main()
