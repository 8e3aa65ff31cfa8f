"""Import and export throughput of StateLab's streaming importer, against a per-row ORM baseline.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/statelab_bench \
        .venv/bin/python bench/bench_import.py --sizes 100000 1000000

What it measures, in one run on one database:
- streaming import (`manage.py import_items`, validate pass + COPY write pass) of N ChangeIt lines
  sharing 4 images, each N in a fresh subprocess: items/s over the import itself (Django start-up
  excluded) and the process's peak RSS (ru_maxrss);
- the naive baseline: parse each line and `Item.objects.create(...)` it, one row per save, on
  a smaller sample (--baseline lines), reported per item;
- export of a 100k-item release: freeze time, then the streamed JSON and JSONL exports consumed
  chunk by chunk (seconds, MB/s).
Use a scratch database: the script creates projects named bench-* and deletes them at the end.
Figures are printed as a Markdown table (see bench/README.md for recorded runs).

Small imports over HTTP, side by side with Label Studio (`--http-batches 100`):

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/statelab_bench \
        .venv/bin/python bench/bench_import.py --sizes --export 0 --baseline 0 --http-batches 100

- StateLab: a gunicorn server (--http-workers sync workers) started for the run; one client posts
  the same --http-batches files of --batch-size ChangeIt lines one request after the other, each
  as `files` (imported in the request, all or nothing: 201), then again as groups of
  --files-per-request files per request; with REDIS_URL also as the queued single `file` upload
  (202) that a Celery worker started for the run imports, the client polling each run to its end.
  Each mode imports into a fresh project; items/s is lines over the wall time of all requests.
  `--clients 1 2` repeats every mode (and the peer) with that many concurrent clients.
- Label Studio 1.23.2, in its own virtual environment under bench/.peers/ (created with
  `python -m venv` and `pip install label-studio==1.23.2` when missing), started on a free port
  with a temporary data directory (its own PostgreSQL database with --peer-database NAME, created
  and dropped by the run; SQLite otherwise), a project made through its API, the same batches
  posted as 1,000 tasks per `POST /api/projects/{id}/import`, then stopped. --no-peer skips it;
  if it cannot be installed or started the run says why and compares with the figure recorded
  in bench/README.md instead. StateLab and the peer run alternately, --rounds times.
- `--previous REV`: a second gunicorn serves this checkout with the import path of commit REV
  (annotation/importing/, protocols/fields.py, protocols/<name>/fields.py, protocols/changeit/boxes.py),
  its `files` modes run right before the current code's in every round (the queued mode is the
  current code's only).
The HTTP part lives in bench/import_http.py, the peer in bench/peer_labelstudio.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LABEL_STUDIO_IMPORT_PER_S = 1733  # measured on this machine class, see the shared peer notes
LABEL_STUDIO_EXPORT_100K_S = 488

CHILD = r"""
import resource, sys, time
import django
django.setup()
from django.core.management import call_command
t = time.perf_counter()
args = [sys.argv[1], sys.argv[2], "--protocol", "changeit", "--create"] + sys.argv[3:]
call_command("import_items", *args)
print("RESULT", time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def write_jsonl(path: Path, n: int) -> Path:
    from annotation.importing.samples import sample_line, sample_media_paths

    if path.exists():
        return path
    with open(path, "w", encoding="utf-8") as fh:
        buf = []
        for i in range(n):
            buf.append(json.dumps(sample_line("changeit", i, media=sample_media_paths("changeit", i))))
            if len(buf) == 10_000:
                fh.write("\n".join(buf) + "\n")
                buf = []
        if buf:
            fh.write("\n".join(buf) + "\n")
    return path


def streaming_import(slug: str, path: Path, *extra: str) -> tuple[float, int]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, slug, str(path), *extra],
        cwd=REPO,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    _, seconds, rss_kb = proc.stdout.strip().splitlines()[-1].split()
    return float(seconds), int(rss_kb) * 1024


def orm_baseline(path: Path, n: int) -> float:
    """The naive importer: one json.loads and one Item.objects.create (its own INSERT and commit) per line."""
    from annotation.models import Item, Project

    project = Project.objects.create(slug="bench-orm", name="bench-orm", protocol="changeit")
    start = time.perf_counter()
    with open(path, encoding="utf-8") as fh:
        for i, raw in enumerate(fh):
            if i >= n:
                break
            obj = json.loads(raw)
            Item.objects.create(
                project=project,
                external_id=obj.pop("id"),
                split=obj.pop("split", "test"),
                tags=obj.pop("tags", []),
                payload=obj,
                status="annotated",
            )
    return time.perf_counter() - start


def export_run(path: Path, n: int) -> dict:
    from annotation.models import Project, Release
    from annotation.releases import release_export, release_freeze

    seconds, _ = streaming_import("bench-export", path, "--verified")
    project = Project.objects.get(slug="bench-export")
    t = time.perf_counter()
    release = release_freeze(project=project, version="v1")
    freeze_s = time.perf_counter() - t
    release = Release.objects.select_related("project").get(pk=release.pk)
    out = {"items": release.item_count, "freeze_s": freeze_s}
    for fmt in ("json", "jsonl"):
        t = time.perf_counter()
        size = 0
        for chunk in release_export(release, fmt):
            size += len(chunk)
        out[f"{fmt}_s"] = time.perf_counter() - t
        out[f"{fmt}_mb"] = size / 1e6
    return out


