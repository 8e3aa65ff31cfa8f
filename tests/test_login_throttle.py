"""Authentication is throttled: 50 wrong passwords then the right one used to log in."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def login(client: Client, username: str, password: str, ip: str = "10.0.0.1"):
    return client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=ip)


def test_wrong_passwords_lock_the_account_from_that_address_even_for_the_right_one(make_user, settings):
    make_user("victim", password="correct-horse-battery")
    attacker = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert login(attacker, "victim", "guess").status_code == 200  # the form again, with an error
    assert login(attacker, "victim", "guess").status_code == 429  # the limit-th failure locks
    locked = login(attacker, "victim", "correct-horse-battery")
    assert locked.status_code == 429
    assert "_auth_user_id" not in attacker.session
    # the owner logging in from elsewhere is not locked out by the attacker
    owner = Client()
    assert login(owner, "victim", "correct-horse-battery", ip="10.0.0.2").status_code == 302
    assert owner.session["_auth_user_id"]


def test_a_success_before_the_limit_resets_the_count(make_user, settings):
    make_user("typo", password="correct-horse-battery")
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        login(client, "typo", "oops")
    assert login(client, "typo", "correct-horse-battery").status_code == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        login(client, "typo", "oops")
    assert login(client, "typo", "correct-horse-battery").status_code == 302
