"""Endpoints of a project and shared ones (models.ModelEndpoint, inference/admin_endpoints.py): a
project's researchers add endpoints for their projects in the admin and see the shared ones read
only, never another project's; a job of a project runs only on a shared endpoint or one of its own,
whichever way it is launched; a project's endpoint takes a key only from an allowed variable and
only toward a shared endpoint's server."""

from io import StringIO
from types import SimpleNamespace

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from annotation.models import AuditEvent, Role
from inference import services
from inference.models import InferenceJob, ModelEndpoint
from tests.inference import factories

pytestmark = pytest.mark.django_db

ADD = "/admin/inference/modelendpoint/add/"
LIST = "/admin/inference/modelendpoint/"


def endpoint_form(**fields) -> dict:
    form = {
        "name": "mine",
        "backend": "openai",
        "model_id": "m",
        "revision": "",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "",
        "concurrency": "4",
        "options": "{}",
    }
    return {**form, **fields}


@pytest.fixture
def w(make_user, make_project, tmp_path):
    res_a, res_b = make_user("res_a"), make_user("res_b")
    a = make_project("proj-a", "status", members={res_a: Role.RESEARCHER})
    b = make_project("proj-b", "status", members={res_b: Role.RESEARCHER})
    shared = services.endpoint_create(name="shared-random", backend="random")
    own_a = services.endpoint_create(name="a-random", backend="random", project=a)
    own_b = services.endpoint_create(name="b-secret-model", backend="random", project=b)
    release_a = factories.release_of(a, factories.status_items(a, 2, tmp_path))
    client = Client()
    client.force_login(res_a)
    return SimpleNamespace(
        res_a=res_a, a=a, b=b, shared=shared, own_a=own_a, own_b=own_b, release_a=release_a, client=client
    )


def test_a_researcher_lists_the_shared_endpoints_and_their_projects_never_another_projects(w):
    listing = w.client.get(LIST).content.decode()
    assert "shared-random" in listing and "a-random" in listing
    assert "b-secret-model" not in listing
    # B's endpoint by its URL: the admin's "doesn't exist", for the page and its changes.
    for url in (f"{LIST}{w.own_b.pk}/change/", f"{LIST}{w.own_b.pk}/delete/"):
        response = w.client.get(url)
        assert (response.status_code, response["Location"]) == (302, "/admin/")
    response = w.client.post(f"{LIST}{w.own_b.pk}/change/", endpoint_form(name="stolen", backend="random"))
    assert response.status_code == 302
    assert ModelEndpoint.objects.get(pk=w.own_b.pk).name == "b-secret-model"


def test_a_researcher_adds_an_endpoint_for_their_project_only(w):
    page = w.client.get(ADD).content.decode()
    assert 'value="proj-a"' not in page  # choices are by id
    assert f'<option value="{w.a.pk}">proj-a</option>' in page and "proj-b" not in page

    # For project B, typed into the POST: refused, nothing made.
    response = w.client.post(ADD, endpoint_form(project=w.b.pk))
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    # No project: a researcher's endpoint belongs to one of their projects.
    response = w.client.post(ADD, endpoint_form(project=""))
    assert response.status_code == 200 and "This field is required" in response.content.decode()
    assert not ModelEndpoint.objects.filter(name="mine").exists()

    response = w.client.post(ADD, endpoint_form(project=w.a.pk))
    assert response.status_code == 302
    made = ModelEndpoint.objects.get(name="mine")
    assert (made.project, made.backend, made.base_url) == (w.a, "openai", "http://127.0.0.1:9/v1")


def test_a_researcher_changes_their_projects_endpoint_but_not_a_shared_one(w):
    response = w.client.post(f"{LIST}{w.own_a.pk}/change/", endpoint_form(name="a-renamed", backend="random"))
    assert response.status_code == 302
    w.own_a.refresh_from_db()
    assert (w.own_a.name, w.own_a.project) == ("a-renamed", w.a)  # the project stays: read only once added

    page = w.client.get(f"{LIST}{w.shared.pk}/change/")
    assert page.status_code == 200 and 'name="name"' not in page.content.decode()  # a view, no form
    response = w.client.post(f"{LIST}{w.shared.pk}/change/", endpoint_form(name="hijacked", backend="random"))
    assert response.status_code == 403
    assert w.client.post(f"{LIST}{w.shared.pk}/delete/", {"post": "yes"}).status_code == 403
    assert ModelEndpoint.objects.get(pk=w.shared.pk).name == "shared-random"


def test_the_vllm_engine_is_not_a_researchers_to_set_up(w):
    page = w.client.get(ADD).content.decode()
    assert 'value="vllm"' not in page and 'value="openai"' in page and 'value="random"' in page
    response = w.client.post(ADD, endpoint_form(project=w.a.pk, backend="vllm", options='{"trust_remote_code": true}'))
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert not ModelEndpoint.objects.filter(name="mine").exists()


