"""StateLab's side of the small-import bench over HTTP (bench/bench_import.py --http-batches): a
gunicorn server for the run, the batches posted as `files` (imported in the request) or as a queued
`file`, rounds alternated with Label Studio (bench/peer_labelstudio.py) and, with --previous REV,
with a second server running REV's import code on top of this checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from peer_labelstudio import (
    LABEL_STUDIO_HTTP_BATCHES_PER_S,
    LABEL_STUDIO_VERSION,
    REPO,
    LabelStudio,
    free_port,
    in_clients,
    stop,
    wait_http,
)

# What --previous REV takes from REV: the import path (the rest of the tree is this checkout's, so
# that only the import code differs between the two servers).
IMPORT_PATHS = ("annotation/importing/", "protocols/fields.py", "protocols/changeit/boxes.py")


def _is_import_path(path: str) -> bool:
    return (
        path.startswith(IMPORT_PATHS[0])
        or path in IMPORT_PATHS[1:]
        or (path.startswith("protocols/") and path.endswith("/fields.py") and path.count("/") == 2)
    )


def previous_tree(rev: str, into: Path) -> Path:
    """This checkout's files (tracked and new, as they are now) copied into `into`, with the import
    path (IMPORT_PATHS, protocols/<name>/fields.py) as it was at commit `rev`. The checkout is not
    touched (git ls-files, git show)."""
    files = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "-co", "--exclude-standard"], check=True, capture_output=True
    ).stdout
    archive = subprocess.run(
        ["tar", "-c", "--null", "-T", "-", "--ignore-failed-read"], cwd=REPO, input=files, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    for name in files.decode().split("\0"):
        if name and _is_import_path(name):
            (into / name).unlink(missing_ok=True)
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-tree", "-r", "--name-only", rev, "--", "annotation/importing", "protocols"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    for name in filter(_is_import_path, listed):
        blob = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{name}"], check=True, capture_output=True)
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        (into / name).write_bytes(blob.stdout)
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", rev], check=True, capture_output=True, text=True
    ).stdout.strip()
    print(f"previous code: the import path of {rev} ({commit}) on this checkout, in {into}", flush=True)
    return into


def batch_lines(protocol_lines, start: int, n: int) -> bytes:
    return ("\n".join(json.dumps(line) for line in protocol_lines(start, n)) + "\n").encode()


def changeit_lines(start: int, n: int):
    from annotation.importing.samples import sample_line, sample_media_paths

    for i in range(start, start + n):
        yield sample_line("changeit", i, media=sample_media_paths("changeit", i))


class StateLabServer:
    """gunicorn (sync workers) serving this checkout for the run, and a researcher's token."""

    def __init__(self, workers: int, celery: bool, tree: Path = REPO):
        from django.contrib.auth import get_user_model
        from rest_framework.authtoken.models import Token

        user, _ = get_user_model().objects.get_or_create(username="bench-importer")
        self.token = Token.objects.get_or_create(user=user)[0].key
        self.user = user
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, DEBUG="0")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi:application", "-w", str(workers)]
            + ["-b", f"127.0.0.1:{self.port}", "--log-level", "warning", "--no-control-socket"],
            cwd=tree,
            env=env,
        )
        self.worker = None
        try:
            wait_http(f"{self.base}/api/me/", lambda code: code in (401, 403), self.proc, 60)
            if celery:
                self.worker = subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "default", "-c", "1"]
                    + ["--loglevel", "warning", "-n", f"bench-import-{self.port}@%h"],
                    cwd=REPO,
                    env=env,
                )
        except BaseException:
            self.close()
            raise

    def project(self, slug: str):
        from annotation.models import Membership, Project, Role

        project = Project.objects.create(slug=slug, name=slug, protocol="changeit")
        Membership.objects.create(project=project, user=self.user, role=Role.RESEARCHER)
        return project

    def close(self) -> None:
        stop(self.worker)
        stop(self.proc)


def statelab_http(
    server: StateLabServer, bodies: list[bytes], mode: str, per_request: int, tag: str, clients: int = 1
) -> float:
    """Seconds to import `bodies` over HTTP into a new project: `files` (per_request files a
    request, imported in the request) or `queued` (one `file` a request, polled to its end)."""
    import httpx

    from annotation.models import Item

    project = server.project(f"bench-http-{mode}-{tag}")
    url = f"/api/projects/{project.slug}/imports/"

    def make_client():
        return httpx.Client(base_url=server.base, headers={"Authorization": f"Token {server.token}"}, timeout=300)

    def send_files(client, k: int, group: list[bytes]) -> None:
        files = [("files", (f"part-{k}-{j}.jsonl", body)) for j, body in enumerate(group)]
        r = client.post(url, files=files)
        if r.status_code != 201:
            raise RuntimeError(f"StateLab import: {r.status_code} {r.text[:500]}")

    def send_queued(client, k: int, body: bytes) -> None:
        r = client.post(url, files=[("file", (f"part-{k}.jsonl", body))])
        if r.status_code != 202:
            raise RuntimeError(f"StateLab import: {r.status_code} {r.text[:500]}")
        run = r.json()
        while not run["done"]:
            time.sleep(0.005)
            run = client.get(run["url"]).json()
        if run["status"] != "finished":
            raise RuntimeError(f"StateLab import run {run['id']}: {run['status']} {run['errors'][:3]}")

    if mode == "files":
        groups = [bodies[k : k + per_request] for k in range(0, len(bodies), per_request)]
        seconds = in_clients(clients, groups, make_client, send_files)
    else:
        seconds = in_clients(clients, bodies, make_client, send_queued)
    expected = sum(body.count(b"\n") for body in bodies)
    if (got := Item.objects.filter(project=project).count()) != expected:
        raise RuntimeError(f"StateLab imported {got} items, expected {expected}")
    return seconds


