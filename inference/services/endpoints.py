"""Model endpoints: create one from typed settings (shared, or a project's own: models.ModelEndpoint);
option values as the command line gives them. Prices are the endpoint's fields; given among the
options (`create_endpoint --option price_per_1m_input=2.5`), they are moved to those fields."""

from __future__ import annotations

import json
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
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


PRICE_FIELDS = ("price_per_1m_input", "price_per_1m_output")


def endpoint_price(name: str, value: Any) -> Decimal | None:
    """A price as given (a number, or its text) in USD per million tokens; None when not given."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str, Decimal)):
        raise ValidationError(f"{name} must be a number of USD per million tokens, got {value!r}")
    try:
        price = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValidationError(f"{name} must be a number of USD per million tokens, got {value!r}") from None
    if not price.is_finite() or price < 0:
        raise ValidationError(f"{name} must be a number of USD per million tokens, 0 or more, got {value!r}")
    return price


def endpoint_options_check(options: dict[str, Any]) -> None:
    """Refuse settings that look like secrets (keys live in environment variables only) and
    prices among the options (they are the endpoint's own fields)."""
    for name in PRICE_FIELDS:
        if name in options:
            raise ValidationError(
                f"option {name!r} is not a backend setting: the price is a field of the endpoint of its own "
                "(the admin's Prices section, or endpoint_create's keyword)"
            )
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
    price_per_1m_input: Decimal | float | str | None = None,
    price_per_1m_output: Decimal | float | str | None = None,
) -> ModelEndpoint:
    if backend not in Backend.values:
        raise ValidationError(f"backend must be one of {', '.join(Backend.values)}")
    if backend != Backend.RANDOM and not model_id:
        raise ValidationError("a model id is required for the vllm and openai backends")
    if concurrency < 1:
        raise ValidationError("concurrency must be at least 1")
    options = dict(options or {})
    prices: dict[str, Decimal | None] = {}
    for field, value in zip(PRICE_FIELDS, (price_per_1m_input, price_per_1m_output)):
        if field in options:
            if value is not None:
                raise ValidationError(f"{field} is given twice: as the endpoint's price and among its options")
            value = options.pop(field)
        prices[field] = endpoint_price(field, value)
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
        **prices,
    )
    endpoint.full_clean()
    endpoint.save()
    return endpoint
