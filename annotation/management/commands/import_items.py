"""python manage.py import_items <project> <file> --protocol P [--media-root DIR] [--create] [--verified]"""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.importing import ImportRefused, items_import
from annotation.importing.items import project_for_import
from annotation.importing.sources import SourceError, open_source
from annotation.protocols import PROTOCOLS


class Command(BaseCommand):
    help = (
        "Import benchmark items from a JSONL file (media paths relative to --media-root, default the "
        "file's folder) or from a zip holding items.jsonl and the media. All or nothing; idempotent."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("file", type=Path, help="items .jsonl or .zip")
        parser.add_argument("--protocol", choices=PROTOCOLS, help="required with --create; checked otherwise")
        parser.add_argument("--media-root", type=Path, default=None, help="folder the media paths are relative to")
        parser.add_argument("--create", action="store_true", help="create the project when missing")
        parser.add_argument("--verified", action="store_true", help="import a published benchmark as verified items")

    def handle(self, *args, **opts):
        seed = None
        if opts["create"]:
            # A release export carries its option seed; a project created for it keeps it.
            try:
                source = open_source(opts["file"], media_root=opts["media_root"], max_bytes=1)
                header = source.header
                source.close()
            except SourceError:
                header = None
            if isinstance(header, dict) and isinstance(header.get("option_seed"), int):
                seed = header["option_seed"]
        # Not one transaction around both steps: the importer streams rows to PostgreSQL on a
        # second connection while it validates, which needs the project committed. A project
        # created here for an import that is then refused (or fails) is deleted again.
        project, created = None, False
        try:
            project, created = project_for_import(
                slug=opts["project"], protocol=opts["protocol"], create=opts["create"], option_seed=seed
            )
            report = items_import(
                project=project, path=opts["file"], media_root=opts["media_root"], verified=opts["verified"]
            )
        except BaseException as exc:
            if created:
                project.delete()
            if isinstance(exc, ImportRefused):
                for message in exc.errors:
                    self.stderr.write(message)
                raise CommandError(f"import refused: {exc.total} error(s); nothing was written") from exc
            raise
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(report.by_status.items())) or "none"
        self.stdout.write(
            f"{project.slug}: {report.lines} lines, {report.created} items created ({statuses}), "
            f"{report.unchanged} unchanged; {report.media_files} media files, {report.media_stored} newly stored"
        )
