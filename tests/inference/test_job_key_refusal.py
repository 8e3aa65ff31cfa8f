"""A job whose endpoint cannot read its API key is refused before it is created, with the reason,
however it is launched (services.job_validate: the admin's form, the API, run_inference); and the
job form says how to add an endpoint when there is none, rather than "This field is required"."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from annotation.models import AuditEvent, Role
from inference import services
from inference.models import InferenceJob, ModelEndpoint
from tests.inference import factories

pytestmark = pytest.mark.django_db

ADD_JOB = "/admin/inference/inferencejob/add/"
UNSET = (
    "endpoint judge reads its API key from STATELAB_KEY_JUDGE, which is not set on this server: set "
    "STATELAB_KEY_JUDGE in the environment of the web server and the workers, or pick another endpoint"
)


@pytest.fixture
def researcher(make_user, make_project, tmp_path):
    user = make_user("res")
    project = make_project("st", "status", members={user: Role.RESEARCHER})
    release = factories.release_of(project, factories.status_items(project, 2, tmp_path))
    client = Client()
    client.force_login(user)
    return user, project, release, client


@pytest.fixture
def judge(db):
    return services.endpoint_create(
        name="judge",
        backend="openai",
        model_id="gpt",
        base_url="http://127.0.0.1:9/v1",
        api_key_env="STATELAB_KEY_JUDGE",
    )


def job_form(endpoint, project, release) -> dict:
    return {
        "endpoint": endpoint.pk if endpoint else "",
        "project": project.pk,
        "release": release.pk,
        "mode": "evaluate",
        "temperature": "0",
        "strategy": "direct",
    }


def test_the_service_refuses_a_job_whose_key_is_unset_or_empty_and_writes_nothing(researcher, judge, monkeypatch):
    user, project, release, _ = researcher
    audit_before = AuditEvent.objects.count()
    monkeypatch.delenv("STATELAB_KEY_JUDGE", raising=False)
    with pytest.raises(services.JobRefused) as unset:
        services.job_create(endpoint=judge, project=project, release=release, created_by=user)
    assert unset.value.messages == [UNSET]
    monkeypatch.setenv("STATELAB_KEY_JUDGE", "")
    with pytest.raises(services.JobRefused) as empty:
        services.job_create(endpoint=judge, project=project, release=release, created_by=user)
    assert empty.value.messages == [UNSET.replace("which is not set", "which is empty")]
    assert (InferenceJob.objects.count(), AuditEvent.objects.count()) == (0, audit_before)

    monkeypatch.setenv("STATELAB_KEY_JUDGE", "sk-test")
    job = services.job_create(endpoint=judge, project=project, release=release, created_by=user, start=False)
    assert InferenceJob.objects.get() == job


def test_a_backend_that_sends_no_key_is_not_refused_for_it(researcher, monkeypatch):
    _, project, release, _ = researcher
    monkeypatch.delenv("STATELAB_KEY_RND", raising=False)
    endpoint = services.endpoint_create(name="rnd", backend="random", api_key_env="STATELAB_KEY_RND")
    services.job_create(endpoint=endpoint, project=project, release=release, start=False)
    assert InferenceJob.objects.count() == 1


def test_the_admin_form_says_why_beside_the_endpoint_and_creates_nothing(researcher, judge, monkeypatch):
    _, project, release, client = researcher
    monkeypatch.delenv("STATELAB_KEY_JUDGE", raising=False)
    response = client.post(ADD_JOB, job_form(judge, project, release))
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors == {"endpoint": [UNSET]}
    assert UNSET in response.content.decode()
    assert InferenceJob.objects.count() == 0


def test_the_api_and_the_command_refuse_it_too(researcher, judge, monkeypatch):
    user, project, _, client = researcher
    monkeypatch.delenv("STATELAB_KEY_JUDGE", raising=False)
    response = client.post(
        f"/api/projects/{project.slug}/jobs/", {"endpoint": "judge", "release": "v1"}, "application/json"
    )
    assert (response.status_code, response.json()) == (400, {"detail": UNSET})
    with pytest.raises(CommandError) as refused:
        call_command(
            "run_inference", "--endpoint", "judge", "--project", "st", "--release", "v1", "--protocol", "status",
            stdout=StringIO(),
        )  # fmt: skip
    assert str(refused.value) == UNSET
    assert InferenceJob.objects.count() == 0


def test_with_no_endpoint_the_job_form_says_how_to_add_one(researcher):
    _, project, release, client = researcher
    assert not ModelEndpoint.objects.exists()
    page = client.get(ADD_JOB)
    html = page.content.decode()
    add = "/admin/inference/modelendpoint/add/"
    # A warning above the form, with the link.
    messages = [str(m) for m in page.context["messages"]]
    assert messages == [
        f'No model endpoint is set up for your projects yet: <a href="{add}">add one</a> (an OpenAI-compatible '
        "server, or the seeded random baseline to try the pipeline), then start the job here."
    ]
    assert f'<a href="{add}">add one</a>' in html
    assert f'<a href="{add}" id="add-endpoint-link">Add an endpoint</a>' in html
    # Saved anyway: the same advice where Django would say "This field is required."
    response = client.post(ADD_JOB, job_form(None, project, release))
    assert response.status_code == 200
    body = response.content.decode()
    assert "This field is required" not in body
    assert f'<li>No model endpoint is set up for your projects yet: <a href="{add}">add one</a>' in body
    assert InferenceJob.objects.count() == 0

    # With an endpoint offered, an empty choice asks for one.
    services.endpoint_create(name="rnd", backend="random")
    response = client.post(ADD_JOB, job_form(None, project, release))
    assert response.context["adminform"].form.errors["endpoint"] == ["Pick the endpoint the job runs on."]
    assert [str(m) for m in client.get(ADD_JOB).context["messages"]] == []
