"""statelab: StateLab's REST API from the command line.

    statelab --url URL --token TOKEN COMMAND ...   (or STATELAB_URL / STATELAB_TOKEN)

Commands: whoami, projects, import, releases, freeze, export, job launch|wait|cancel,
leaderboard, power, correlation (statelab COMMAND --help for each). Data goes to stdout (or -o FILE),
progress and messages to stderr (--quiet: no progress bars).

Exit status:
  0  done
  1  the server did the work and it failed: an import refused or failed (its error lines on
     stderr), a job failed or was cancelled, or (job --strict) finished with failed queries or
     unreadable judge replies
  2  usage: bad arguments, no URL or token
  3  the server refused the request (HTTP 400, 404, 409, ... : its message on stderr)
  4  not signed in or not allowed (HTTP 401, 403: a missing, wrong or expired token, or a role
     too low for the command)
  5  the server failed or could not be reached (HTTP 5xx, connection error, timeout)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from .client import ApiError, ConnectionFailed, ImportRun, JobProgress, StateLabClient
from .progress import Progress, human_bytes

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_REFUSED, EXIT_AUTH, EXIT_SERVER = 0, 1, 2, 3, 4, 5


class UsageError(Exception):
    pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        url = args.url or os.environ.get("STATELAB_URL", "")
        token = args.token or os.environ.get("STATELAB_TOKEN", "")
        if not url or not token:
            raise UsageError(
                "give the server and a token: --url/--token or STATELAB_URL/STATELAB_TOKEN "
                "(a token: python manage.py drf_create_token USER on the server, or the admin's Tokens)"
            )
        with StateLabClient(url, token, timeout=args.timeout) as client:
            return args.run(client, args)
    except UsageError as exc:
        print(f"statelab: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ApiError as exc:
        print(f"statelab: {exc.method} {exc.path}: HTTP {exc.status}: {exc.message}", file=sys.stderr)
        for line in exc.errors:
            print(f"  {line}", file=sys.stderr)
        if exc.status in (401, 403):
            return EXIT_AUTH
        return EXIT_SERVER if exc.status >= 500 else EXIT_REFUSED
    except (ConnectionFailed, TimeoutError) as exc:
        print(f"statelab: {exc}", file=sys.stderr)
        return EXIT_SERVER
    except KeyboardInterrupt:
        print("statelab: interrupted", file=sys.stderr)
        return 130


# --- commands ---------------------------------------------------------------------------------


def cmd_whoami(client: StateLabClient, args: argparse.Namespace) -> int:
    me = client.me()
    print(f"{me['username']}{' (superuser)' if me['is_superuser'] else ''} on {client.url}")
    return EXIT_OK


def cmd_projects(client: StateLabClient, args: argparse.Namespace) -> int:
    projects = client.projects()
    if args.json:
        _print_json(projects)
        return EXIT_OK
    rows = [("SLUG", "PROTOCOL", "ROLE", "ITEMS", "NAME")] + [
        (p["slug"], p["protocol"], p["role"], str(p["items"]), p["name"]) for p in projects
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[4])
    return EXIT_OK


def cmd_import(client: StateLabClient, args: argparse.Namespace) -> int:
    upload = Progress("upload", enabled=not args.quiet)
    zipping: list[Progress] = []  # made when the media beside the file are zipped with it

    def on_zip(done: int, total: int) -> None:
        if not zipping:
            zipping.append(Progress("zip", enabled=not args.quiet))
        zipping[0].update(done / total, f"{done} of {total} files (the items file and the media it names)")
        if done == total:
            zipping[0].close(f"{total} files")

    run = client.import_upload(
        args.project,
        args.file,
        verified=args.verified,
        annotations=args.annotations,
        format=args.format,
        strict=args.strict,
        update=args.update,
        on_bytes=lambda sent, total: upload.update(
            sent / total if total else 1.0, f"{human_bytes(sent)} of {human_bytes(total)}"
        ),
        on_zip=on_zip,
    )
    upload.close(human_bytes(run["file_bytes"]))
    print(f"import run {run['id']} {run['status']} ({client.url}{run['page']})", file=sys.stderr)
    if args.no_wait:
        _print_json(run) if args.json else print(run["id"])
        return EXIT_OK
    bar = Progress(f"import {run['id']}", enabled=not args.quiet)
    # The fraction of the file the worker has read; None (time shown) while queued, or from a server
    # that does not report progress.
    run = client.wait_import(run, poll=args.poll, on_poll=lambda r: bar.update(r.get("progress"), r["status"]))
    bar.close(run["status"], fraction=1.0 if run["status"] == "finished" else None)
    return _import_outcome(run, as_json=args.json)


def _import_outcome(run: ImportRun, *, as_json: bool) -> int:
    if as_json:
        _print_json(run)
    if run["status"] == "finished":
        if not as_json:
            _print_import_report(run["report"] or {})
        return EXIT_OK
    read_as = f" (read as {run['read_as']})" if run.get("read_as") else ""
    print(f"statelab: import run {run['id']} {run['status']}{read_as}: {run['error_count']} error(s)", file=sys.stderr)
    for line in run["errors"]:
        print(f"  {line}", file=sys.stderr)
    return EXIT_FAILED


# Report entries printed on lines of their own after the counts.
_REPORT_TEXT = ("format", "format_label", "notes", "kept_fields", "kept", "updated_items")


def _print_import_report(report: dict[str, Any]) -> None:
    """The counts on one line; then the format read, its reader's notes and the fields kept."""
    counts = {k: v for k, v in report.items() if k not in _REPORT_TEXT}
    print(
        ", ".join(f"{key} {value}" for key, value in counts.items() if not isinstance(value, dict))
        + "".join(
            f"; {key}: " + ", ".join(f"{k} {v}" for k, v in value.items())
            for key, value in counts.items()
            if isinstance(value, dict)
        )
    )
    if report.get("format") and report["format"] != "statelab":
        print(f"read as {report['format']}: {report.get('format_label') or report['format']}")
    for note in report.get("notes") or []:
        print(f"- {note}")
    if report.get("kept"):
        print(report["kept"])
    for updated in report.get("updated_items") or []:
        print(f"updated {updated['id']}: {', '.join(updated['fields'])}")


