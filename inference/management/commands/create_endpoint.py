"""python manage.py create_endpoint --name N --backend vllm|openai|random --model M [--base-url URL]
[--api-key-env VAR] [--concurrency C] [--option key=value ...]"""

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from inference import services
from inference.models import Backend


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
        parser.add_argument(
            "--option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="backend setting; values are read as JSON when they parse (numbers, true, {...})",
        )

    def handle(self, *args, **opts):
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
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages))
        self.stdout.write(f"endpoint {endpoint.pk} {endpoint.name} ({endpoint.backend} {endpoint.model_id}) created")
