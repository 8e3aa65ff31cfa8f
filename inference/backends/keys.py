"""Which environment variables an endpoint may name as its API key (secrets stay in the environment).

An endpoint row names the variable holding its key (``api_key_env``); the key itself never enters
the database. Without a rule, a researcher could name ``SECRET_KEY`` or ``DATABASE_URL`` and have
it sent as a bearer token to a server of their choosing, or probe which variables are set. So a
name is usable only when the operator allows it:

- listed in ``STATELAB_ENDPOINT_KEY_VARS`` (default: ``OPENAI_API_KEY``), or
- starting with ``STATELAB_ENDPOINT_KEY_PREFIX`` (default: ``STATELAB_KEY_``),

and never one of Django's or StateLab's own secrets (DENIED), whatever the settings say.
"""

from __future__ import annotations

import os
import re

from .base import BackendUnavailable

NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]{0,99}$")
DENIED = frozenset(
    {
        "SECRET_KEY",
        "DJANGO_SECRET_KEY",
        "DATABASE_URL",
        "REDIS_URL",
        "CELERY_BROKER_URL",
        "DJANGO_SUPERUSER_PASSWORD",
        "POSTGRES_PASSWORD",
        "PGPASSWORD",
        "AWS_SECRET_ACCESS_KEY",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "MEDIA_STORAGE_OPTIONS",
    }
)


def _rules() -> tuple[frozenset[str], str]:
    from django.conf import settings

    names = frozenset(getattr(settings, "STATELAB_ENDPOINT_KEY_VARS", ("OPENAI_API_KEY",)))
    prefix = getattr(settings, "STATELAB_ENDPOINT_KEY_PREFIX", "STATELAB_KEY_")
    return names, prefix


def key_var_refusal(name: str) -> str | None:
    """Why `name` may not hold an endpoint's key, or None when it may."""
    if not name:
        return None
    names, prefix = _rules()
    if not NAME_RE.match(name):
        return f"{name!r} is not an environment variable name (capital letters, digits and _)"
    allowed = (name in names or (prefix and name.startswith(prefix))) and name not in DENIED
    if not allowed:
        listed = ", ".join(sorted(names)) or "none"
        return (
            f"the variable {name} may not hold an API key: the operator allows {listed}"
            f"{f' and names starting with {prefix}' if prefix else ''} (STATELAB_ENDPOINT_KEY_VARS, "
            "STATELAB_ENDPOINT_KEY_PREFIX)"
        )
    return None


def endpoint_api_key(endpoint) -> str | None:
    """The endpoint's key from its allowed variable (None when it names none); raises
    BackendUnavailable for a variable that is not allowed or not set."""
    name = endpoint.api_key_env
    if not name:
        return None
    refusal = key_var_refusal(name)
    if refusal:
        raise BackendUnavailable(refusal)
    if name not in os.environ:
        raise BackendUnavailable(f"the API key variable {name} named by endpoint {endpoint.name} is not set")
    return os.environ[name]
