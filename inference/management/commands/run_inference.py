"""python manage.py run_inference --endpoint N --project P [--release V] --protocol X
[--param key=value ...] [--mode evaluate|suggest] [--wait [--strict]] [--actor USERNAME]

The endpoint is the project's own of that name, else the shared one (selectors.endpoint_named), and
must be usable, as for a launch from the API or the admin (its API key variable one the operator
allows: selectors.endpoints_usable; set, services.job_validate); else nothing is created and the
error says why.
The launch is recorded in the audit trail (as one from the admin or the API is) with source=cli,
under --actor when given: an account that must hold the role the admin and the API ask for to
launch a job in the project (researcher or admin); it is also the job's created_by.

Exit status with --wait: 0 when the job finished (a warning line on stderr gives the number of
failed queries and their main errors if some failed, another the number of judge replies that
stayed unreadable JSON); 1 when the job failed (including every query failing) or was cancelled;
2 when it finished with failed queries or unreadable replies (both scored as missing) and
--strict was given."""

import sys
import time

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotation.management.actor import add_actor_argument, command_actor, on_command_line
from annotation.models import Project, Release
from inference import selectors, services
from inference.models import InferenceJob, JobMode, JobStatus


class Command(BaseCommand):
    help = (
        "Start an inference job; with --wait, print progress until it ends (exit 1 if it failed or was "
        "cancelled; a finished job with failed queries or unreadable judge replies exits 0 with a warning, "
        "or 2 with --strict)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--endpoint", required=True, help="endpoint name")
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--release", default=None, help="release version")
        parser.add_argument("--protocol", required=True)
        parser.add_argument("--mode", default=JobMode.EVALUATE, choices=[JobMode.EVALUATE, JobMode.SUGGEST])
        parser.add_argument(
            "--param",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="job parameter: temperature, max_tokens, seed, frames, item_limit, strategy, chunk_size, ...",
        )
        parser.add_argument("--wait", action="store_true")
        parser.add_argument("--poll", type=float, default=2.0, help="seconds between progress lines with --wait")
        parser.add_argument(
            "--strict",
            action="store_true",
            help="with --wait: exit 2 when the job finished but some queries failed or some "
            "judge replies stayed unreadable",
        )
        add_actor_argument(parser)

    def handle(self, *args, **opts):
        try:
            project = Project.objects.get(slug=opts["project"])
            release = Release.objects.get(project=project, version=opts["release"]) if opts["release"] else None
        except (Project.DoesNotExist, Release.DoesNotExist) as exc:
            raise CommandError(str(exc))
        endpoint = selectors.endpoint_named(project=project, name=opts["endpoint"])
        if endpoint is None:
            raise CommandError(f"no endpoint named {opts['endpoint']!r} is shared or belongs to project {project.slug}")
        actor = command_actor(opts["actor"], project)  # the admin's and the API's job launch role: researcher
        refusal = selectors.endpoint_refusal(endpoint)  # the launch API's rule (selectors.endpoints_usable)
        if refusal:
            raise CommandError(f"endpoint {endpoint.name} cannot be used: {refusal}")
        try:
            with on_command_line():
                job = services.job_create(
                    endpoint=endpoint,
                    project=project,
                    release=release,
                    protocol=opts["protocol"],
                    mode=opts["mode"],
                    params=services.parse_key_values(opts["param"]),
                    created_by=actor,
                )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages))
        self.stdout.write(f"job {job.pk} created ({job.model_name} on {project.slug}, {job.protocol})")
        if not opts["wait"]:
            return
        last = None
        while True:
            job = InferenceJob.objects.select_related("project", "endpoint").get(pk=job.pk)
            p = selectors.job_progress(job=job)
            line = (
                f"job {job.pk} {p['status']}: {p['percent']}% ({p['done']} done, {p['failed']} failed of {p['total']})"
                + (f", {p['rate_per_s']:.2f}/s" if p["rate_per_s"] else "")
                + (f", ETA {p['eta_s']:.0f}s" if p["eta_s"] and p["status"] == JobStatus.RUNNING else "")
            )
            if line != last:
                self.stdout.write(line)
                self.stdout.flush()
                last = line
            if p["status"] not in (JobStatus.QUEUED, JobStatus.RUNNING):
                break
            time.sleep(opts["poll"])
        if job.status == JobStatus.FAILED:
            self.stderr.write(f"job {job.pk} failed: {job.error}")
            sys.exit(1)
        if job.status == JobStatus.CANCELLED:
            self.stderr.write(f"job {job.pk} was cancelled")
            sys.exit(1)
        if job.failed_queries:
            self.stderr.write(
                f"warning: job {job.pk} finished with {job.failed_queries} of {job.total_queries} queries failed "
                f"({services.failure_summary(job)}); re-run them with the admin action 'Retry failed items'"
            )
        unreadable = selectors.unreadable_count(job)
        if unreadable:
            self.stderr.write(
                f"warning: job {job.pk} finished with {unreadable} of {job.total_queries} replies unreadable "
                f"(not valid JSON after the repairs; scored as missing); ask again with the admin action "
                f"'Retry failed items'"
            )
        if (job.failed_queries or unreadable) and opts["strict"]:
            sys.exit(2)