def cmd_releases(client: StateLabClient, args: argparse.Namespace) -> int:
    releases = client.releases(args.project)
    if args.json:
        _print_json(releases)
        return EXIT_OK
    if not releases:
        # A message, not a row: stdout stays empty for a script that reads the rows.
        print(f"no releases yet (statelab freeze {args.project} VERSION makes one)", file=sys.stderr)
    for r in releases:
        print(f"{r['version']}\t{r['split']}\t{r['item_count']} items\t{r['checksum']}\t{r['created_at']}")
    return EXIT_OK


def cmd_freeze(client: StateLabClient, args: argparse.Namespace) -> int:
    release = client.freeze(args.project, args.version, split=args.split)
    if args.json:
        _print_json(release)
    else:
        print(f"release {release['version']} frozen: {release['item_count']} items, checksum {release['checksum']}")
    return EXIT_OK


def cmd_export(client: StateLabClient, args: argparse.Namespace) -> int:
    bar = Progress("export", enabled=not args.quiet)

    def on_bytes(done: int, total: int | None) -> None:
        bar.update(done / total if total else None, human_bytes(done) + (f" of {human_bytes(total)}" if total else ""))

    path = client.export(args.project, args.version, args.output, fmt=args.format, on_bytes=on_bytes)
    size = path.stat().st_size
    bar.close(human_bytes(size))
    print(path)
    return EXIT_OK


def cmd_job_launch(client: StateLabClient, args: argparse.Namespace) -> int:
    job = client.launch_job(
        args.project, args.endpoint, release=args.release, mode=args.mode, params=parse_params(args.param)
    )
    print(f"job {job['id']} {job['status']} ({job['model']} on {job['project']}, {job['protocol']})", file=sys.stderr)
    if args.no_wait:
        _print_json(job) if args.json else print(job["id"])
        return EXIT_OK
    return _wait_job(client, job["id"], args)


def cmd_job_wait(client: StateLabClient, args: argparse.Namespace) -> int:
    return _wait_job(client, args.job, args)


