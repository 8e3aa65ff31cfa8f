"""Download names come from query values; they never inject header parameters or break the
response (once metric=%00 was a 500, metric=a";x=" added a Content-Disposition parameter)."""

import pytest

from annotation.models import Role
from tests.helpers.items import status_payload

from .factories import make_release

pytestmark = pytest.mark.django_db


@pytest.fixture
def researcher_client(client, make_project, make_user):
    researcher = make_user("res")
    project = make_project("stv", "status", members={researcher: Role.RESEARCHER})
    make_release(project, {f"it{i}": status_payload(i) for i in range(3)})
    client.force_login(researcher)
    return client


def test_a_nul_metric_is_refused_400_with_a_message(researcher_client):
    # NUL bytes are refused in every query string (annotation/input_limits.py), before the view.
    response = researcher_client.get("/projects/stv/leaderboard/download/svg/?metric=%00")
    assert response.status_code == 400
    assert response.content.decode().startswith("query parameter 'metric' contains a NUL byte")


@pytest.mark.parametrize("metric", ['a";x="', "a%0d%0aSet-Cookie:x=1", "..%2f..%2fetc", "é€"])
def test_odd_metric_values_give_a_plain_attachment_name(researcher_client, metric):
    response = researcher_client.get(f"/projects/stv/leaderboard/download/svg/?metric={metric}")
    assert response.status_code == 200
    disposition = response["Content-Disposition"]
    assert disposition.count('"') == 2 and disposition.count(";") == 1 and "\\r" not in disposition
    name = disposition.split('filename="')[1].rstrip('"')
    assert name.startswith("stv-leaderboard-v1") and name.endswith(".svg")
    assert all(ch.isalnum() or ch in "._-" for ch in name)


def test_odd_judge_and_criterion_values_on_correlation_downloads_are_never_a_server_error(researcher_client):
    response = researcher_client.get("/projects/stv/correlation/download/svg/?judge=%00&criterion=a%22;x=%22")
    assert 400 <= response.status_code < 500
