"""API tokens: revoked at sign-out and by command, an optional lifetime, and wrong
tokens from one address answered with 429 past the production limit (20 a minute)."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotation.tokens import BAD_TOKEN_KEY

pytestmark = pytest.mark.django_db


def me(key: str, ip: str = "10.20.0.1"):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client.get("/api/me/", REMOTE_ADDR=ip)


@pytest.fixture
def fresh_addresses():
    """The bad-token counts live in the shared cache (Redis): start these addresses at zero."""
    ips = [f"10.20.{i}.{j}" for i in range(3) for j in range(1, 4)]
    cache.delete_many([BAD_TOKEN_KEY.format(address=ip) for ip in ips])
    yield ips
    cache.delete_many([BAD_TOKEN_KEY.format(address=ip) for ip in ips])


def age(token: Token, **delta) -> None:
    Token.objects.filter(pk=token.pk).update(created=timezone.now() - timedelta(**delta))


# --- sign-out ---------------------------------------------------------------------------------


def test_signing_out_revokes_the_users_tokens_and_only_theirs(make_user, fresh_addresses):
    alice, bob = make_user("alice"), make_user("bob")
    mine, theirs = Token.objects.create(user=alice), Token.objects.create(user=bob)
    assert me(mine.key).status_code == 200
    browser = Client()
    browser.force_login(alice)
    assert browser.post("/accounts/logout/").status_code == 302
    assert not Token.objects.filter(user=alice).exists()
    gone = me(mine.key)
    assert gone.status_code == 401
    assert gone.json() == {"detail": "Invalid token."}
    assert me(theirs.key).status_code == 200
    assert Token.objects.filter(user=bob).count() == 1


def test_an_anonymous_sign_out_revokes_nothing(make_user):
    token = Token.objects.create(user=make_user("carol"))
    assert Client().post("/accounts/logout/").status_code == 302
    assert Token.objects.filter(pk=token.pk).exists()


# --- revoke_tokens command ----------------------------------------------------------------------


def test_revoke_tokens_by_user(make_user, capsys):
    alice, bob = make_user("alice"), make_user("bob")
    Token.objects.create(user=alice)
    Token.objects.create(user=bob)
    call_command("revoke_tokens", "--user", "alice")
    assert capsys.readouterr().out.strip() == "revoked 1 token"
    assert list(Token.objects.values_list("user__username", flat=True)) == ["bob"]


def test_revoke_tokens_older_than_days(make_user, capsys):
    old, new = Token.objects.create(user=make_user("old")), Token.objects.create(user=make_user("new"))
    age(old, days=31)
    age(new, days=29)
    call_command("revoke_tokens", "--older-than", "30")
    assert capsys.readouterr().out.strip() == "revoked 1 token"
    assert list(Token.objects.values_list("pk", flat=True)) == [new.pk]


def test_revoke_tokens_all(make_user, capsys):
    for name in ("a", "b", "c"):
        Token.objects.create(user=make_user(name))
    call_command("revoke_tokens", "--all")
    assert capsys.readouterr().out.strip() == "revoked 3 tokens"
    assert Token.objects.count() == 0


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "say which tokens"),
        (["--user", "nobody"], "no user 'nobody'"),
        (["--all", "--user", "a"], "give it alone"),
        (["--older-than", "-1"], "0 or more"),
    ],
)
def test_revoke_tokens_refuses_unclear_requests_and_revokes_nothing(make_user, args, message):
    Token.objects.create(user=make_user("a"))
    with pytest.raises(CommandError, match=message):
        call_command("revoke_tokens", *args)
    assert Token.objects.count() == 1


# --- lifetime -------------------------------------------------------------------------------------


def test_tokens_last_thirty_days_by_default(make_user, settings, fresh_addresses):
    assert settings.STATELAB_TOKEN_TTL_HOURS == 720
    token = Token.objects.create(user=make_user("u"))
    age(token, days=29, hours=23)
    assert me(token.key).status_code == 200
    age(token, days=30, seconds=1)
    assert me(token.key).status_code == 401


def test_a_lifetime_of_zero_means_tokens_never_expire(make_user, settings, fresh_addresses, monkeypatch):
    import importlib

    import config.settings as production

    monkeypatch.setenv("STATELAB_TOKEN_TTL_HOURS", "0")
    assert importlib.reload(production).STATELAB_TOKEN_TTL_HOURS is None
    monkeypatch.delenv("STATELAB_TOKEN_TTL_HOURS")
    importlib.reload(production)
    settings.STATELAB_TOKEN_TTL_HOURS = None
    token = Token.objects.create(user=make_user("u"))
    age(token, days=3650)
    assert me(token.key).status_code == 200


def test_signing_out_of_the_admin_revokes_the_api_tokens(make_user, fresh_addresses):
    from django.test import Client

    user = make_user("adminuser", superuser=True)
    token = Token.objects.create(user=user)
    browser = Client()
    browser.force_login(user)
    assert browser.post("/admin/logout/").status_code == 302  # to LOGOUT_REDIRECT_URL, as the app's sign-out
    assert not Token.objects.filter(user=user).exists()
    assert me(token.key).status_code == 401


def test_a_token_past_its_lifetime_gets_401_saying_so(make_user, settings, fresh_addresses):
    settings.STATELAB_TOKEN_TTL_HOURS = 24  # an operator's choice; the default is 30 days
    token = Token.objects.create(user=make_user("u"))
    age(token, hours=23, minutes=59)
    assert me(token.key).status_code == 200
    age(token, hours=24, seconds=1)
    expired = me(token.key)
    assert expired.status_code == 401
    assert expired.json() == {
        "detail": "Token expired: tokens last 24 hours from their creation here. Ask for a new token."
    }
    assert expired["WWW-Authenticate"] == "Token"
    # an expired token is not a guess: it does not count towards the address's lockout
    assert cache.get(BAD_TOKEN_KEY.format(address="10.20.0.1")) is None


# --- wrong tokens ---------------------------------------------------------------------------------


def test_the_21st_wrong_token_in_a_minute_from_one_address_gets_429(make_user, settings, fresh_addresses):
    assert (settings.STATELAB_BAD_TOKEN_LIMIT, settings.STATELAB_BAD_TOKEN_WINDOW_SECONDS) == (20, 60)
    good = Token.objects.create(user=make_user("u"))
    attacker, elsewhere = "10.20.1.1", "10.20.1.2"
    for i in range(20):
        response = me(f"guess{i:036d}", ip=attacker)
        assert response.status_code == 401, i
        assert response.json() == {"detail": "Invalid token."}
    refused = me("guess-21", ip=attacker)
    assert refused.status_code == 429
    assert refused.json() == {"detail": "Too many wrong tokens from this address. Expected available in 60 seconds."}
    assert refused["Retry-After"] == "60"
    # a right token from that address waits too (a guesser must not learn which guess was right) ...
    assert me(good.key, ip=attacker).status_code == 429
    # ... while everyone else is served
    assert me(good.key, ip=elsewhere).status_code == 200
    assert me("one-typo", ip=elsewhere).status_code == 401


def test_the_window_ends_and_the_address_is_served_again(make_user, fresh_addresses):
    good = Token.objects.create(user=make_user("u"))
    ip = "10.20.2.1"
    for i in range(21):
        me(f"x{i}", ip=ip)
    assert me(good.key, ip=ip).status_code == 429
    cache.delete(BAD_TOKEN_KEY.format(address=ip))  # the minute has passed (the key's expiry)
    assert me(good.key, ip=ip).status_code == 200


def test_the_count_lives_for_the_window(make_user, settings, fresh_addresses):
    ip = "10.20.2.2"
    me("wrong", ip=ip)
    key = cache.make_and_validate_key(BAD_TOKEN_KEY.format(address=ip))
    ttl = cache._cache.get_client(key).ttl(key)
    assert 55 <= ttl <= settings.STATELAB_BAD_TOKEN_WINDOW_SECONDS


def test_right_tokens_and_sessions_are_never_counted(make_user, fresh_addresses):
    user = make_user("u")
    good = Token.objects.create(user=user)
    ip = "10.20.2.3"
    for _ in range(25):
        assert me(good.key, ip=ip).status_code == 200
    session = Client()
    session.force_login(user)
    assert session.get("/api/me/", REMOTE_ADDR=ip).status_code == 200
    assert cache.get(BAD_TOKEN_KEY.format(address=ip)) is None
