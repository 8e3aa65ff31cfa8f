"""The phases of one freeze, timed: wall, process CPU and the PostgreSQL backend's CPU per phase.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/statelab_bench \
        .venv/bin/python bench/freeze_phases.py --sizes 100000 --rounds 3 --previous HEAD

The project is seeded as bench_freeze.py seeds it; then each round freezes it with commit REV's
``release_freeze`` (its files unpacked by ``git archive``, imported from there) and with this
checkout's, each in a fresh process, alternately. A phase ends where the freeze calls (or returns
from) one of its own functions, wrapped here by name, so the timeline costs a clock read per phase
and nothing per item:

- checks, release row: up to the spool's ``__enter__``;
- spool (COPY out): ``_ItemSpool.__enter__`` (where the vocabulary is taken while the rows arrive,
  that pass is inside it);
- vocabulary pass: the protocol's vocabulary over the spooled payloads, when it is a pass of its own;
- lines made: until ``_FrozenLines.copy_chunks`` is exhausted (the COPY in runs meanwhile);
- COPY in, PostgreSQL's tail: until the media map's checksum starts (the COPY's end);
- media map, checks, checksum: ``_kept_media_checksum`` / ``_media_checksum``;
- release row saved, audit: up to and through ``audit_record``;
- commit: until ``release_freeze`` returns (the deferred foreign-key checks run here).

The two releases must have equal checksums (the script exits non-zero otherwise).
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_freeze  # noqa: E402

PHASES = (
    "checks, release row",
    "spool (COPY out)",
    "vocabulary pass",
    "lines made (COPY in meanwhile)",
    "COPY in, PostgreSQL's tail",
    "media map, checks, checksum",
    "release row saved",
    "audit",
    "commit (deferred FK checks)",
)


def child(tree: str, slug: str, version: str) -> None:
    sys.path.insert(0, tree)
    os.chdir(tree)
    import django

    django.setup()
    from annotation import freezing
    from annotation.models import Project

    project = Project.objects.get(slug=slug)
    backend = bench_freeze.server_cpu_reader()
    marks: list[tuple[str, float, float, float | None]] = []
    state = {"spool": False}

    def mark(name: str) -> None:
        marks.append((name, time.perf_counter(), time.process_time(), backend()))

    def around(owner, attr: str, before: str | None, after: str | None, flag: str | None = None) -> None:
        real = getattr(owner, attr, None)
        if real is None:
            return

        def wrapped(*args, **kwargs):
            if before and not state["spool"]:
                mark(before)
            if flag:
                state[flag] = True
            try:
                return real(*args, **kwargs)
            finally:
                if flag:
                    state[flag] = False
                if after and not state["spool"]:
                    mark(after)

        setattr(owner, attr, wrapped)

    real_chunks = freezing._FrozenLines.copy_chunks

    def copy_chunks(self, spool):
        yield from real_chunks(self, spool)
        mark(PHASES[3])

    freezing._FrozenLines.copy_chunks = copy_chunks
    around(freezing._ItemSpool, "__enter__", PHASES[0], PHASES[1], flag="spool")
    around(freezing, "vocabulary", None, PHASES[2])
    around(freezing, "_kept_media_checksum", PHASES[4], PHASES[5])
    around(freezing, "_media_checksum", PHASES[4], PHASES[5])
    around(freezing, "audit_record", PHASES[6], PHASES[7])
    mark("start")
    release = freezing.release_freeze(project=project, version=version)
    mark(PHASES[8])
    phases = {}
    for (_, t0, c0, s0), (name, t1, c1, s1) in zip(marks, marks[1:], strict=False):
        wall, cpu, server = phases.get(name, (0.0, 0.0, 0.0))
        phases[name] = (wall + t1 - t0, cpu + c1 - c0, None if s0 is None or s1 is None else server + s1 - s0)
    total = (marks[-1][1] - marks[0][1], marks[-1][2] - marks[0][2], (marks[-1][3] or 0) - (marks[0][3] or 0))
    print("RESULT " + json.dumps({"phases": phases, "total": total, "checksum": release.checksum, "id": release.pk}))


def run_child(tree: Path, slug: str, version: str) -> dict:
    command = [sys.executable, str(HERE / "freeze_phases.py"), "--child", str(tree), slug, version]
    proc = subprocess.run(command, cwd=tree, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1].removeprefix("RESULT "))


def table(name: str, runs: list[dict]) -> None:
    print(f"\n{name} (medians of {len(runs)}: wall s / process CPU s / PostgreSQL CPU s)\n")
    print("| phase | wall s | process CPU s | PostgreSQL CPU s |")
    print("|---|---|---|---|")
    for phase in (*PHASES, "total"):
        values = [r["total"] if phase == "total" else r["phases"].get(phase) for r in runs]
        if any(v is None for v in values):
            continue
        wall, cpu, server = (statistics.median(v[k] for v in values) for k in range(3))
        print(f"| {phase} | {wall:.2f} | {cpu:.2f} | {server:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--protocol", default="changeit")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--previous", metavar="REV", default="HEAD")
    parser.add_argument("--child", nargs=3, metavar=("TREE", "SLUG", "VERSION"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if "postgres" not in os.environ.get("DATABASE_URL", ""):
        sys.exit("Set DATABASE_URL to a scratch PostgreSQL database.")
    work = Path(tempfile.mkdtemp(prefix="statelab-freeze-phases-"))
    os.environ.setdefault("MEDIA_ROOT", str(work / "media"))
    os.environ.setdefault("STATELAB_CACHE_ROOT", str(work / "cache"))
    import django

    django.setup()
    bench_freeze.cleanup()
    trees = {"previous": bench_freeze.previous_tree(args.previous, work), "new": bench_freeze.REPO}
    try:
        for n in args.sizes:
            slug = bench_freeze.seed(work, args.protocol, n)
            runs: dict[str, list[dict]] = {name: [] for name in trees}
            for k in range(args.rounds):
                done = {name: run_child(tree, slug, f"{name}-{k}") for name, tree in trees.items()}
                for name, r in done.items():
                    runs[name].append(r)
                    print(f"  {n:,} {name}: " + ", ".join(f"{p} {v[0]:.2f}" for p, v in r["phases"].items()))
                if len({r["checksum"] for r in done.values()}) != 1:
                    sys.exit("the freezes differ")
                for r in done.values():
                    bench_freeze.drop_release(r["id"])
                bench_freeze.vacuum_release_items()
            for name in trees:
                table(f"{n:,} {args.protocol} items, {name}", runs[name])
    finally:
        bench_freeze.cleanup()


if __name__ == "__main__":
    main()