def test_a_projects_endpoint_takes_a_key_only_from_an_allowed_variable_toward_a_shared_server(w):
    # Not an allowed variable: refused, naming the rule.
    response = w.client.post(ADD, endpoint_form(project=w.a.pk, api_key_env="SECRET_KEY"))
    assert response.status_code == 200
    assert "the variable SECRET_KEY may not hold an API key" in response.content.decode()
    # Allowed, but sent to a server of the researcher's choosing: refused.
    response = w.client.post(
        ADD, endpoint_form(project=w.a.pk, api_key_env="OPENAI_API_KEY", base_url="https://collector.example/v1")
    )
    assert response.status_code == 200
    assert "may use the key in OPENAI_API_KEY only with the base URL of a shared endpoint" in response.content.decode()
    assert not ModelEndpoint.objects.filter(name="mine").exists()

    # The operator's shared endpoint sends that key to its server: a project's variant may too.
    services.endpoint_create(
        name="operator-gpt",
        backend="openai",
        model_id="gpt",
        base_url="https://api.example/v1",
        api_key_env="OPENAI_API_KEY",
    )
    response = w.client.post(
        ADD, endpoint_form(project=w.a.pk, api_key_env="OPENAI_API_KEY", base_url="https://api.example/v1")
    )
    assert response.status_code == 302
    assert ModelEndpoint.objects.get(name="mine").api_key_env == "OPENAI_API_KEY"


def test_names_are_unique_within_a_project_and_among_shared_endpoints(w):
    # Another project may use a name B uses (nothing tells A that B has one).
    response = w.client.post(ADD, endpoint_form(project=w.a.pk, name="b-secret-model", backend="random"))
    assert response.status_code == 302
    assert ModelEndpoint.objects.filter(name="b-secret-model").count() == 2
    # A name the project or a shared endpoint has: refused with the reason.
    for taken in ("a-random", "shared-random"):
        response = w.client.post(ADD, endpoint_form(project=w.a.pk, name=taken, backend="random"))
        assert response.status_code == 200
        assert f"an endpoint named {taken} exists already" in response.content.decode()
    assert ModelEndpoint.objects.filter(name__in=("a-random", "shared-random")).count() == 2


def test_the_job_form_offers_the_shared_endpoints_and_the_researchers_own(w):
    page = w.client.get("/admin/inference/inferencejob/add/").content.decode()
    assert f'<option value="{w.shared.pk}">shared-random</option>' in page
    assert f'<option value="{w.own_a.pk}">a-random (proj-a)</option>' in page
    assert "b-secret-model" not in page
    # B's endpoint typed into the POST: refused, nothing created.
    form = {"endpoint": w.own_b.pk, "project": w.a.pk, "release": w.release_a.pk, "mode": "evaluate"}
    response = w.client.post("/admin/inference/inferencejob/add/", {**form, "temperature": "0", "strategy": "direct"})
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert InferenceJob.objects.count() == 0


def test_no_launch_path_runs_a_job_on_another_projects_endpoint(w):
    audit_before = AuditEvent.objects.count()
    with pytest.raises(services.JobRefused) as refused:
        services.job_create(endpoint=w.own_b, project=w.a, release=w.release_a)
    assert str(refused.value.messages[0]) == (
        "endpoint b-secret-model belongs to another project; pick a shared one or one of proj-a"
    )
    response = w.client.post(f"/api/projects/{w.a.slug}/jobs/", {"endpoint": "b-secret-model"}, "application/json")
    assert (response.status_code, response.json()) == (400, {"detail": "no usable endpoint named 'b-secret-model'"})
    with pytest.raises(CommandError) as command:
        call_command(
            "run_inference",
            "--endpoint",
            "b-secret-model",
            "--project",
            "proj-a",
            "--protocol",
            "status",
            stdout=StringIO(),
        )
    assert str(command.value) == "no endpoint named 'b-secret-model' is shared or belongs to project proj-a"
    assert (InferenceJob.objects.count(), AuditEvent.objects.count()) == (0, audit_before)

    # The project's own endpoint and a shared one: started, from the API.
    for name in ("a-random", "shared-random"):
        response = w.client.post(
            f"/api/projects/{w.a.slug}/jobs/", {"endpoint": name, "release": "v1"}, "application/json"
        )
        assert response.status_code == 201, response.content
    assert sorted(InferenceJob.objects.values_list("model_name", "project__slug")) == [
        ("a-random", "proj-a"),
        ("shared-random", "proj-a"),
    ]


def test_create_endpoint_makes_a_projects_endpoint_and_can_leave_an_existing_one(w):
    out = StringIO()
    call_command("create_endpoint", "--name", "cli-rnd", "--backend", "random", "--project", "proj-a", stdout=out)
    made = ModelEndpoint.objects.get(name="cli-rnd")
    assert made.project == w.a
    assert out.getvalue() == f"endpoint {made.pk} cli-rnd (random, of project proj-a) created\n"
    with pytest.raises(CommandError) as missing:
        call_command("create_endpoint", "--name", "x", "--backend", "random", "--project", "nope", stdout=StringIO())
    assert str(missing.value) == "no project 'nope'"
    with pytest.raises(CommandError) as taken:
        call_command(
            "create_endpoint", "--name", "cli-rnd", "--backend", "random", "--project", "proj-a", stdout=StringIO()
        )
    assert "an endpoint named cli-rnd exists already" in str(taken.value)

    again = StringIO()
    call_command(
        "create_endpoint",
        "--name",
        "shared-random",
        "--backend",
        "random",
        "--option",
        "seed=9",
        "--if-missing",
        stdout=again,
    )
    assert again.getvalue() == f"endpoint {w.shared.pk} shared-random exists; left as it is\n"
    assert ModelEndpoint.objects.get(pk=w.shared.pk).options == {}
    assert ModelEndpoint.objects.count() == 4
