"""python manage.py import_predictions <project> <file> --model NAME [--format F] [--release V] [--actor USERNAME]

The import is recorded in the audit trail under --actor (a researcher or admin of the project, the
role that launches jobs in the app) when given, and with source=cli either way.
"""

from django.core.management.base import BaseCommand, CommandError

from annotation.management.actor import add_actor_argument, command_actor, on_command_line
from annotation.models import Project, Release
from evaluation.selectors import release_for
from inference.services import PredictionImportError, predictions_import
from inference.services.prediction_formats import FORMATS, prediction_lines


class Command(BaseCommand):
    help = (
        "Import predictions computed elsewhere as a job of imported predictions: StateLab JSONL (item, query, "
        "answer, optional logprobs), lmms-eval's --log_samples JSONL, or a VLMEvalKit prediction file (TSV/CSV/JSONL); "
        "the format is detected unless --format says it."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("file", help="JSONL file of predictions")
        parser.add_argument("--model", required=True, help="row name on the leaderboard")
        parser.add_argument("--format", default="auto", choices=("auto",) + FORMATS, dest="fmt")
        parser.add_argument(
            "--release",
            default=None,
            help="release version (default: the newest release, else the project's verified items)",
        )
        add_actor_argument(parser)

    def handle(self, *args, project, file, model, release, fmt, actor, **options):
        try:
            proj = Project.objects.get(slug=project)
        except Project.DoesNotExist:
            raise CommandError(f"no project {project!r}")
        user = command_actor(actor, proj)  # the role that launches inference jobs: researcher
        try:
            # The same default as the leaderboard, so an import shows up on the default board.
            rel = release_for(proj, release)
        except Release.DoesNotExist:
            raise CommandError(f"no release {release!r} in project {project!r}")
        try:
            text = "" if file.lower().endswith(".xlsx") else open(file, encoding="utf-8").read()
            lines = prediction_lines(proj.protocol, file, text, fmt)
            with on_command_line():
                job = predictions_import(project=proj, lines=lines, model_name=model, release=rel, actor=user)
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc}")
        except UnicodeDecodeError:
            raise CommandError(f"{file} is not UTF-8 text")
        except PredictionImportError as exc:
            raise CommandError(str(exc))
        where = f"release {rel.version}" if rel is not None else "verified items"
        self.stdout.write(
            f"imported {job.total_queries} predictions as job {job.pk} ({job.model_name}) on {where}; "
            f"{job.failed_queries} unparseable"
        )
