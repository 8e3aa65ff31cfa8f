"""python manage.py export_release <project> <version> [-o FILE] [--jsonl | --zip]"""
import sys

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Release
from annotation.releases import release_export


class Command(BaseCommand):
    help = (
        "Stream a release as JSON (default), JSONL (--jsonl: a header line, then one item per line) or a zip "
        "with items.jsonl, release.json and the media (--zip, or an -o name ending in .zip)."
    )

    def add_arguments(self, parser):
        parser.add_argument("project", help="project slug")
        parser.add_argument("version")
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")
        fmt = parser.add_mutually_exclusive_group()
        fmt.add_argument("--jsonl", action="store_true")
        fmt.add_argument("--zip", action="store_true")

    def handle(self, *args, **opts):
        release = Release.objects.select_related("project").filter(
            project__slug=opts["project"], version=opts["version"]
        ).first()
        if release is None:
            raise CommandError(f"no release {opts['version']!r} in project {opts['project']!r}")
        out_name = opts["output"]
        fmt = "jsonl" if opts["jsonl"] else "zip" if opts["zip"] or (out_name or "").endswith(".zip") else "json"
        if fmt == "zip" and not out_name:
            raise CommandError("a zip export needs -o FILE")
        stream = open(out_name, "wb") if out_name else sys.stdout.buffer
        try:
            for chunk in release_export(release, fmt):
                stream.write(chunk)
        finally:
            if out_name:
                stream.close()
            else:
                stream.flush()
        if out_name:
            self.stderr.write(f"{release}: {release.item_count} items -> {out_name} ({fmt})")
