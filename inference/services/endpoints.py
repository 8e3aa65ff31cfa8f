"""Model endpoints: create one from typed settings (shared, or a project's own: models.ModelEndpoint);
option values as the command line gives them."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from annotation.models import Project

from ..models import Backend, ModelEndpoint


def _coerce(value: str) -> Any:
    """Command-line option values: JSON when it parses (numbers, booleans, objects), else text."""
    try:
        return json.loads(value)
    except ValueError:
        return value


def parse_key_values(pairs: Iterable[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise ValidationError(f"expected key=value, got {pair!r}")
        key, value = pair.split("=", 1)
        out[key.strip()] = _coerce(value.strip())
    return out


def endpoint_options_check(options: dict[str, Any]) -> None:
    """Refuse settings that look like secrets: keys live in environment variables only."""
    for key in options:
        lowered = key.lower()
        if (
            any(word in lowered for word in ("api_key", "apikey", "secret", "token", "password"))
            and "tokens" not in lowered
        ):
            raise ValidationError(
                f"option {key!r} looks like a secret; put it in an environment variable and name that variable "
                "as the endpoint's API key variable"
            )


@transaction.atomic
def endpoint_create(
    *,
    name: str,
    backend: str,
    model_id: str = "",
    revision: str = "",
    base_url: str = "",
    api_key_env: str = "",
    concurrency: int = 8,
    options: dict[str, Any] | None = None,
    project: Project | None = None,
) -> ModelEndpoint:
    if backend not in Backend.values:
        raise ValidationError(f"backend must be one of {', '.join(Backend.values)}")
    if backend != Backend.RANDOM and not model_id:
        raise ValidationError("a model id is required for the vllm and openai backends")
    if concurrency < 1:
        raise ValidationError("concurrency must be at least 1")
    options = dict(options or {})
    endpoint_options_check(options)
    endpoint = ModelEndpoint(
        name=name,
        project=project,
        backend=backend,
        model_id=model_id,
        revision=revision,
        base_url=base_url,
        api_key_env=api_key_env,
        concurrency=concurrency,
        options=options,
    )
    endpoint.full_clean()
    endpoint.save()
    return endpoint
