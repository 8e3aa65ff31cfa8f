"""Leaderboard / correlation pages, downloads and API: content and role checks."""
import json

import pytest

from annotation.models import Role

from .factories import make_release
from .test_commands import status_payload

pytestmark = pytest.mark.django_db


@pytest.fixture
def status_project(make_project, make_user):
    researcher, annotator = make_user("res"), make_user("ann")
    project = make_project("stv", "status", members={researcher: Role.RESEARCHER, annotator: Role.ANNOTATOR})
    make_release(project, {f"it{i}": status_payload(i) for i in range(3)})
    return project


def test_researcher_sees_leaderboard_with_random_row(client, status_project):
    client.login(username="res", password="pw")
    page = client.get("/projects/stv/leaderboard/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-model="Random"' in html and "acc_osi" in html and "<svg" in html
    assert "category · positional" in html  # a breakdown tab
    assert '<tr class="lb-chance"><td>Chance</td><td></td><td></td><td></td><td>50.00</td>' in html
    assert "<td>1.56</td></tr></tfoot>" in html
    assert 'id="lb-diagnostics"' in html  # Random's same-letter share


def test_downloads_have_attachment_names_and_content(client, status_project):
    client.login(username="res", password="pw")
    csv_resp = client.get("/projects/stv/leaderboard/download/csv/")
    assert csv_resp["Content-Disposition"] == 'attachment; filename="stv-leaderboard-v1.csv"'
    assert csv_resp.content.decode().startswith("model,rank,n,parse_failures,acc_osi")
    svg = client.get("/projects/stv/leaderboard/download/svg/?metric=oa")
    assert svg["Content-Type"].startswith("image/svg+xml") and b"<svg" in svg.content
    assert client.get("/projects/stv/leaderboard/download/exe/").status_code == 404
    api = client.get("/api/projects/stv/leaderboard/")
    assert api.status_code == 200 and api.json()["rows"][0]["model"] == "Random"
    assert json.loads(client.get("/projects/stv/leaderboard/download/json/").content)["protocol"] == "status"


def test_annotators_and_strangers_are_refused(client, status_project, make_user):
    client.login(username="ann", password="pw")
    assert client.get("/projects/stv/leaderboard/").status_code == 403
    assert client.get("/api/projects/stv/leaderboard/").status_code == 403
    make_user("stranger")
    client.login(username="stranger", password="pw")
    assert client.get("/projects/stv/leaderboard/").status_code == 404
    client.logout()
    assert client.get("/projects/stv/leaderboard/").status_code == 302


def test_correlation_page_is_for_rating_projects(client, status_project):
    client.login(username="res", password="pw")
    assert client.get("/projects/stv/correlation/").status_code == 404
