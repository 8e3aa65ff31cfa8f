"""The served OpenAPI schema, fuzzed (schemathesis): no 5xx, and responses match the schema.

The app runs under pytest-django's live server against PostgreSQL with a seeded project; the
schema is the one /api/schema/ serves, and every operation is called as that project's
researcher (token). A bounded number of examples per operation keeps it near a minute.
Operations that would start background work (imports, a job's launch or retry) are left out.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Background work (a worker would import the upload, re-run the job): not for a fuzzer.
EXCLUDED_PATHS = (
    "/api/projects/{slug}/imports/",
    "/api/projects/{slug}/annotation-imports/",
    "/api/jobs/{pk}/retry-failed/",
    "/api/projects/{slug}/jobs/",
)


def _served_schema() -> dict:
    """What /api/schema/ serves: its view's generator and JSON renderer (collection runs before
    the test server exists; test_schema_is_the_served_one checks the two agree)."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    return json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))


schema = schemathesis.openapi.from_dict(_served_schema()).exclude(path=list(EXCLUDED_PATHS), method="POST")


@pytest.fixture
def researcher_call(live_server, make_user, make_project):
    """A seeded project and its researcher's token; where and as whom to call."""
    from rest_framework.authtoken.models import Token

    from annotation.models import Role
    from tests.evaluation.factories import make_release
    from tests.helpers.items import status_payload

    researcher = make_user("fuzz-res")
    project = make_project("fuzz", "status", members={researcher: Role.RESEARCHER})
    make_release(project, {f"it{i}": status_payload(i) for i in range(3)})
    token = Token.objects.create(user=researcher)
    return {"base_url": live_server.url, "headers": {"Authorization": f"Token {token.key}"}}


@schema.parametrize()
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_api_answers_within_its_schema(case, researcher_call):
    if case.path_parameters and "slug" in case.path_parameters:
        case.path_parameters["slug"] = "fuzz"  # the seeded project, so the operation gets past its 404
    case.call_and_validate(checks=[not_a_server_error, response_schema_conformance], **researcher_call)


def test_schema_is_the_served_one(client):
    served = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert served.status_code == 200
    assert served.json()["paths"] == _served_schema()["paths"]
