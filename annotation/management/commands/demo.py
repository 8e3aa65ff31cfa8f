"""python manage.py demo [--no-serve] [--addr 127.0.0.1:8000]

Sets up a working StateLab on this machine and serves it:
1. without DATABASE_URL starts the embedded PostgreSQL (config/demo_database.py; data in
   var/postgres, kept for the next run) and stops it again when the command ends, Ctrl-C
   included; with DATABASE_URL uses that PostgreSQL; then migrates the database;
2. creates the users admin (a superuser), lead (each demo project's admin, not a superuser),
   researcher, reviewer, annotator1..3 and prints their passwords;
3. makes one small project per registered protocol with a demo sample (its samples module's
   DEMO, protocols/kit/samples.py), with images drawn by Pillow and short videos encoded by ffmpeg
   (the system binary or the one imageio-ffmpeg ships) — nothing is downloaded — and imports them
   through the normal importer: some items raw (pending), some labeled (annotated), some
   verified; a protocol whose sample has human annotations made elsewhere (video ratings) gets
   those imported too;
4. freezes release v1 of each project's verified test split and imports the answers of made-up
   models of different skill to it (a rating protocol's: judges' scores), from the samples
   module's demo_predictions, so every board and the correlation page have rows to compare;
5. sets up the shared model endpoint random-baseline (the seeded random backend: no model, no key,
   no download), so a researcher can start an inference job from the admin and see it finish;
6. serves the site on 127.0.0.1:8000 (Django's runserver) unless --no-serve.

Running it again changes nothing: users keep their passwords (a password changed since stays),
imports are idempotent, existing releases and the endpoint are left alone. The steps are functions
of this module (make_users, make_project, fill, make_endpoint), which tests call to build the same
data.
"""

from __future__ import annotations

import io
import json
import signal
import socket
import sys
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connections, transaction

from annotation.importing import ImportRefused, annotations_import, items_import
from annotation.importing.samples import sample_line, sample_media_paths, write_sample_media
from annotation.models import Membership, Project, Release, Role
from annotation.releases import ReleaseRefused, release_freeze, release_lines
from config.demo_database import embedded_postgres
from protocols import registry

USERS = [
    # username, password, superuser, role in every demo project
    ("admin", "admin-demo", True, Role.ADMIN),
    ("lead", "lead-demo", False, Role.ADMIN),
    ("researcher", "researcher-demo", False, Role.RESEARCHER),
    ("reviewer", "reviewer-demo", False, Role.REVIEWER),
    ("annotator1", "annotator1-demo", False, Role.ANNOTATOR),
    ("annotator2", "annotator2-demo", False, Role.ANNOTATOR),
    ("annotator3", "annotator3-demo", False, Role.ANNOTATOR),
]


# The shared endpoint the demo sets up: the seeded random backend (inference/backends/random_backend.py),
# run through the same prompts, parsing and scoring as a model (docs/inference.md, "Endpoints").
DEMO_ENDPOINT = "random-baseline"


def demo_projects() -> list[tuple[str, str, object]]:
    """(slug, protocol, its DEMO) of every registered protocol whose samples module has a DEMO."""
    found = []
    for protocol in registry.protocols():
        demo = getattr(protocol.samples, "DEMO", None) if protocol.samples_module else None
        if demo is not None:
            found.append((f"demo-{protocol.name}", protocol.name, demo))
    return found


def address_free(addr: str) -> None:
    """Refuse at once (CommandError) when runserver could not listen on `addr` ("[host:]port")."""
    host, _, port = addr.rpartition(":")
    try:
        family, kind, _proto, _name, sockaddr = socket.getaddrinfo(
            host.strip("[]") or "127.0.0.1", int(port), type=socket.SOCK_STREAM
        )[0]
        with socket.socket(family, kind) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as runserver does
            probe.bind(sockaddr)
    except (OSError, ValueError) as exc:
        raise CommandError(f"Cannot serve on {addr}: {exc}") from exc


