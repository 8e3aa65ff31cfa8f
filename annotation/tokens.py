"""API tokens: their lifetime, their revocation, and the count of bad tokens per client address.

- A token lasts STATELAB_TOKEN_TTL_HOURS from its creation (unset: for ever); an older one is
  refused with 401 and a message saying so (annotation.permissions.TokenAuthentication).
- Signing out of the site revokes the user's tokens (annotation.views.account.LogoutView); the
  command `revoke_tokens` revokes by user, by age or all.
- Wrong tokens are counted per client address in the shared cache (Redis in production):
  past STATELAB_BAD_TOKEN_LIMIT in STATELAB_BAD_TOKEN_WINDOW_SECONDS every token request from
  that address gets 429 until the window ends, a right token included (else a guesser would
  still learn which guess was right).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import redis
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from rest_framework.authtoken.models import Token

BAD_TOKEN_KEY = "bad-token:{address}"
CACHE_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
logger = logging.getLogger(__name__)


def token_ttl() -> timedelta | None:
    hours = getattr(settings, "STATELAB_TOKEN_TTL_HOURS", None)
    return timedelta(hours=hours) if hours else None


def token_expired(created: datetime, *, now: datetime | None = None) -> bool:
    ttl = token_ttl()
    return ttl is not None and created + ttl <= (now or timezone.now())


def token_expired_message() -> str:
    hours = settings.STATELAB_TOKEN_TTL_HOURS
    return f"Token expired: tokens last {hours:g} hours from their creation here. Ask for a new token."


@transaction.atomic
def tokens_revoke(*, user=None, everyone: bool = False, older_than: timedelta | None = None) -> int:
    """Delete tokens: the user's, those created longer than `older_than` ago, or all (`everyone`).
    Returns how many went. Asked for nothing, it deletes nothing."""
    tokens = Token.objects.all()
    if user is not None:
        tokens = tokens.filter(user=user)
    if older_than is not None:
        tokens = tokens.filter(created__lte=timezone.now() - older_than)
    if user is None and older_than is None and not everyone:
        return 0
    deleted, _ = tokens.delete()
    return deleted


# --- bad tokens per client address -------------------------------------------------------------


def client_address(request) -> str:
    """The caller's address as the login lockout (django-axes) sees it, so one proxy setting
    (AXES_PROXY_COUNT) serves both."""
    from axes.helpers import get_client_ip_address

    return get_client_ip_address(request) or "unknown"


def bad_tokens_blocked(address: str) -> bool:
    try:
        return (cache.get(BAD_TOKEN_KEY.format(address=address)) or 0) >= settings.STATELAB_BAD_TOKEN_LIMIT
    except CACHE_DOWN as exc:
        # The count lives in Redis. While Redis is down the API keeps serving right tokens (the
        # annotation flow needs nothing else from Redis); wrong ones are still refused, uncounted.
        logger.warning("bad-token count unavailable (cache down), not enforced: %s", exc)
        return False


def bad_token_count(address: str) -> int:
    """Count one wrong token from `address`; returns the count in the current window (0 when the
    cache cannot be reached)."""
    try:
        return _bad_token_count(address)
    except CACHE_DOWN as exc:
        logger.warning("bad-token count unavailable (cache down), not counted: %s", exc)
        return 0


def _bad_token_count(address: str) -> int:
    key = BAD_TOKEN_KEY.format(address=address)
    # The window starts at the first wrong token; add() leaves a running window as it is.
    cache.add(key, 0, timeout=settings.STATELAB_BAD_TOKEN_WINDOW_SECONDS)
    try:
        return cache.incr(key)
    except ValueError:  # the window ended between add() and incr()
        cache.add(key, 1, timeout=settings.STATELAB_BAD_TOKEN_WINDOW_SECONDS)
        return 1
