from django.core.management.base import BaseCommand, CommandError

from annotation.models import Project, Release
from evaluation import correlation, tables
from protocols.kit.bootstrap import N_BOOT


class Command(BaseCommand):
    help = "Print human-judge agreement for a video-rating project."

    def add_arguments(self, parser):
        parser.add_argument("project")
        parser.add_argument("--release", default=None)
        parser.add_argument("--format", default="json", choices=["json", "csv", "latex"])
        parser.add_argument("--details", action="store_true", help="json: add a note beside every null statistic")
        parser.add_argument("--boot", type=int, default=N_BOOT)

    def handle(self, *args, project, release, format, boot, details, **options):
        try:
            proj = Project.objects.get(slug=project)
        except Project.DoesNotExist:
            raise CommandError(f"no project {project!r}")
        try:
            report = correlation.build(proj, release_version=release, n_boot=boot)
        except Release.DoesNotExist:
            raise CommandError(f"no release {release!r} in project {project!r}")
        except correlation.CorrelationError as exc:
            raise CommandError(str(exc))
        for note in tables.correlation_notes(report):
            self.stderr.write(note)
        self.stdout.write(
            tables.render_correlation(report, format, details=details), ending="" if format != "json" else "\n"
        )
