"""python manage.py prune_cache [--unused-days D] [--max-gb G] [--keep-recent-minutes M]

Bounds this host's caches of media copied from object storage and of sampled video frames
(inference/services/cache.py): run it from cron or a systemd timer on each worker host."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from inference.services.cache import cache_prune


class Command(BaseCommand):
    help = (
        "Remove cached media copies and video frames of this host: those unused for --unused-days, then the "
        "least recently used until the caches hold at most --max-gb. Entries used in the last "
        "--keep-recent-minutes stay. Uploads waiting to be imported are never touched."
    )

    def add_arguments(self, parser):
        parser.add_argument("--unused-days", type=float, default=None, help="remove entries unused for this long")
        parser.add_argument("--max-gb", type=float, default=None, help="then keep at most this many GB (10^9 bytes)")
        parser.add_argument(
            "--keep-recent-minutes",
            type=float,
            default=60.0,
            help="never remove an entry used this recently (a worker may be reading it; default 60)",
        )

    def handle(self, *args, **opts):
        unused, max_gb, recent = opts["unused_days"], opts["max_gb"], opts["keep_recent_minutes"]
        if unused is None and max_gb is None:
            raise CommandError("say what to remove: --unused-days D and/or --max-gb G")
        for name, value in (("--unused-days", unused), ("--max-gb", max_gb), ("--keep-recent-minutes", recent)):
            if value is not None and value < 0:
                raise CommandError(f"{name} must not be negative (got {value:g})")
        result = cache_prune(
            settings.CACHE_ROOT,
            unused_for=None if unused is None else unused * 86400,
            max_bytes=None if max_gb is None else int(max_gb * 1e9),
            keep_recent=recent * 60,
        )
        self.stdout.write(
            f"removed {result['removed']} cache entries ({result['freed_bytes'] / 1e6:.1f} MB); "
            f"kept {result['kept']} ({result['kept_bytes'] / 1e6:.1f} MB) under {settings.CACHE_ROOT}"
        )