def _wait_job(client: StateLabClient, job_id: int, args: argparse.Namespace) -> int:
    bar = Progress(f"job {job_id}", enabled=not args.quiet)

    def on_poll(p: JobProgress) -> None:
        note = f"{p['status']}: {p['done']} done, {p['failed']} failed of {p['total']}"
        if p["rate_per_s"]:
            note += f", {p['rate_per_s']:.2f}/s"
        if p["eta_s"] and p["status"] == "running":
            note += f", ETA {p['eta_s']:.0f}s"
        bar.update(p["percent"] / 100 if p["total"] else None, note)

    progress = client.wait_job(job_id, poll=args.poll, on_poll=on_poll)
    bar.close(
        f"{progress['status']}: {progress['done']} done, {progress['failed']} failed of {progress['total']}",
        fraction=progress["percent"] / 100 if progress["total"] else None,
    )
    if args.json:
        _print_json(progress)
    if progress["status"] in ("failed", "cancelled"):
        print(
            f"statelab: job {job_id} {progress['status']}" + (f": {progress['error']}" if progress["error"] else ""),
            file=sys.stderr,
        )
        return EXIT_FAILED
    if progress["failed"]:
        print(
            f"statelab: warning: job {job_id} finished with {progress['failed']} of {progress['total']} queries failed",
            file=sys.stderr,
        )
        for failure in progress["failures"][:5]:
            print(f"  {failure['item']} / {failure['query']}: {failure['error']}", file=sys.stderr)
    unreadable = progress.get("unreadable") or 0
    if unreadable:
        print(
            f"statelab: warning: job {job_id} finished with {unreadable} judge replies unreadable after repairs "
            "(scored as missing; retry the failed queries to ask again)",
            file=sys.stderr,
        )
        for reply in progress.get("unreadable_replies", [])[:5]:
            print(f"  {reply['item']} / {reply['query']}: {reply['reason']}", file=sys.stderr)
    if args.strict and (progress["failed"] or unreadable):
        return EXIT_FAILED
    return EXIT_OK


def cmd_job_cancel(client: StateLabClient, args: argparse.Namespace) -> int:
    if client.cancel_job(args.job):
        print(f"job {args.job} cancelled")
        return EXIT_OK
    print(f"statelab: job {args.job} had already ended", file=sys.stderr)
    return EXIT_REFUSED


def cmd_leaderboard(client: StateLabClient, args: argparse.Namespace) -> int:
    board = client.leaderboard(
        args.project,
        release=args.release,
        judge=args.judge,
        fmt=args.format,
        details=args.details,
        rank_by=args.rank_by,
        baseline=args.baseline,
    )
    return _write_table(board, args)


def cmd_correlation(client: StateLabClient, args: argparse.Namespace) -> int:
    report = client.correlation(args.project, release=args.release, fmt=args.format, details=args.details)
    return _write_table(report, args)


def cmd_power(client: StateLabClient, args: argparse.Namespace) -> int:
    plan = client.power(
        args.project,
        release=args.release,
        judge=args.judge,
        half_width=args.half_width,
        difference=args.difference,
        metric=args.metric,
        baseline=args.baseline,
        fmt=args.format,
    )
    return _write_table(plan, args)


