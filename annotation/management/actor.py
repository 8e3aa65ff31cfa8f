"""`--actor USERNAME` for the management commands that import, freeze or export a project's data
or start a run on it (import_items, import_annotations, freeze_release, export_release,
import_predictions, run_inference).

The command's audit event names the actor, who must hold the role the page or API asks for the
same action in that project (researcher or admin; superusers act as admin everywhere), so the
command line is no way around the app's rules for someone who holds an account; run_inference
also makes the actor the job's created_by. `import_items --create` makes the project first: the
actor must then be allowed to create projects (require_project_creator), and the project's
creation is recorded under them. Without --actor the event records no actor. Either way a
command runs its work inside `on_command_line()`, so its events say details.source = "cli".
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from annotation.audit.record import CLI_SOURCE, audit_source
from annotation.models import Project, Role
from annotation.permissions import can_create_projects, has_role

ACTOR_HELP = (
    "username recorded as the actor in the audit trail; it must be a researcher or admin of the project "
    "(without --actor the event records no actor, and source=cli)"
)


def add_actor_argument(parser) -> None:
    parser.add_argument("--actor", metavar="USERNAME", help=ACTOR_HELP)


def on_command_line():
    """The block whose audit events say they came from the command line."""
    return audit_source(CLI_SOURCE)


def command_user(username: str | None):
    """The active account named by --actor (None without one); CommandError naming it otherwise."""
    if username is None:
        return None
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise CommandError(f"--actor: no user {username!r}")
    if not user.is_active:
        raise CommandError(f"--actor: the account {username!r} is inactive")
    return user


def require_command_role(user, project: Project, role: str = Role.RESEARCHER) -> None:
    """CommandError unless `user` (when given) holds `role` or above in `project`."""
    if user is not None and not has_role(user, project, role):
        raise CommandError(
            f"--actor: {user.get_username()} is not a {role} (or above) of project {project.slug}; "
            f"the page and the API ask for that role for this action"
        )


def require_project_creator(user) -> None:
    """CommandError unless `user` (when given) may create projects in the app (--create)."""
    if user is not None and not can_create_projects(user):
        raise CommandError(
            f"--actor: {user.get_username()} may not create projects (that needs the researcher or "
            f"admin role in some project, or a staff account)"
        )


def command_actor(username: str | None, project: Project, role: str = Role.RESEARCHER):
    """The --actor account, checked for `role` in `project` (None without --actor)."""
    user = command_user(username)
    require_command_role(user, project, role)
    return user
