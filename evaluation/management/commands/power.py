import json

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Project, Release
from evaluation import leaderboard, paired, power


class Command(BaseCommand):
    help = (
        "Items (and raters, and paired units) a study needs for a target precision, with this project's "
        "board as the pilot (docs/statistics.md, 'Planning a study')."
    )

    def add_arguments(self, parser):
        parser.add_argument("project")
        parser.add_argument("--release", default=None, help="the pilot release (default: the newest)")
        parser.add_argument("--judge", default=None, help="video rating: plan from this judge's scores")
        parser.add_argument(
            "--half-width",
            default=None,
            metavar="X",
            help="target half-width of the 95 %% interval in the board's points (default 2, 0.02 on a 0-1 board)",
        )
        parser.add_argument(
            "--baseline", default=None, metavar="MODEL", help="add the units needed to detect a difference from it"
        )
        parser.add_argument(
            "--difference",
            default=None,
            metavar="D",
            help="the difference to detect at 80 %% power (default 5, 0.05 on a 0-1 board)",
        )
        parser.add_argument("--metric", default=None, help="the metric of the paired plan and markdown")
        parser.add_argument("--format", default="json", choices=["json", "markdown"])

    def handle(self, *args, project, release, judge, half_width, baseline, difference, metric, format, **options):
        try:
            proj = Project.objects.get(slug=project)
        except Project.DoesNotExist:
            raise CommandError(f"no project {project!r}")
        query = {"half_width": half_width, "difference": difference, "metric": metric, paired.PARAMETER: baseline}
        try:
            asked = power.parse(proj.protocol, {k: v for k, v in query.items() if v is not None})
            plan = power.build(proj, asked, release_version=release, judge=judge)
        except Release.DoesNotExist:
            raise CommandError(f"no release {release!r} in project {project!r}")
        except (power.PowerInputError, paired.UnknownBaseline, leaderboard.LeaderboardError) as exc:
            raise CommandError(str(exc))
        if format == "markdown":
            self.stdout.write(power.render_markdown(plan), ending="")
        else:
            self.stdout.write(json.dumps(plan, indent=2, ensure_ascii=False))
