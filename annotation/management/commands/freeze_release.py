"""python manage.py freeze_release <project> <version> [--split S] [--actor USERNAME]"""

from django.core.management.base import BaseCommand, CommandError

from annotation.management.actor import add_actor_argument, command_actor, on_command_line
from annotation.models import Project
from annotation.releases import ReleaseRefused, release_freeze


class Command(BaseCommand):
    help = "Freeze the verified items of one split into an immutable, checksummed release."

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("version", help="release name, e.g. v1 (unique in the project)")
        parser.add_argument("--split", default="test")
        add_actor_argument(parser)

    def handle(self, *args, **opts):
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"no project {opts['project']!r}")
        actor = command_actor(opts["actor"], project)  # the releases page's role: researcher
        try:
            with on_command_line():
                release = release_freeze(project=project, version=opts["version"], split=opts["split"], user=actor)
        except ReleaseRefused as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"{project.slug}@{release.version}: {release.item_count} items of split {release.split}, "
            f"sha256 {release.checksum}"
        )
