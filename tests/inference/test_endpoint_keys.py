"""Secrets stay put: an endpoint's API key comes only from a variable the operator
allows; Django's own secrets never, and nothing tells whether a refused variable is set."""

import pytest
from django.core.exceptions import ValidationError

from inference import services
from inference.backends import BackendUnavailable, check_available, get_backend
from inference.backends.keys import key_var_refusal
from inference.models import ModelEndpoint

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "name", ["SECRET_KEY", "DATABASE_URL", "REDIS_URL", "HOME", "PATH", "MY_KEY", "secret_key", "A-B"]
)
def test_variables_outside_the_allow_list_are_refused(name):
    assert key_var_refusal(name) is not None


def test_the_operator_allows_names_and_a_prefix_but_never_djangos_secrets(settings):
    assert key_var_refusal("OPENAI_API_KEY") is None
    assert key_var_refusal("STATELAB_KEY_TOGETHER") is None
    assert key_var_refusal("") is None  # no key at all (a local server)
    settings.STATELAB_ENDPOINT_KEY_VARS = ("TOGETHER_API_KEY", "SECRET_KEY")
    settings.STATELAB_ENDPOINT_KEY_PREFIX = ""
    assert key_var_refusal("TOGETHER_API_KEY") is None
    assert key_var_refusal("SECRET_KEY") is not None
    assert key_var_refusal("STATELAB_KEY_TOGETHER") is not None


def test_an_endpoint_naming_secret_key_is_refused_and_nothing_is_stored():
    with pytest.raises(ValidationError) as refused:
        services.endpoint_create(
            name="leak", backend="openai", model_id="m", base_url="http://127.0.0.1:9/v1", api_key_env="SECRET_KEY"
        )
    assert "api_key_env" in refused.value.message_dict
    assert not ModelEndpoint.objects.filter(name="leak").exists()


def test_a_row_naming_a_secret_never_sends_it(monkeypatch):
    """A row written before the rule (or by hand): the backend refuses before reading the variable."""
    monkeypatch.setenv("SECRET_KEY", "the-django-secret")
    endpoint = ModelEndpoint.objects.create(
        name="old", backend="openai", model_id="m", base_url="http://127.0.0.1:9/v1", api_key_env="SECRET_KEY"
    )
    with pytest.raises(BackendUnavailable) as refused:
        get_backend(endpoint)
    assert "the-django-secret" not in str(refused.value)
    assert "may not hold an API key" in str(refused.value)


def test_availability_of_a_refused_variable_says_the_same_whether_it_is_set_or_not(monkeypatch):
    endpoint = ModelEndpoint(name="probe", backend="openai", model_id="m", api_key_env="SOME_VAR")
    monkeypatch.delenv("SOME_VAR", raising=False)
    with pytest.raises(BackendUnavailable) as unset:
        check_available(endpoint)
    monkeypatch.setenv("SOME_VAR", "x")
    with pytest.raises(BackendUnavailable) as set_:
        check_available(endpoint)
    assert str(unset.value) == str(set_.value)


def test_an_allowed_variable_is_read(monkeypatch):
    monkeypatch.setenv("STATELAB_KEY_JUDGE", "sk-test")
    endpoint = ModelEndpoint(
        name="ok", backend="openai", model_id="m", base_url="http://127.0.0.1:9/v1", api_key_env="STATELAB_KEY_JUDGE"
    )
    backend = get_backend(endpoint)
    assert backend._api_key == "sk-test"
