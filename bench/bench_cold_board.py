"""Cold and warm STATUS boards, PostgreSQL to the finished board, through the production code.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/statelab_bench REDIS_URL=redis://127.0.0.1:6379/11 \
        .venv/bin/python bench/bench_cold_board.py --items 1000000 --models 2

Loads N STATUS items, a frozen release of them and M finished jobs with 6N predictions each (1 %
failed, 10 % of the OSI pairs seen in the other option order, first-token log-probs on the OSI and
IR queries) into the configured database with ``COPY``, then builds the board (M model rows and the
Random row, 48 columns with 95 % bootstrap intervals each) with ``leaderboard.build``:

- cold, arrays: the board as shipped for a frozen STATUS release (evaluation/scoring/choice_arrays.py:
  packed columns into numpy, scored by ``score_columns``);
- cold, arrays before (``--before REV``): the same, with the array readers (packed.py,
  choice_answers.py, choice_arrays.py) and the exact means and bootstrap of protocols/kit/matrix.py
  as they were at the commit REV, read with ``git show`` and
  loaded in the build's child only; e.g. the readers of the JSON columns before the parsed columns
  (inference/models.py, Prediction) were read;
- cold, records: the same build through the record readers (``evaluation.selectors``: plain rows
  through server-side cursors, one ``ModelAnswer`` per prediction), which every board used before
  and which boards without an array form still use (``--skip-records`` leaves it out);
- cold, ORM: the record path with the ORM readers used before that, kept here only
  (``--skip-orm`` leaves it out: at 1M items it needs about 10 GB);
- warm: ``board_cache.board`` once to fill the cache, then again (a cache hit).

Each cold build runs in a forked child, so its peak RSS (ru_maxrss, from wait4) is its own;
"read" is the time spent inside the readers, the rest is scoring and intervals. Every cold board
must be identical to the arrays' (the script exits non-zero otherwise). PostgreSQL's own buffers are
warm after the load (the bench cannot drop the server's caches); "cold" means nothing of the board
is cached by StateLab. Use a scratch database: the script creates a project named bench-cold-* and
deletes it at the end (``--keep`` keeps it and ``--project`` reuses one).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import subprocess
import sys
import time
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.db import connection, connections  # noqa: E402
from django.utils import timezone  # noqa: E402

from annotation.models import Project, Release  # noqa: E402
from evaluation import board_cache, leaderboard, selectors  # noqa: E402
from evaluation.scoring import choice_arrays  # noqa: E402
from evaluation.scoring.answer_sets import ModelAnswer, ScoringItem  # noqa: E402
from inference.models import InferenceJob, JobMode, JobStatus, Prediction, PredictionStatus  # noqa: E402
from inference.selectors import job_items  # noqa: E402
from protocols.status import CATEGORIES, DIFFERENCES, QUERIES  # noqa: E402

LETTERS = "ABCD"


# --- the old readers (the baseline) ----------------------------------------------------------


def old_scoring_items(project, release):
    return [
        ScoringItem(key=i.key, external_id=i.external_id, payload=i.payload, resolved=i.resolved)
        for i in job_items(project=project, release=release)
    ]


def old_job_answers(job):
    rows = Prediction.objects.filter(job=job).values_list("item_id", "query", "status", "answer", "options", "logprobs")
    out = {}
    for item_id, query, status, answer, options, logprobs in rows.iterator(chunk_size=5000):
        value = answer if status == PredictionStatus.OK else None
        out[(item_id, query)] = ModelAnswer(value, options or None, logprobs)
    return out


# --- loading -----------------------------------------------------------------------------------


def _copy(sql: str, lines) -> None:
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        buf = []
        for line in lines:
            buf.append(line)
            if len(buf) == 20_000:
                copy.write("".join(buf))
                buf = []
        if buf:
            copy.write("".join(buf))


def _resolved(i: int, sci2: int, sci4: int) -> dict:
    states = [f"a closed box {i}", f"an open box {i}"]
    changes = [f"open box {i}", f"close box {i}", f"shake box {i}", f"lift box {i}"]
    return {
        "osi_a": {"options": states, "answer": "A"},
        "osi_b": {"options": states, "answer": "B"},
        "ir_a": {"options": ["image A", "image B"], "answer": "A"},
        "ir_b": {"options": ["image A", "image B"], "answer": "B"},
        "sci2": {"options": changes[:2], "answer": LETTERS[sci2]},
        "sci4": {"options": changes, "answer": LETTERS[sci4]},
    }


def load(n: int, models: int) -> Project:
    rng = np.random.default_rng(0)
    cats, diffs = rng.integers(0, len(CATEGORIES), n), rng.integers(0, len(DIFFERENCES), n)
    sci2, sci4 = rng.integers(0, 2, n), rng.integers(0, 4, n)
    slug = f"bench-cold-{os.getpid()}"
    project = Project.objects.create(slug=slug, name=slug, protocol="status")
    now = timezone.now().isoformat()
    _copy(
        "COPY annotation_item (external_id, payload, media, status, split, tags, is_gold, annotation_count,"
        " created_at, updated_at, project_id) FROM STDIN",
        (
            f"it{i}\t{json.dumps({'category': CATEGORIES[cats[i]], 'difference': DIFFERENCES[diffs[i]]})}"
            f"\t{{}}\tverified\t\t[]\tf\t0\t{now}\t{now}\t{project.pk}\n"
            for i in range(n)
        ),
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM annotation_item WHERE project_id = %s ORDER BY id", [project.pk])
        ids = [r[0] for r in cursor.fetchall()]
    release = Release.objects.create(project=project, version="v1", option_seed=11, checksum="0" * 64, item_count=n)
    _copy(
        "COPY annotation_releaseitem (position, payload, item_id, release_id, media) FROM STDIN",
        (
            f"{i}\t"
            + json.dumps(
                {
                    "id": f"it{i}",
                    "category": CATEGORIES[cats[i]],
                    "difference": DIFFERENCES[diffs[i]],
                    "resolved": _resolved(i, int(sci2[i]), int(sci4[i])),
                }
            )
            + f"\t{ids[i]}\t{release.pk}\t{{}}\n"
            for i in range(n)
        ),
    )
    for m in range(models):
        _load_job(project, release, ids, m, sci2, sci4, now)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE annotation_item, annotation_releaseitem, inference_prediction")
    return project


def _load_job(project, release, ids, m: int, sci2, sci4, now: str) -> None:
    n = len(ids)
    rng = np.random.default_rng(100 + m)
    wrong, failed = rng.random((n, 6)) < 0.25 + 0.1 * m, rng.random((n, 6)) < 0.01
    swapped = rng.random(n) < 0.10
    lp = np.log(rng.uniform(0.05, 0.95, size=(n, 4)))
    job = InferenceJob.objects.create(
        project=project,
        release=release,
        model_name=f"bench-model-{m}",
        protocol="status",
        mode=JobMode.IMPORTED,
        status=JobStatus.FINISHED,
        finished_at=timezone.now(),
    )

    def predictions():
        for i in range(n):
            resolved = _resolved(i, int(sci2[i]), int(sci4[i]))
            for j, q in enumerate(QUERIES):
                spec = resolved[q]
                k, truth = len(spec["options"]), LETTERS.index(spec["answer"])
                pick = (truth + 1) % k if wrong[i, j] else truth
                seen = spec["options"]
                if j < 2 and swapped[i]:
                    seen, pick = seen[::-1], 1 - pick
                logprobs = "\\N"
                if j < 4:
                    logprobs = json.dumps({"A": float(lp[i, j]), "B": float(np.log1p(-np.exp(lp[i, j])))})
                status, answer = ("failed", "\\N") if failed[i, j] else ("ok", json.dumps(LETTERS[pick]))
                yield (
                    f"{q}\t{status}\t\t\t{json.dumps(seen)}\t\t{answer}\t{logprobs}\t1\t0\t0\t0\t{now}\t{now}"
                    f"\t{ids[i]}\t{job.pk}\t0\n"
                )

    _copy(
        "COPY inference_prediction (query, status, error, prompt, options, raw_output, answer, logprobs, attempts,"
        " latency_ms, prompt_tokens, completion_tokens, created_at, updated_at, item_id, job_id, json_repairs)"
        " FROM STDIN",
        predictions(),
    )


def drop(project: Project) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM inference_prediction WHERE job_id IN (SELECT id FROM inference_inferencejob"
            " WHERE project_id = %s)",
            [project.pk],
        )
        cursor.execute(
            "DELETE FROM annotation_releaseitem WHERE release_id IN (SELECT id FROM annotation_release"
            " WHERE project_id = %s)",
            [project.pk],
        )
        cursor.execute("DELETE FROM inference_inferencejob WHERE project_id = %s", [project.pk])
    Release.objects.filter(project=project).delete()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM annotation_item WHERE project_id = %s", [project.pk])
    project.delete()


# --- measuring -------------------------------------------------------------------------------


def in_child(fn):
    """Run ``fn`` in a forked child: (its result, wall seconds, peak RSS bytes of the child)."""
    connections.close_all()  # the child opens its own connection
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            t = time.perf_counter()
            out = fn()
            payload = pickle.dumps((out, time.perf_counter() - t))
        except BaseException as exc:  # noqa: BLE001 (reported by the parent)
            payload = pickle.dumps((exc, None))
        with os.fdopen(write_fd, "wb") as fh:
            fh.write(payload)
        os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as fh:
        data = fh.read()
    _, _, usage = os.wait4(pid, 0)
    out, seconds = pickle.loads(data)
    if seconds is None:
        raise out
    return out, seconds, usage.ru_maxrss * 1024


def timed_readers(read_items, read_answers, spent: dict):
    def items(*args, **kwargs):
        t = time.perf_counter()
        try:
            return read_items(*args, **kwargs)
        finally:
            spent["read"] += time.perf_counter() - t

    def answers(*args, **kwargs):
        t = time.perf_counter()
        try:
            return read_answers(*args, **kwargs)
        finally:
            spent["read"] += time.perf_counter() - t

    return items, answers


BEFORE_MODULES = ("packed", "choice_answers", "choice_arrays")  # evaluation/scoring/, in import order


BEFORE_MATRIX = "protocols/kit/matrix.py"  # the scoring's exact means and bootstrap, also as at --before


def sources_at(rev: str) -> dict[str, str]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = {name: f"evaluation/scoring/{name}.py" for name in BEFORE_MODULES} | {"matrix": BEFORE_MATRIX}
    return {
        name: subprocess.run(
            ["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True, text=True, check=True
        ).stdout
        for name, path in paths.items()
    }


def load_matrix_before(source: str) -> None:
    """The exact means and the bootstrap of ``source`` (protocols/kit/matrix.py at --before) in place
    of the shipped ones: the scoring modules imported the shipped names, so the class's method and
    the module's functions they call are replaced in place (in a build's child only)."""
    from protocols.kit import matrix

    old = types.ModuleType("protocols.kit.matrix_before")
    old.__package__ = "protocols.kit"
    sys.modules[old.__name__] = old  # dataclasses look their module up there
    exec(compile(source, "<matrix before>", "exec"), old.__dict__)
    matrix.ItemMatrix.exact_means = old.ItemMatrix.exact_means
    matrix.bootstrap_means = old.bootstrap_means


def load_before(sources: dict[str, str]):
    """The array readers from ``sources`` in place of the shipped ones (in a build's child only);
    returns the old choice_arrays module, which leaderboard.build then calls."""
    import evaluation.scoring as package

    module = None
    for name in BEFORE_MODULES:
        full = f"evaluation.scoring.{name}"
        module = types.ModuleType(full)
        module.__package__ = "evaluation.scoring"
        module.__file__ = f"<{name} before>"
        sys.modules[full] = module
        setattr(package, name, module)
        exec(compile(sources[name], module.__file__, "exec"), module.__dict__)
    leaderboard.choice_arrays = module
    load_matrix_before(sources["matrix"])
    return module


def cold_build(project_pk: int, mode: str, before: dict[str, str] | None = None):
    """One cold build in a child: (board, seconds in the readers), wall seconds, peak RSS."""

    def run():
        spent = {"read": 0.0}
        if mode in ("arrays", "before"):
            readers = load_before(before) if mode == "before" else choice_arrays
            readers.release_items, readers.job_answers = timed_readers(
                readers.release_items, readers.job_answers, spent
            )
        else:
            choice_arrays.array_form = lambda protocol: False
            read_items, read_answers = (
                (old_scoring_items, old_job_answers)
                if mode == "orm"
                else (selectors.scoring_items, selectors.job_answers)
            )
            selectors.scoring_items, selectors.job_answers = timed_readers(read_items, read_answers, spent)
        board = leaderboard.build(Project.objects.get(pk=project_pk), release_version="v1")
        return board, spent["read"]

    return in_child(run)


def _backend_cpu() -> float | None:
    """CPU seconds (user + system) of this connection's PostgreSQL backend, when the server runs on
    this machine (read from /proc); None otherwise."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_readers(project_pk: int, mode: str, before: dict[str, str] | None):
    """The array readers alone, one after another on one connection (inside a transaction: no
    parallel reads), in a child: [(reader, wall s, server CPU s, client CPU s)]. CPU seconds hardly
    move with the other load on the machine, wall seconds do."""
    from django.db import transaction

    def run():
        readers = load_before(before) if mode == "before" else choice_arrays
        release = Release.objects.get(project_id=project_pk, version="v1")
        out = []

        def measure(label, fn):
            server, client, wall = _backend_cpu(), time.process_time(), time.perf_counter()
            result = fn()
            after = _backend_cpu()
            spent = None if server is None or after is None else after - server
            out.append((label, time.perf_counter() - wall, spent, time.process_time() - client))
            return result

        with transaction.atomic():
            items, hashes, _ = measure("items", lambda: readers.release_items("status", release))
            for job in InferenceJob.objects.filter(release=release).order_by("pk"):
                measure(f"job {job.pk}", lambda job=job: readers.job_answers("status", job, items, hashes))
        return out

    return in_child(run)[0]


LABELS = {
    "arrays": "arrays (shipped)",
    "before": "arrays (--before)",
    "records": "records (selectors)",
    "orm": "ORM (old, bench only)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--models", type=int, default=2)
    parser.add_argument("--skip-records", action="store_true", help="leave out the record readers")
    parser.add_argument("--skip-orm", action="store_true", help="leave out the ORM readers")
    parser.add_argument("--project", type=int, help="reuse a loaded bench project (its pk) instead of loading")
    parser.add_argument("--keep", action="store_true", help="keep the loaded project (for --project)")
    parser.add_argument("--cpu", action="store_true", help="only: CPU seconds of each reader, arrays vs --before")
    parser.add_argument("--load-only", action="store_true", help="load, keep and stop (then --project)")
    parser.add_argument("--before", metavar="REV", help="also build with the array readers as they were at REV")
    parser.add_argument("--rounds", type=int, default=1, help="build arrays (and --before) this many times, alternated")
    args = parser.parse_args()
    if args.project:
        project = Project.objects.get(pk=args.project)
        n = Release.objects.get(project=project, version="v1").item_count
        models = InferenceJob.objects.filter(project=project).count()
        print(f"STATUS cold board: {n:,} items, {models} models x {6 * n:,} predictions (loaded before)")
    else:
        n, models = args.items, args.models
        print(f"STATUS cold board: {n:,} items, {models} models x {6 * n:,} predictions", flush=True)
        t = time.perf_counter()
        project = load(n, models)
        print(f"  load (COPY, not part of any figure): {time.perf_counter() - t:.1f} s  project pk {project.pk}")
        if args.load_only:
            return
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    before = sources_at(args.before) if args.before else None
    if args.cpu:
        for _ in range(args.rounds):
            for mode in ["arrays"] + (["before"] if before else []):
                for label, wall, server, client in cpu_readers(project.pk, mode, before):
                    server_s = "n/a" if server is None else f"{server:6.2f} s"
                    print(
                        f"  {LABELS[mode]:18s} {label:8s} wall {wall:6.2f} s  server CPU {server_s}  client CPU"
                        f" {client:6.2f} s",
                        flush=True,
                    )
        return
    arrays = ["arrays"] + (["before"] if before else [])
    modes = arrays * args.rounds + ([] if args.skip_records else ["records"]) + ([] if args.skip_orm else ["orm"])
    results: dict[str, list] = {}
    reference = None
    try:
        for mode in modes:
            (board, read), seconds, rss = cold_build(project.pk, mode, before)
            results.setdefault(mode, []).append((seconds, read, rss))
            if reference is None:
                reference = json.dumps(board, sort_keys=True)
                columns = len(board["rows"][0]["ci"]) + len(board["rows"][0]["breakdowns"])
                print(f"  rows {len(board['rows'])}, columns with intervals per row {columns}")
            same = json.dumps(board, sort_keys=True) == reference
            print(
                f"  cold, {LABELS[mode]:22s} {seconds:7.2f} s  (read {read:6.2f} s, score {seconds - read:6.2f} s)"
                f"  peak RSS {rss / 2**20:7.0f} MiB  board identical to the arrays': {same}",
                flush=True,
            )
            if not same:
                sys.exit(f"the {mode} board differs from the arrays' board")
        new_s, new_read, new_rss = np.median(results["arrays"], axis=0)
        for mode in results:
            if mode == "arrays":
                continue
            s_, read, rss = np.median(results[mode], axis=0)
            print(
                f"  {mode} / arrays (medians of {len(results[mode])} and {len(results['arrays'])}): total"
                f" {s_ / new_s:.2f}x, read {read / new_read:.2f}x, score {(s_ - read) / (new_s - new_read):.2f}x,"
                f" peak RSS {rss / new_rss:.2f}x"
            )
        project = Project.objects.get(pk=project.pk)

        def fill():
            board_cache.cache.get = lambda key, default=None: default  # a miss, even on a reused project
            return board_cache.board(Project.objects.get(pk=project.pk), "v1") and None

        _, fill_s, _ = in_child(fill)
        warm = []
        for _ in range(5):
            t = time.perf_counter()
            board_cache.board(project, "v1")
            warm.append(time.perf_counter() - t)
        print(
            f"  cache fill (cold, through board_cache): {fill_s:.2f} s;"
            f" warm (hit): median {np.median(warm) * 1e3:.1f} ms; cold arrays / warm {new_s / np.median(warm):,.0f}x"
        )
        print(f"  bench process before the builds: {base_rss / 2**20:.0f} MiB (each child starts from it)")
    finally:
        if not args.keep:
            drop(project)


if __name__ == "__main__":
    main()