def _write_table(data: Any, args: argparse.Namespace) -> int:
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n" if args.format == "json" else data
    if args.output:
        with open(args.output, "w", encoding="utf-8") as out:
            out.write(text)
        print(args.output, file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


# --- helpers ----------------------------------------------------------------------------------


def parse_params(pairs: Sequence[str]) -> dict[str, Any]:
    """KEY=VALUE pairs; a value is JSON when it parses (numbers, booleans, lists), else text."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param wants KEY=VALUE, got {pair!r}")
        try:
            params[key.strip()] = json.loads(value)
        except ValueError:
            params[key.strip()] = value.strip()
    return params


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="statelab",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__[__doc__.index("Exit status") :],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", help="the server, e.g. https://statelab.example.org (env STATELAB_URL)")
    parser.add_argument("--token", help="API token (env STATELAB_TOKEN)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, run, help: str, **kwargs) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help, **kwargs)
        if run is not None:
            sub.set_defaults(run=run)
        return sub

    command("whoami", cmd_whoami, "check the token: the signed-in user")
    sub = command("projects", cmd_projects, "the projects you are a member of, with your role")
    sub.add_argument("--json", action="store_true")

    sub = command(
        "import",
        cmd_import,
        "upload items (.jsonl, .json, .zip, or the authors' release as published: a file, or a folder sent "
        "as a zip; --annotations: ratings or answers), then follow the import run until it is done",
    )
    sub.add_argument("project")
    sub.add_argument("file", help="a file, or a folder (sent as a zip of its contents)")
    sub.add_argument("--verified", action="store_true", help="import as a published benchmark's verified items")
    sub.add_argument(
        "--format",
        metavar="NAME",
        help="the items' format: statelab (the project's own item lines) or one of the protocol's authors' "
        "formats (default: the server detects it)",
    )
    sub.add_argument(
        "--strict", action="store_true", help="refuse fields the protocol does not know instead of keeping them"
    )
    sub.add_argument(
        "--update",
        action="store_true",
        help="items whose id the project holds with other content take the file's content (a later release of "
        "the same file); without it such lines are refused",
    )
    sub.add_argument("--annotations", action="store_true", help="the file holds human annotations, not items")
    sub.add_argument("--no-wait", action="store_true", help="print the run id and return at once")
    sub.add_argument("--poll", type=float, default=1.0, help="seconds between polls (default 1)")
    sub.add_argument("--json", action="store_true", help="print the run as JSON")

    sub = command("releases", cmd_releases, "the project's releases")
    sub.add_argument("project")
    sub.add_argument("--json", action="store_true")

    sub = command("freeze", cmd_freeze, "freeze the project's verified items of a split as a new release")
    sub.add_argument("project")
    sub.add_argument("version")
    sub.add_argument("--split", default="test")
    sub.add_argument("--json", action="store_true")

    sub = command("export", cmd_export, "download a release, streamed to disk")
    sub.add_argument("project")
    sub.add_argument("version")
    sub.add_argument("-o", "--output", help="file or folder (default: the server's file name, here)")
    sub.add_argument(
        "--format",
        default="json",
        metavar="FORMAT",
        help="json (default), jsonl, zip (with the media), hf (zipped dataset folder); coco, coco_zip for box "
        "projects; or the name of an authors' format the project's protocol writes, a zip of the paper's own "
        "files (given a format the project does not export to, the server names those it does)",
    )

    job = command("job", None, "launch an inference job and follow it; wait for or cancel one")
    job_commands = job.add_subparsers(dest="job_command", required=True, metavar="ACTION")
    sub = job_commands.add_parser("launch", help="start a job on the project, then follow its progress")
    sub.set_defaults(run=cmd_job_launch)
    sub.add_argument("project")
    sub.add_argument("--endpoint", required=True, help="the model endpoint's name")
    sub.add_argument("--release", help="release version (default: the live items)")
    sub.add_argument("--mode", default="evaluate", choices=["evaluate", "suggest"])
    sub.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="temperature, max_tokens, seed, frames, item_limit, strategy, chunk_size, ...",
    )
    sub.add_argument("--no-wait", action="store_true", help="print the job id and return at once")
    _wait_options(sub)
    sub = job_commands.add_parser("wait", help="follow a job's progress until it ends")
    sub.set_defaults(run=cmd_job_wait)
    sub.add_argument("job", type=int)
    _wait_options(sub)
    sub = job_commands.add_parser("cancel", help="cancel a job (exit 3 when it had already ended)")
    sub.set_defaults(run=cmd_job_cancel)
    sub.add_argument("job", type=int)

    sub = command("leaderboard", cmd_leaderboard, "a project's leaderboard")
    sub.add_argument("project")
    sub.add_argument("--release")
    sub.add_argument("--judge", help="score with this judge's ratings (video rating projects)")
    sub.add_argument("--format", default="json", choices=["json", "csv", "latex", "markdown"])
    sub.add_argument("--details", action="store_true", help="JSON with ranks, intervals and breakdowns")
    sub.add_argument(
        "--rank-by",
        help="another ranking where the protocol has one (video rating: criteria_mean; "
        "default: the paper's headline metric)",
    )
    sub.add_argument(
        "--baseline",
        metavar="MODEL",
        help="compare every other row with this model's on the ranking metric (paired difference, interval and "
        "Holm-adjusted p); json and markdown",
    )
    sub.add_argument("-o", "--output")

    sub = command(
        "power",
        cmd_power,
        "items (and raters) needed for a target interval half-width, with the project's board as the pilot",
    )
    sub.add_argument("project")
    sub.add_argument("--release", help="the pilot release (default: the newest)")
    sub.add_argument("--judge", help="plan from this judge's scores (video rating projects)")
    sub.add_argument(
        "--half-width",
        type=float,
        metavar="X",
        help="half-width of the 95 %% interval in the board's points (default 2; 0.02 on a 0-1 board)",
    )
    sub.add_argument("--baseline", metavar="MODEL", help="add the units needed to detect a difference from it")
    sub.add_argument(
        "--difference", type=float, metavar="D", help="the difference to detect at 80 %% power (default 5; 0.05)"
    )
    sub.add_argument("--metric", help="the metric of the tables (default: the board's headline)")
    sub.add_argument("--format", default="markdown", choices=["markdown", "json"])
    sub.add_argument("-o", "--output")

    sub = command("correlation", cmd_correlation, "human-judge correlation of a video rating project")
    sub.add_argument("project")
    sub.add_argument("--release")
    sub.add_argument("--format", default="json", choices=["json", "csv", "latex"])
    sub.add_argument("--details", action="store_true")
    sub.add_argument("-o", "--output")
    return parser


def _wait_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--poll", type=float, default=2.0, help="seconds between polls (default 2)")
    sub.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when the job finished with failed queries or unreadable judge replies",
    )
    sub.add_argument("--json", action="store_true", help="print the final progress as JSON")


if __name__ == "__main__":
    sys.exit(main())
