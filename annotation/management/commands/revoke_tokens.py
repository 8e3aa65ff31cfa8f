"""python manage.py revoke_tokens (--user U | --older-than DAYS | --all)"""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from annotation.tokens import tokens_revoke


class Command(BaseCommand):
    help = "Revoke API tokens: one user's, those older than some days, or all of them."

    def add_arguments(self, parser):
        parser.add_argument("--user", help="username whose tokens go")
        parser.add_argument("--older-than", type=float, metavar="DAYS", help="revoke tokens created at least DAYS ago")
        parser.add_argument("--all", action="store_true", help="revoke every token")

    def handle(self, *args, **opts):
        if not (opts["user"] or opts["older_than"] is not None or opts["all"]):
            raise CommandError("say which tokens: --user U, --older-than DAYS or --all")
        if opts["all"] and (opts["user"] or opts["older_than"] is not None):
            raise CommandError("--all revokes every token; give it alone")
        user = None
        if opts["user"]:
            user = get_user_model().objects.filter(username=opts["user"]).first()
            if user is None:
                raise CommandError(f"no user {opts['user']!r}")
        older_than = None
        if opts["older_than"] is not None:
            if opts["older_than"] < 0:
                raise CommandError("--older-than takes a number of days, 0 or more")
            older_than = timedelta(days=opts["older_than"])
        n = tokens_revoke(user=user, everyone=opts["all"], older_than=older_than)
        self.stdout.write(f"revoked {n} token{'s' if n != 1 else ''}")
