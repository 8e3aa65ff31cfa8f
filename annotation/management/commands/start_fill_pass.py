"""python manage.py start_fill_pass <project> [--fields F,F] [--dry-run] [--actor USERNAME]"""

import json

from django.core.management.base import BaseCommand, CommandError

from annotation.fill_pass import FillPassRefused, fill_pass_plan, fill_pass_start
from annotation.management.actor import add_actor_argument, command_actor, on_command_line
from annotation.models import Project


class Command(BaseCommand):
    help = (
        "Start a labelling pass: the project's verified items that lack some of the label fields its protocol lets "
        "a pass fill go back to the annotators, asked for just those fields (annotation/fill_pass.py)."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument(
            "--fields", help="comma-separated fields to ask (default: every field the protocol's passes fill)"
        )
        parser.add_argument("--dry-run", action="store_true", help="print what a pass would ask, change nothing")
        add_actor_argument(parser)

    def handle(self, *args, **opts):
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"no project {opts['project']!r}")
        actor = command_actor(opts["actor"], project)  # the page's and the API's role: researcher
        try:
            if opts["dry_run"]:
                report = fill_pass_plan(project=project, fields=opts["fields"])
            else:
                with on_command_line():
                    report = fill_pass_start(project=project, actor=actor, fields=opts["fields"])
        except FillPassRefused as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(json.dumps(report, sort_keys=True))
