from django.core.management.base import BaseCommand, CommandError

from annotation.models import Project, Release
from evaluation import leaderboard, paired, ranking, tables, vote_intervals
from protocols.kit.bootstrap import N_BOOT


class Command(BaseCommand):
    help = "Print a project's leaderboard (models, Random, Human; generators for video rating)."

    def add_arguments(self, parser):
        parser.add_argument("project")
        parser.add_argument("--release", default=None)
        parser.add_argument(
            "--judge", default=None, help="video rating: score generators by this judge instead of humans"
        )
        parser.add_argument("--format", default="json", choices=["json", "csv", "latex", "markdown"])
        parser.add_argument(
            "--details", action="store_true", help="json: add rank, breakdowns and diagnostics to each row"
        )
        parser.add_argument("--boot", type=int, default=N_BOOT, help="bootstrap resamples")
        parser.add_argument(
            "--ci",
            default=None,
            choices=["sandwich", "bootstrap"],
            help="a board rated from pairwise votes: the ratings' interval, sandwich (default: cluster-robust, "
            "votes clustered by the protocol's cluster key) or bootstrap (multinomial redraws of the battle counts)",
        )
        parser.add_argument(
            "--rounds",
            default=None,
            help=f"with --ci bootstrap: the bootstrap rounds, {vote_intervals.MIN_ROUNDS} to "
            f"{vote_intervals.MAX_ROUNDS} (default 1000)",
        )
        parser.add_argument(
            "--rank-by",
            default=None,
            metavar="NAME",
            help="order and rank by another ranking of the protocol (video rating: criteria_mean, "
            "the mean of the eight criteria); default: the protocol's headline metric",
        )
        parser.add_argument(
            "--baseline",
            default=None,
            metavar="MODEL",
            help="compare every other row with this one on the ranking metric: difference with a paired "
            "bootstrap interval, McNemar or paired t p value, Holm-adjusted (json and markdown)",
        )
        parser.add_argument(
            "--breakdown",
            default=None,
            metavar="NAME",
            help=(
                "one breakdown tab instead of the main table, e.g. category:positional, difference:slight, "
                "state_change:scenario"
            ),
        )

    def handle(
        self, *args, project, release, judge, format, boot, details, breakdown, rank_by, baseline, ci, rounds, **options
    ):
        try:
            proj = Project.objects.get(slug=project)
        except Project.DoesNotExist:
            raise CommandError(f"no project {project!r}")
        try:
            intervals = vote_intervals.parse(proj.protocol, ci, rounds)
        except vote_intervals.IntervalChoiceError as exc:
            raise CommandError(f"--{exc}")
        if baseline is not None and (format not in ("json", "markdown") or breakdown is not None):
            raise CommandError(
                f"--baseline prints with the main table in --format json or markdown, not {format}"
                + (" with --breakdown" if breakdown is not None else "")
            )
        try:
            board = leaderboard.build(
                proj, release_version=release, judge=judge, n_boot=boot, rank_by=rank_by, intervals=intervals
            )
            if baseline is not None:
                if baseline not in [row["model"] for row in board["rows"]]:
                    names = ", ".join(row["model"] for row in board["rows"]) or "none"
                    raise CommandError(f"--baseline {baseline!r} is not a row of this board; its rows: {names}")
                board["paired"] = paired.in_board_order(
                    paired.comparisons(
                        proj, release_version=release, judge=judge, rank_by=rank_by, baseline=baseline, n_boot=boot
                    ),
                    board,
                )
        except Release.DoesNotExist:
            raise CommandError(f"no release {release!r} in project {project!r}")
        except (leaderboard.LeaderboardError, ranking.UnknownRanking) as exc:
            raise CommandError(str(exc))
        for row in board["rows"]:
            missing = [k for k, v in row["metrics"].items() if v is None]
            if missing:
                self.stderr.write(f"{row['model']}: no value for {', '.join(missing)} (no item counts, or unsupported)")
        try:
            text = tables.render_leaderboard(board, format, details=details, breakdown=breakdown)
        except tables.UnknownBreakdown as exc:
            raise CommandError(str(exc))
        self.stdout.write(text, ending="" if format != "json" else "\n")
