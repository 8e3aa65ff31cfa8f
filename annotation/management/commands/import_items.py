"""python manage.py import_items <project> <path> --protocol P [--media-root DIR] [--create] [--verified]
       [--format NAME] [--strict] [--update] [--actor USERNAME]

The path is JSONL, a JSON release export ({header..., "items": [...]}) or a JSON array of items,
a zip, a Hugging Face dataset folder written by `export_release --format hf`, or a file or
folder in one of the protocol's authors' formats (the paper's release as published: detected,
or named with --format; docs/importing.md). Fields the protocol does not know are kept in the
item's extra and named once in the report; --strict refuses them instead. A release export
(either format, or a zip with release.json) carries its option seed: a project created for it
with --create takes that seed (and, without --protocol, the export's protocol), so freezing the
imported items again gives the same checksum.

A line whose id the project holds with other content is refused, unless --update: then the item
takes the line's content (payload, split, tags, media, gold) in the same all-or-nothing import, and
the report counts it as updated, naming the fields that changed (annotation/importing/item_update.py
says what becomes of its status and annotations; frozen releases never change). This is how a later
release of an authors' file whose ids come from the content corrects the items.

--actor names who the import is recorded under in the audit trail: a researcher or admin of the
project, or, for a project that --create makes, someone who may create projects in the app (they
become its admin, as on the new-project page).

A project that --create makes is recorded as created (project_create, as the new-project page
records it: under --actor when given, source=cli) together with the project; when the import is
then refused, the project goes again with its creation event, and nothing is left written.
"""

import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from annotation.audit.record import audit_record
from annotation.importing import ImportRefused, items_import
from annotation.importing.conversion import OWN_FORMAT, format_refusal
from annotation.importing.items import project_for_import
from annotation.importing.sources import SourceError, open_source
from annotation.interchange.hf import HFFolderError, hf_folder_to_jsonl, is_hf_folder
from annotation.management.actor import (
    add_actor_argument,
    command_user,
    on_command_line,
    require_command_role,
    require_project_creator,
)
from annotation.models import AuditAction, AuditEvent, Project, Role
from annotation.protocols import PROTOCOLS


class Command(BaseCommand):
    help = (
        "Import benchmark items from a JSONL file or a JSON release export (media paths relative to "
        "--media-root, default the file's folder) or from a zip holding items.jsonl and the media. "
        "All or nothing; idempotent. --verified also promotes identical pending/annotated items."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument(
            "file",
            type=Path,
            help="items .jsonl, .json or .zip, a dataset folder (export_release --format hf), or a file or "
            "folder in one of the protocol's authors' formats",
        )
        parser.add_argument(
            "--protocol",
            choices=PROTOCOLS,
            help="checked against the project; with --create, defaults to a release export's",
        )
        parser.add_argument("--media-root", type=Path, default=None, help="folder the media paths are relative to")
        parser.add_argument("--create", action="store_true", help="create the project when missing")
        parser.add_argument("--verified", action="store_true", help="import a published benchmark as verified items")
        parser.add_argument(
            "--format",
            dest="format_name",
            metavar="NAME",
            help="read the file in this format instead of detecting it: statelab (the project's own item "
            "lines) or one of the protocol's authors' formats (docs/importing.md)",
        )
        parser.add_argument(
            "--strict", action="store_true", help="refuse fields the protocol does not know instead of keeping them"
        )
        parser.add_argument(
            "--update",
            action="store_true",
            help="items whose id the project holds with other content take the file's content (a later release "
            "of the same file) instead of refusing the import",
        )
        add_actor_argument(parser)

    def handle(self, *args, **opts):
        self._check_format(opts)
        actor = command_user(opts["actor"])
        if actor is not None:  # checked before any work; again once the project is settled (a race)
            existing = Project.objects.filter(slug=opts["project"]).first()
            if existing is not None:
                require_command_role(actor, existing)
            elif opts["create"]:
                require_project_creator(actor)
        with on_command_line():
            return self._dispatch({**opts, "actor": actor})

    def _dispatch(self, opts):
        if opts["format_name"] is not None or not is_hf_folder(opts["file"]):
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
        # created here for an import that is then refused (or fails) is deleted again, with the
        # event that recorded its creation.
        project, created, creation = None, False, None
        try:
            with transaction.atomic():  # the project and its creation event commit together
                project, made = project_for_import(
                    slug=opts["project"],
                    protocol=protocol,
                    create=opts["create"],
                    option_seed=seed,
                    creator=opts["actor"],
                )
                creation = self._record_creation(project, opts["actor"]) if made else None
            created = made
            if not created:  # made by a concurrent import meanwhile, perhaps
                require_command_role(opts["actor"], project)
            report = items_import(
                project=project,
                path=opts["file"],
                media_root=opts["media_root"],
                verified=opts["verified"],
                actor=opts["actor"],
                format_name=opts["format_name"],
                strict=opts["strict"],
                update=opts["update"],
            )
        except BaseException as exc:
            # Only while it is still empty: a concurrent import may have filled the project meanwhile.
            if created and not project.items.exists() and not project.releases.exists():
                with transaction.atomic():
                    AuditEvent.objects.filter(pk=creation.pk).delete()
                    project.delete()
            if isinstance(exc, ImportRefused):
                for message in exc.errors:
                    self.stderr.write(message)
                read_as = f" (read as {exc.read_as})" if exc.read_as else ""
                raise CommandError(f"import refused{read_as}: {exc.total} error(s); nothing was written") from exc
            raise
        statuses = ", ".join(f"{k} {v}" for k, v in sorted(report.by_status.items())) or "none"
        self.stdout.write(
            f"{project.slug}: {report.lines} lines, {report.created} items created ({statuses}), "
            f"{report.unchanged} unchanged, {report.promoted} promoted to verified"
            + (f", {report.updated} updated" if opts["update"] else "")
            + f"; {report.media_files} media files, {report.media_stored} newly stored"
        )
        for updated in report.updated_items:
            self.stdout.write(f"updated {updated['id']}: {', '.join(updated['fields'])}")
        if report.updated > len(report.updated_items):
            self.stdout.write(f"(the first {len(report.updated_items)} of {report.updated} updated items)")
        if report.format_label and report.format != OWN_FORMAT:
            self.stdout.write(f"read as {report.format}: {report.format_label}")
        for note in report.notes:
            self.stdout.write(f"- {note}")
        if report.kept_fields:
            self.stdout.write(report.kept_sentence() + " (stored in each item's extra; --strict refuses them)")

    @staticmethod
    def _check_format(opts) -> None:
        """An unknown --format is refused before anything is made, naming the formats there are."""
        if opts["format_name"] is None:
            return
        existing = Project.objects.filter(slug=opts["project"]).values_list("protocol", flat=True).first()
        protocol = existing or opts["protocol"]
        if protocol is not None and (reason := format_refusal(protocol, opts["format_name"])):
            raise CommandError(reason)

    @staticmethod
    def _record_creation(project: Project, actor) -> AuditEvent:
        """The project_create event the new-project page records (annotation.project_setup), for a
        project made here; `actor` (when given) became its admin."""
        return audit_record(
            action=AuditAction.PROJECT_CREATE,
            actor=actor,
            project=project,
            obj=project,
            details={
                "protocol": project.protocol,
                "annotations_per_item": project.annotations_per_item,
                "settings": project.settings,
                "creator_role": Role.ADMIN if actor else None,
                "option_seed": project.option_seed,
            },
        )
