"""python manage.py import_items <project> <file> --protocol P [--media-root DIR] [--create] [--verified]

The file is JSONL, a JSON release export ({header..., "items": [...]}), a zip, or a Hugging Face
dataset folder written by `export_release --format hf`. A release export
(either format, or a zip with release.json) carries its option seed: a project created for it
with --create takes that seed (and, without --protocol, the export's protocol), so freezing the
imported items again gives the same checksum.
"""
import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.importing import ImportRefused, items_import
from annotation.importing.items import project_for_import
from annotation.importing.sources import SourceError, open_source
from annotation.interchange.hf import HFFolderError, hf_folder_to_jsonl, is_hf_folder
from annotation.protocols import PROTOCOLS


class Command(BaseCommand):
    help = (
        "Import benchmark items from a JSONL file or a JSON release export (media paths relative to "
        "--media-root, default the file's folder) or from a zip holding items.jsonl and the media. "
        "All or nothing; idempotent. --verified also promotes identical pending/annotated items."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("file", type=Path, help="items .jsonl or .zip, or a dataset folder (export_release --format hf)")
        parser.add_argument(
            "--protocol", choices=PROTOCOLS, help="checked against the project; with --create, defaults to a release export's"
        )
        parser.add_argument("--media-root", type=Path, default=None, help="folder the media paths are relative to")
        parser.add_argument("--create", action="store_true", help="create the project when missing")
        parser.add_argument("--verified", action="store_true", help="import a published benchmark as verified items")

    def handle(self, *args, **opts):
        if not is_hf_folder(opts["file"]):
            return self._import(opts)
        # A dataset folder: its rows become a release JSONL and media files in a scratch folder.
        with tempfile.TemporaryDirectory(prefix="statelab-hf-") as work:
            try:
                jsonl = hf_folder_to_jsonl(opts["file"], Path(work))
            except HFFolderError as exc:
                raise CommandError(f"import refused: {exc}; nothing was written") from exc
            return self._import({**opts, "file": jsonl, "media_root": Path(work)})

    def _import(self, opts):
        seed, protocol = None, opts["protocol"]
        if opts["create"]:
            # A release export carries its option seed; a project created for it keeps it.
            try:
                source = open_source(opts["file"], media_root=opts["media_root"], max_bytes=1)
                header = source.header
                source.close()
            except SourceError:
                header = None
            if isinstance(header, dict):
                if isinstance(header.get("option_seed"), int) and not isinstance(header["option_seed"], bool):
                    seed = header["option_seed"]
                if protocol is None and header.get("protocol") in PROTOCOLS:
                    protocol = header["protocol"]
        # Not one transaction around both steps: the importer streams rows to PostgreSQL on a
        # second connection while it validates, which needs the project committed. A project
        # created here for an import that is then refused (or fails) is deleted again.
        project, created = None, False
        try:
            project, created = project_for_import(
                slug=opts["project"], protocol=protocol, create=opts["create"], option_seed=seed
            )
            report = items_import(
                project=project, path=opts["file"], media_root=opts["media_root"], verified=opts["verified"]
            )
        except BaseException as exc:
            # Only while it is still empty: a concurrent import may have filled the project meanwhile.
            if created and not project.items.exists() and not project.releases.exists():
                project.delete()
            if isinstance(exc, ImportRefused):
                for message in exc.errors:
                    self.stderr.write(message)
                raise CommandError(f"import refused: {exc.total} error(s); nothing was written") from exc
            raise
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(report.by_status.items())) or "none"
        self.stdout.write(
            f"{project.slug}: {report.lines} lines, {report.created} items created ({statuses}), "
            f"{report.unchanged} unchanged, {report.promoted} promoted to verified; "
            f"{report.media_files} media files, {report.media_stored} newly stored"
        )