@contextmanager
def exit_on_termination():
    """SIGTERM and SIGHUP end the command as Ctrl-C does (by SystemExit), so the blocks around it
    clean up: the embedded PostgreSQL is stopped, not left running."""
    previous = {
        sig: signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
        for sig in (signal.SIGTERM, signal.SIGHUP)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def make_users() -> dict:
    """The demo's accounts (USERS); a new one gets its printed password, an existing one keeps its own."""
    User = get_user_model()
    users = {}
    for username, password, superuser, _role in USERS:
        user, created = User.objects.get_or_create(username=username, defaults={"email": f"{username}@example.org"})
        user.is_superuser = user.is_staff = superuser
        if created:
            user.set_password(password)
        user.save()
        users[username] = user
    return users


@transaction.atomic
def make_project(slug: str, protocol: str, demo, users: dict) -> Project:
    project, _created = Project.objects.get_or_create(
        slug=slug,
        defaults={
            "name": f"Demo · {demo.title}",
            "protocol": protocol,
            "annotations_per_item": demo.annotations_per_item,
            "option_seed": 2024,
            "description": "Synthetic sample data made by `manage.py demo`: simple drawings whose state changes.",
            "settings": dict(demo.settings),
        },
    )
    for username, _pw, _su, role in USERS:
        Membership.objects.get_or_create(project=project, user=users[username], defaults={"role": role})
    return project


def fill(project: Project, demo, folder: Path, *, stderr=sys.stderr) -> None:
    """The project's sample items (media drawn here), imported through the normal importer, the
    ratings made elsewhere its protocol's sample has, and release v1 of the verified test split."""
    protocol = project.protocol
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / ".media-complete"
    if not marker.exists():  # regenerate media only once, so re-runs import identical files
        write_sample_media(folder, protocol)
        marker.write_text("ok\n")
    for filename, (numbers, complete) in demo.files.items():
        path = folder / filename
        with open(path, "w", encoding="utf-8") as fh:
            for i in numbers:
                fh.write(
                    json.dumps(sample_line(protocol, i, complete=complete, media=sample_media_paths(protocol, i)))
                    + "\n"
                )
        try:
            items_import(project=project, path=path, verified=filename == "verified.jsonl")
        except ImportRefused as exc:  # items edited since the last run (e.g. a reviewer's fix): keep them
            stderr.write(f"{project.slug}: kept the existing items ({exc.errors[0]})\n")
    made_elsewhere = getattr(registry.get(protocol).samples, "demo_annotations", None)
    if made_elsewhere is not None:
        import_annotations(project, folder, made_elsewhere(demo.files["verified.jsonl"][0]), stderr=stderr)
    if not Release.objects.filter(project=project, version="v1").exists():
        try:
            release = release_freeze(project=project, version="v1", split="test")
        except ReleaseRefused as exc:
            stderr.write(f"{project.slug}: no release: {exc}\n")
        else:  # with the release only, so a re-run imports nothing twice
            import_predictions(project, release, folder, stderr=stderr)


def import_annotations(project: Project, folder: Path, lines: list[dict], *, stderr=sys.stderr) -> None:
    """Human annotations made elsewhere of the verified items (e.g. a published rating study)."""
    path = folder / "ratings.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line) + "\n")
    try:
        annotations_import(project=project, path=path)
    except ImportRefused as exc:
        stderr.write(f"{project.slug}: kept the existing ratings ({exc.errors[0]})\n")


def import_predictions(project: Project, release: Release, folder: Path, *, stderr=sys.stderr) -> None:
    """Made-up models' answers to the release (a rating protocol's: judges' scores), from its
    samples module's demo_predictions, imported through the evaluation app's own command (the
    annotation app imports nothing of it), so every board has several rows of different skill."""
    made_up = getattr(registry.get(project.protocol).samples, "demo_predictions", None)
    if made_up is None:
        return
    for model, predictions in made_up(list(release_lines(release))).items():
        path = folder / f"predictions-{model}.jsonl"
        path.write_text("".join(json.dumps(p) + "\n" for p in predictions), encoding="utf-8")
        try:
            call_command(
                "import_predictions",
                project.slug,
                str(path),
                "--model",
                model,
                "--release",
                release.version,
                stdout=io.StringIO(),
            )
        except CommandError as exc:
            stderr.write(f"{project.slug}: the predictions of {model} were not imported ({exc})\n")


def make_endpoint() -> None:
    """The shared random-baseline endpoint, through the inference app's own command (the annotation
    app imports nothing of inference: docs/architecture.md, "One-way flow"); left as it is if it exists."""
    call_command(
        "create_endpoint",
        "--name",
        DEMO_ENDPOINT,
        "--backend",
        "random",
        "--option",
        "seed=0",
        "--if-missing",
        stdout=io.StringIO(),
    )


class Command(BaseCommand):
    help = (
        "Create demo users and a sample project for every registered protocol (media made locally), then serve "
        "on 127.0.0.1:8000."
    )

    def add_arguments(self, parser):
        parser.add_argument("--no-serve", action="store_true", help="set everything up, then exit")
        parser.add_argument("--addr", default="127.0.0.1:8000", help="address:port for runserver")
        parser.add_argument("--data-dir", type=Path, default=None, help="where the generated sample files go")

    def handle(self, *args, **opts):
        pgdata = settings.EMBEDDED_POSTGRES_DIR
        if pgdata is None:  # DATABASE_URL names the PostgreSQL to use
            return self.set_up_and_serve(opts)
        if not opts["no_serve"]:
            address_free(opts["addr"])  # runserver would os._exit() on a taken port, leaving the server up
        database = connections.settings[DEFAULT_DB_ALIAS]
        with exit_on_termination(), embedded_postgres(pgdata, database=database["NAME"]) as where:
            database.update(where)  # the settings' socket directory, unless the wheel had to use another
            try:
                self.set_up_and_serve(opts)
            finally:
                connections.close_all()

    def set_up_and_serve(self, opts) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        data_dir = opts["data_dir"] or Path(settings.DATA_DIR) / "demo-data"
        users = make_users()
        for slug, protocol, demo in demo_projects():
            project = make_project(slug, protocol, demo, users)
            fill(project, demo, data_dir / protocol, stderr=self.stderr)
        make_endpoint()
        self.print_summary()
        if not opts["no_serve"]:
            self.stdout.write(f"Serving on http://{opts['addr']}/ (Ctrl-C to stop)")
            call_command("runserver", opts["addr"], use_reloader=False)

    def print_summary(self) -> None:
        self.stdout.write("StateLab demo is ready.\n\nUsers (username / password):")
        for username, password, superuser, role in USERS:
            who = "superuser" if superuser else "project admin (not a superuser)" if role == Role.ADMIN else role
            self.stdout.write(f"  {username:<11} / {password:<16} {who}")
        self.stdout.write("\nProjects:")
        for project in Project.objects.filter(slug__in=[p[0] for p in demo_projects()]).order_by("slug"):
            counts = {s: project.items.filter(status=s).count() for s in ("pending", "annotated", "verified")}
            releases = ", ".join(project.releases.values_list("version", flat=True)) or "none"
            self.stdout.write(
                f"  /projects/{project.slug}/  {project.protocol:<11} pending {counts['pending']}, "
                f"annotated {counts['annotated']}, verified {counts['verified']}; releases: {releases}"
            )
        self.stdout.write(
            f"\nModel endpoint: {DEMO_ENDPOINT} (seeded random answers, shared by every project). As researcher, "
            "start an inference job at /admin/inference/inferencejob/add/; as lead, change a project's settings "
            "at /projects/<slug>/settings/."
        )