def http_runs(args) -> list[tuple[str, float, float]]:
    """(what, items/s, seconds) of every HTTP round: StateLab's (and, with --previous, the previous
    import code's, right before it) and Label Studio's alternated."""
    import tempfile

    from annotation.importing.runs import import_media_root
    from annotation.importing.samples import write_sample_media

    write_sample_media(import_media_root(), "changeit")
    n, size = args.http_batches, args.batch_size
    bodies = [batch_lines(changeit_lines, k * size, size) for k in range(n)]
    # The peer gets the same items as tasks: their fields as data, the image as a URL of its own.
    tasks = [
        [
            {"data": {**line, "image": f"/data/local-files/?d={line['image']}"}}
            for line in changeit_lines(k * size, size)
        ]
        for k in range(n)
    ]
    items = n * size
    celery = bool(os.environ.get("REDIS_URL")) and not args.no_queued
    modes = [("files", 1), ("files", args.files_per_request)] + ([("queued", 1)] if celery else [])
    peer = None
    peer_note = ""
    if not args.no_peer:
        peer = LabelStudio(args.peer_database)
        try:
            print(f"starting Label Studio {LABEL_STUDIO_VERSION} ...", flush=True)
            peer.start()
        except Exception as exc:  # noqa: BLE001 - the run goes on without the peer, saying why
            peer.close()
            peer = None
            peer_note = f"Label Studio {LABEL_STUDIO_VERSION} could not be installed or started here: {exc}"
            print(peer_note, flush=True)
    else:
        peer_note = "Label Studio skipped (--no-peer)"
    results: list[tuple[str, float, float]] = []
    servers: dict[str, StateLabServer] = {}
    scratch = tempfile.TemporaryDirectory(prefix="bench-import-previous-") if args.previous else None
    try:
        servers["current"] = StateLabServer(args.http_workers, celery)
        if scratch is not None:  # the queued mode is the current code's only (one Celery queue)
            servers["previous"] = StateLabServer(
                args.http_workers, False, previous_tree(args.previous, Path(scratch.name))
            )
        # Each server process loads its code on its first import: not what is measured.
        warm = [batch_lines(changeit_lines, items + k * 10, 10) for k in range(4 * args.http_workers)]
        for code, server in servers.items():
            statelab_http(server, warm, "files", 1, f"warm-{code}")
        if celery:
            statelab_http(servers["current"], warm[:2], "queued", 1, "warm")
        if peer is not None:
            peer.import_batches([[{"data": {"image": "/data/local-files/?d=img/c0.png"}}]] * 4, "warm")
        for r in range(args.rounds):
            for clients in args.clients:
                ways = f"{clients} client{'s' if clients != 1 else ''}"
                for mode, per in modes:
                    for code in ("previous", "current"):
                        if code not in servers or (mode == "queued" and code == "previous"):
                            continue
                        tag = f"{r}-{per}-{clients}-{code}"
                        seconds = statelab_http(servers[code], bodies, mode, per, tag, clients)
                        what = ("StateLab" if code == "current" else f"StateLab {args.previous} import code") + (
                            f", {n} x {size:,} lines, "
                        )
                        what += f"{per} file(s) per request (`files`)" if mode == "files" else "queued `file` + polling"
                        results.append((f"{what}, {ways}", items / seconds, seconds))
                        print(
                            f"round {r + 1}: {what}, {ways}: {seconds:.2f} s, {items / seconds:,.0f} items/s",
                            flush=True,
                        )
                if peer is not None:
                    seconds = peer.import_batches(tasks, f"{r}-{clients}", clients)
                    what = f"Label Studio {LABEL_STUDIO_VERSION}, {n} x {size:,} tasks, one request each, {ways}"
                    results.append((what, items / seconds, seconds))
                    print(f"round {r + 1}: {what}: {seconds:.2f} s, {items / seconds:,.0f} items/s", flush=True)
    finally:
        for server in servers.values():
            server.close()
        if peer is not None:
            peer.close()
        if scratch is not None:
            scratch.cleanup()

    # Every StateLab figure against Label Studio's best in this run (any client count), or against
    # the recorded figure when the peer could not run.
    peer_rates = [rate for what, rate, _ in results if what.startswith("Label Studio")]
    if peer_rates:
        reference, source = max(peer_rates), "Label Studio's best in this run"
    else:
        reference, source = LABEL_STUDIO_HTTP_BATCHES_PER_S, "Label Studio's recorded figure (bench/README.md)"
        print(f"\n{peer_note}\ncomparing with {source}: {reference:,} items/s", flush=True)
    print(f"\n| measurement | items/s | time | vs {source} ({reference:,.0f}/s) |")
    print("|---|---|---|---|")
    for what, rate, seconds in results:
        print(f"| {what} | {rate:,.0f} | {seconds:.2f} s | {rate / reference:.1f}× |")
    return results
