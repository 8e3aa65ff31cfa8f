"""The hot annotator endpoints: what they cost in queries, and that the shortcuts keep the rules.

The token is checked with one statement written once per process (annotation.permissions.
TokenAuthentication) and the caller's role is read along with the project
(annotation.permissions.get_project_for / get_task_project_for); answers and statuses stay DRF's
and require_role's.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from annotation.models import Membership, Task
from tests.annotation.work_factories import make_item, make_people, valid_result
from tests.helpers.clients import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def setup(make_project):
    a, reviewer, outsider = make_people(3)
    project = make_project("boxes", "changeit", members={a: "annotator", reviewer: "reviewer"}, annotations_per_item=2)
    make_project("other", "changeit", members={outsider: "annotator"})
    return project, a, reviewer, outsider


def data_queries(captured) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]


def test_claim_and_submit_read_token_and_project_with_role_in_one_query_each(setup):
    project, a, _reviewer, _outsider = setup
    make_item(project)
    client = token_client(a)
    with CaptureQueriesContext(connection) as claim:
        r = client.post("/api/projects/boxes/tasks/next/", {}, format="json")
    assert r.status_code == 200
    task_id = r.json()["task"]
    with CaptureQueriesContext(connection) as submit:
        r = client.post(f"/api/tasks/{task_id}/submit/", {"result": valid_result("box")}, format="json")
    assert r.status_code == 201
    for captured in (claim, submit):
        # Token, project and role go through fixed statements outside Django's query log (as the
        # queue's own statements do); no ORM query for the token, the project or the membership.
        sqls = data_queries(captured)
        assert not any(
            t in s for s in sqls for t in ("authtoken_token", "annotation_membership", "annotation_project")
        ), sqls


def test_token_errors_are_drfs(setup):
    _project, a, _reviewer, _outsider = setup
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token nope")
    r = client.post("/api/projects/boxes/tasks/next/", {}, format="json")
    # 401 with WWW-Authenticate: Token (annotation.permissions.TokenRefused), though session
    # authentication comes first and would make DRF answer 403.
    assert r.status_code == 401 and r.json() == {"detail": "Invalid token."} and r["WWW-Authenticate"] == "Token"
    client = token_client(a)
    a.is_active = False
    a.save()
    r = client.post("/api/projects/boxes/tasks/next/", {}, format="json")
    assert r.status_code == 401 and r.json() == {"detail": "User inactive or deleted."}


def test_roles_still_decide_404_and_403(setup):
    project, a, reviewer, outsider = setup
    make_item(project)
    assert token_client(outsider).post("/api/projects/boxes/tasks/next/", {}, format="json").status_code == 404
    assert token_client(a).post("/api/projects/nowhere/tasks/next/", {}, format="json").status_code == 404
    task_id = token_client(a).post("/api/projects/boxes/tasks/next/", {}, format="json").json()["task"]
    # Someone else's task is not revealed; a member who lost the role gets 404 as well.
    for user in (outsider, reviewer):
        r = token_client(user).post(f"/api/tasks/{task_id}/submit/", {"result": valid_result("box")}, format="json")
        assert r.status_code == 404
    Membership.objects.filter(user=a).delete()
    r = token_client(a).post(f"/api/tasks/{task_id}/submit/", {"result": valid_result("box")}, format="json")
    assert r.status_code == 404
    Membership.objects.create(project=project, user=a, role="annotator")
    r = token_client(a).post(f"/api/tasks/{task_id}/submit/", {"result": valid_result("box")}, format="json")
    assert r.status_code == 201 and Task.objects.get(pk=task_id).status == "submitted"


def test_task_ids_beyond_bigint_are_404(setup):
    _project, a, _reviewer, _outsider = setup
    r = token_client(a).post(f"/api/tasks/{2**70}/submit/", {"result": valid_result("box")}, format="json")
    assert r.status_code == 404


def test_role_too_low_is_403_and_superuser_passes(setup, django_user_model):
    project, a, reviewer, _outsider = setup
    make_item(project)
    assert token_client(a).get("/api/projects/boxes/review/").status_code == 403
    assert token_client(reviewer).get("/api/projects/boxes/review/").status_code == 200
    boss = django_user_model.objects.create_superuser("boss", "boss@example.org", "x")
    assert token_client(boss).post("/api/projects/boxes/tasks/next/", {}, format="json").status_code == 200