def cleanup() -> None:
    from django.db import connection

    from annotation.models import Item, Project, Release, ReleaseItem

    projects = list(Project.objects.filter(slug__startswith="bench-").values_list("id", flat=True))
    if not projects:
        return
    with connection.cursor() as cur:
        cur.execute(
            f'DELETE FROM "{ReleaseItem._meta.db_table}" WHERE release_id IN '
            f'(SELECT id FROM "{Release._meta.db_table}" WHERE project_id = ANY(%s))',
            [projects],
        )
        cur.execute(f'DELETE FROM "{Release._meta.db_table}" WHERE project_id = ANY(%s)', [projects])
        cur.execute(f'DELETE FROM "{Item._meta.db_table}" WHERE project_id = ANY(%s)', [projects])
    Project.objects.filter(id__in=projects).delete()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--baseline", type=int, default=5_000, help="lines for the per-row ORM baseline")
    parser.add_argument("--export", type=int, default=100_000, help="items in the exported release (0 skips)")
    parser.add_argument("--work-dir", type=Path, default=None, help="where generated files go (default: a temp dir)")
    parser.add_argument(
        "--http-batches", type=int, default=0, help="small imports over HTTP: this many files (0 skips)"
    )
    parser.add_argument("--batch-size", type=int, default=1000, help="lines per file of the HTTP imports")
    parser.add_argument("--files-per-request", type=int, default=10, help="files per request in the batched mode")
    parser.add_argument("--http-workers", type=int, default=2, help="gunicorn sync workers of StateLab's server")
    parser.add_argument("--rounds", type=int, default=2, help="HTTP rounds, StateLab and Label Studio alternated")
    parser.add_argument("--clients", type=int, nargs="+", default=[1], help="concurrent HTTP clients (each count)")
    parser.add_argument("--no-peer", action="store_true", help="leave Label Studio out of the HTTP rounds")
    parser.add_argument("--no-queued", action="store_true", help="leave the queued (Celery) mode out")
    parser.add_argument(
        "--previous",
        metavar="REV",
        default=None,
        help="also run the `files` modes with the import code of this commit on this checkout, alternated",
    )
    parser.add_argument(
        "--peer-database",
        default=None,
        help="PostgreSQL database for Label Studio, created and dropped (else SQLite)",
    )
    args = parser.parse_args()

    if "postgres" not in os.environ.get("DATABASE_URL", ""):
        sys.exit("Set DATABASE_URL to a scratch PostgreSQL database.")
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="statelab-bench-"))
    os.environ.setdefault("MEDIA_ROOT", str(work / "media"))
    os.environ.setdefault("STATELAB_CACHE_ROOT", str(work / "cache"))
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from annotation.importing.samples import write_sample_media

    cleanup()
    data = work / "data"
    write_sample_media(data, "changeit")
    rows = []
    try:
        if args.http_batches:
            from import_http import http_runs

            http_runs(args)
        for n in args.sizes:
            path = write_jsonl(data / f"items-{n}.jsonl", n)
            seconds, rss = streaming_import(f"bench-{n}", path)
            rows.append((f"streaming import, {n:,} lines", n / seconds, seconds, rss))
            print(
                f"import {n:>9,} lines: {seconds:7.1f} s  {n / seconds:9,.0f} items/s  peak RSS {rss / 2**20:5.0f} MiB",
                flush=True,
            )
        base_s = None
        if args.baseline > 0:  # --baseline 0 skips the per-row baseline
            base_path = write_jsonl(data / f"items-{args.baseline}.jsonl", args.baseline)
            base_s = orm_baseline(base_path, args.baseline)
            print(
                f"per-row ORM baseline, {args.baseline:,} lines: {base_s:.1f} s  {args.baseline / base_s:,.0f} items/s "
                f"({base_s / args.baseline * 1e6:.0f} µs per item)",
                flush=True,
            )
        export = None
        if args.export:
            export = export_run(write_jsonl(data / f"items-{args.export}.jsonl", args.export), args.export)
            print(
                f"release of {export['items']:,} items: freeze {export['freeze_s']:.1f} s, "
                f"export JSON {export['json_s']:.2f} s ({export['json_mb']:.0f} MB), "
                f"JSONL {export['jsonl_s']:.2f} s ({export['jsonl_mb']:.0f} MB)",
                flush=True,
            )
    finally:
        cleanup()

    print("\n| measurement | items/s | time | peak RSS | vs Label Studio |")
    print("|---|---|---|---|---|")
    for label, rate, seconds, rss in rows:
        print(
            f"| {label} | {rate:,.0f} | {seconds:.1f} s | {rss / 2**20:.0f} MiB | "
            f"{rate / LABEL_STUDIO_IMPORT_PER_S:.1f}× |"
        )
    if base_s:
        rate = args.baseline / base_s
        print(
            f"| per-row `Item.objects.create`, {args.baseline:,} lines | {rate:,.0f} | "
            f"{base_s / args.baseline * 1e6:.0f} µs/item | – | {rate / LABEL_STUDIO_IMPORT_PER_S:.1f}× |"
        )
    if export:
        print(
            f"| freeze release, {export['items']:,} items | {export['items'] / export['freeze_s']:,.0f} | "
            f"{export['freeze_s']:.1f} s | – | – |"
        )
        for fmt in ("json", "jsonl"):
            print(
                f"| streamed {fmt.upper()} export, {export['items']:,} items | "
                f"{export['items'] / export[f'{fmt}_s']:,.0f} | "
                f"{export[f'{fmt}_s']:.2f} s | – | {LABEL_STUDIO_EXPORT_100K_S / export[f'{fmt}_s']:.0f}× faster |"
            )
    print(f"\nfiles in {work}")


if __name__ == "__main__":
    main()
