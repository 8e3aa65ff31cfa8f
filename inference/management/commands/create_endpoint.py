"""python manage.py create_endpoint --name N --backend vllm|openai|random --model M [--base-url URL]
[--api-key-env VAR] [--concurrency C] [--option key=value ...] [--project SLUG] [--if-missing]

Without --project the endpoint is shared (offered to every project); with it, the project's own.
--if-missing leaves an endpoint of that name (shared, or of the project) as it is, so a setup script
(the demo) can run again."""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotation.models import Project
from inference import services
from inference.models import Backend, ModelEndpoint


class Command(BaseCommand):
    help = "Create a model endpoint (the API key stays in the environment variable you name)."

    def add_arguments(self, parser):
        parser.add_argument("--name", required=True)
        parser.add_argument("--backend", required=True, choices=Backend.values)
        parser.add_argument("--model", default="", help="model id (e.g. a Hugging Face repo or an API model name)")
        parser.add_argument("--revision", default="")
        parser.add_argument("--base-url", default="")
        parser.add_argument("--api-key-env", default="", help="name of the environment variable holding the API key")
        parser.add_argument("--concurrency", type=int, default=8)
        parser.add_argument("--project", default="", help="slug of the project it belongs to (default: shared)")
        parser.add_argument(
            "--if-missing", action="store_true", help="leave an existing endpoint of that name as it is"
        )
        parser.add_argument(
            "--option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="backend setting; values are read as JSON when they parse (numbers, true, {...})",
        )

    def handle(self, *args, **opts):
        project = None
        if opts["project"]:
            project = Project.objects.filter(slug=opts["project"]).first()
            if project is None:
                raise CommandError(f"no project {opts['project']!r}")
        if opts["if_missing"]:
            existing = ModelEndpoint.objects.filter(name=opts["name"], project=project).first()
            if existing is not None:
                self.stdout.write(f"endpoint {existing.pk} {existing.name} exists; left as it is")
                return
        try:
            endpoint = services.endpoint_create(
                name=opts["name"],
                backend=opts["backend"],
                model_id=opts["model"],
                revision=opts["revision"],
                base_url=opts["base_url"],
                api_key_env=opts["api_key_env"],
                concurrency=opts["concurrency"],
                options=services.parse_key_values(opts["option"]),
                project=project,
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages))
        what = " ".join(filter(None, (endpoint.backend, endpoint.model_id)))
        whose = f"of project {project.slug}" if project else "shared"
        self.stdout.write(f"endpoint {endpoint.pk} {endpoint.name} ({what}, {whose}) created")
