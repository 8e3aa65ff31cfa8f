"""python manage.py import_predictions <project> <file> --model NAME [--format F] [--match PATH=FIELD ...]
[--release V] [--media-root DIR] [--actor USERNAME]

The import is recorded in the audit trail under --actor (a researcher or admin of the project, the
role that launches jobs in the app) when given, and with source=cli either way.
"""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.management.actor import add_actor_argument, command_actor, on_command_line
from annotation.models import Project, Release
from evaluation.selectors import release_for
from inference.services import PredictionImportError
from inference.services.prediction_formats import BUILT_IN, SHOWN, predictions_import_file, verdict

DISAGREEMENTS_SHOWN = 100

MATCH_HELP = (
    "how the file's rows meet the release's items, PATH=FIELD (repeat for a composite key): PATH is a "
    "dotted path into a row (doc_id, index, doc.question_id); FIELD is id (the item's id), row (its place "
    "in the release, from 0), row1 (from 1), a field of the release line (extra.question_id, scene), or "
    "query (the StateLab query the row answers). E.g. --match doc_id=row, --match index=row, "
    "--match doc.question_id=extra.question_id. Rows that name no item are reported and left out. "
    "Default: the rows carry StateLab's own ids (a file made from export_release), every unknown id refused"
)


class Command(BaseCommand):
    help = (
        "Import predictions computed elsewhere as a job of imported predictions: StateLab JSONL (item, query, "
        "answer, optional logprobs), lmms-eval's --log_samples JSONL of any task, a VLMEvalKit prediction file "
        "(.xlsx, .tsv, .csv, or .json records), or a format of the project's protocol; the format is detected "
        "unless --format says it. A file made from a task or benchmark other than StateLab's export needs "
        "--match. The tool's target and per-sample metrics are kept with each prediction, and rows where a 0/1 "
        "metric disagrees with StateLab's score are listed."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("file", help="the predictions file (or folder, for a protocol format that reads one)")
        parser.add_argument("--model", required=True, help="row name on the leaderboard")
        parser.add_argument(
            "--format",
            default="auto",
            dest="fmt",
            help=f"auto (default), {', '.join(BUILT_IN)}, or a predictions format of the project's protocol",
        )
        parser.add_argument("--match", action="append", default=[], metavar="PATH=FIELD", help=MATCH_HELP)
        parser.add_argument(
            "--media-root",
            default=None,
            help="the authors' release folder, for a protocol format that reads it beside the file "
            "(e.g. a judge's output named by video)",
        )
        parser.add_argument(
            "--release",
            default=None,
            help="release version (default: the newest release, else the project's verified items)",
        )
        add_actor_argument(parser)

    def handle(self, *args, project, file, model, release, fmt, match, media_root, actor, **options):
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
        path = Path(file)
        if not path.exists():
            raise CommandError(f"cannot read {file}: no such file")
        try:
            with on_command_line():
                report = predictions_import_file(
                    project=proj,
                    path=path,
                    model_name=model,
                    release=rel,
                    fmt=fmt,
                    match=match,
                    media_root=Path(media_root) if media_root else None,
                    actor=user,
                )
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc}")
        except PredictionImportError as exc:
            raise CommandError(str(exc))
        self._report(report, rel)

    def _report(self, report, rel):
        job, unit = report.job, report.unit
        write = self.stdout.write
        where = f"release {rel.version}" if rel is not None else "verified items"
        write(
            f"imported {job.total_queries} predictions as job {job.pk} ({job.model_name}) on {where}; "
            f"{job.failed_queries} unparseable"
        )
        write(f"format: {report.format}" + "".join(f"; {note}" for note in report.notes))
        if report.unmatched:
            shown = "; ".join(f"{unit} {n}: {why}" for n, why in report.unmatched[:SHOWN])
            more = f" (first {SHOWN})" if len(report.unmatched) > SHOWN else ""
            write(f"{len(report.unmatched)} {unit}(s) matched no item and were left out{more}: {shown}")
        comparison = report.comparison
        for metric, compared in comparison.compared.items():
            agreeing = comparison.agreeing.get(metric, 0)
            write(
                f"{metric}: the tool's per-sample verdict (0/1) and StateLab's score agree on {agreeing} of "
                f"{compared} {unit}(s), disagree on {compared - agreeing}"
            )
        for d in comparison.disagreements[:DISAGREEMENTS_SHOWN]:
            tool = "right" if verdict(d.tool_value) else "wrong"
            mine = "right" if d.statelab_correct else "wrong"
            reply = d.reply if len(d.reply) <= 80 else d.reply[:77] + "..."
            write(
                f"  {unit} {d.at}: item {d.item!r} query {d.query}: {d.metric}={d.tool_value!r} says {tool}, "
                f"StateLab says {mine} (reply {reply!r}, tool's target {d.target!r})"
            )
        hidden = len(comparison.disagreements) - DISAGREEMENTS_SHOWN
        if hidden > 0:
            write(f"  (and {hidden} more; each prediction keeps the tool's values under source)")
