"""python manage.py import_annotations <project> <file> [--format NAME] [--media-root DIR] [--actor USERNAME]:
human ratings / blind QA answers from elsewhere, in the project's own lines or an authors' format
(the protocol's annotation formats: protocols/kit/releases.py)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.importing import ImportRefused, annotations_import
from annotation.management.actor import add_actor_argument, command_actor, on_command_line
from annotation.models import Project


class Command(BaseCommand):
    help = (
        'Import human annotations made elsewhere: ratings {"item","rater","scores"} for video rating projects, '
        'blind QA answers {"item","annotator","answer","flags"} for QA projects. All or nothing; idempotent.'
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("file", type=Path, help="annotations .jsonl, or an authors' file or folder")
        parser.add_argument("--format", dest="format_name", help="the file's format (default: detected)")
        parser.add_argument(
            "--media-root",
            type=Path,
            help="what an authors' reader needs besides the file (e.g. the release folder of the videos)",
        )
        add_actor_argument(parser)

    def handle(self, *args, **opts):
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"no project {opts['project']!r}")
        actor = command_actor(opts["actor"], project)  # the annotation import API's role: researcher
        try:
            with on_command_line():
                report = annotations_import(
                    project=project,
                    path=opts["file"],
                    actor=actor,
                    format_name=opts["format_name"],
                    media_root=opts["media_root"],
                )
        except ImportRefused as exc:
            for message in exc.errors:
                self.stderr.write(message)
            raise CommandError(f"import refused: {exc.total} error(s); nothing was written") from exc
        self.stdout.write(f"read as {report.format_label}")
        for note in report.notes:
            self.stdout.write(f"  {note}")
        self.stdout.write(
            f"{project.slug}: {report.lines} lines, {report.created} annotations created "
            f"({report.aggregated} aggregated), {report.unchanged} unchanged, {report.items_touched} items touched"
        )
