"""Leaderboard / correlation pages, downloads and API: content and role checks."""

import json

import pytest
from django.http import HttpRequest

from annotation.models import Role
from tests.helpers.items import status_payload

from .factories import make_release

pytestmark = pytest.mark.django_db


@pytest.fixture
def status_project(make_project, make_user):
    researcher, annotator = make_user("res"), make_user("ann")
    project = make_project("stv", "status", members={researcher: Role.RESEARCHER, annotator: Role.ANNOTATOR})
    make_release(project, {f"it{i}": status_payload(i) for i in range(3)})
    return project


def test_researcher_sees_leaderboard_with_random_row(client, status_project):
    client.login(request=HttpRequest(), username="res", password="pw")
    page = client.get("/projects/stv/leaderboard/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-model="Random"' in html and "acc_osi" in html and "<svg" in html
    assert "category · positional" in html  # a breakdown tab
    assert (
        '<tr class="lb-chance"><td title="the expected score of guessing">Chance</td>'
        "<td></td><td></td><td></td><td>50.00</td>" in html
    )
    assert "<td>1.56</td></tr></tfoot>" in html
    assert 'id="lb-diagnostics"' in html  # Random's same-letter share


def test_downloads_have_attachment_names_and_content(client, status_project):
    client.login(request=HttpRequest(), username="res", password="pw")
    csv_resp = client.get("/projects/stv/leaderboard/download/csv/")
    assert csv_resp["Content-Disposition"] == 'attachment; filename="stv-leaderboard-v1.csv"'
    assert csv_resp.content.decode().startswith("model,rank,n,parse_failures,acc_osi")
    svg = client.get("/projects/stv/leaderboard/download/svg/?metric=oa")
    assert svg["Content-Type"].startswith("image/svg+xml") and b"<svg" in svg.content
    assert client.get("/projects/stv/leaderboard/download/exe/").status_code == 404
    api = client.get("/api/projects/stv/leaderboard/")
    assert api.status_code == 200 and api.json()["rows"][0]["model"] == "Random"
    assert list(api.json()["rows"][0]) == [
        "model",
        "n",
        "parse_failures",
        "metrics",
        "ci",
        "se",
        "se_clustered",
        "design_effect",
    ]
    assert (
        api.json()["rows"][0]["metrics"]
        == client.get("/api/projects/stv/leaderboard/?details=1").json()["rows"][0]["metrics"]
    )
    assert "rank" in client.get("/api/projects/stv/leaderboard/?details=1").json()["rows"][0]
    assert json.loads(client.get("/projects/stv/leaderboard/download/json/").content)["protocol"] == "status"
    tab = client.get("/projects/stv/leaderboard/download/markdown/?breakdown=difference:slight")
    assert tab["Content-Disposition"] == 'attachment; filename="stv-leaderboard-v1-difference-slight.md"'
    lines = tab.content.decode().splitlines()
    assert lines[2].startswith("| Random | 1 | 3 | 0 | ") and " [" in lines[2]
    assert lines[-1].endswith("| 25.00 | 1.56 |")
    assert client.get("/projects/stv/leaderboard/download/csv/?breakdown=nope").status_code == 404


def test_annotators_and_strangers_are_refused(client, status_project, make_user):
    client.login(request=HttpRequest(), username="ann", password="pw")
    assert client.get("/projects/stv/leaderboard/").status_code == 403
    assert client.get("/api/projects/stv/leaderboard/").status_code == 403
    make_user("stranger")
    client.login(request=HttpRequest(), username="stranger", password="pw")
    assert client.get("/projects/stv/leaderboard/").status_code == 404
    client.logout()
    assert client.get("/projects/stv/leaderboard/").status_code == 302


def test_correlation_page_is_for_rating_projects(client, status_project):
    client.login(request=HttpRequest(), username="res", password="pw")
    assert client.get("/projects/stv/correlation/").status_code == 404


def test_correlation_page_scatter_and_api(client, make_project, make_user, tmp_path):
    from inference.services import predictions_import
    from protocols.oscbench import CRITERIA
    from tests.helpers.items import osc_payload

    from .factories import rate

    researcher = make_user("res9")
    project = make_project("oscv", "oscbench", members={researcher: Role.RESEARCHER})
    make_release(project, {f"g{i}": osc_payload("gen", i, "regular") for i in range(4)})
    for i, level in enumerate([1, 3, 4, 5]):
        for rater in ("r1", "r2"):
            rate(f"g{i}", project, rater, {c: level for c in CRITERIA})
    lines = [
        json.dumps({"item": f"g{i}", "query": "judge", "answer": {c: lv for c in CRITERIA}})
        for i, lv in enumerate([2, 3, 3, 5])
    ]
    predictions_import(project=project, lines=lines, model_name="j1", release=project.releases.get())
    client.login(request=HttpRequest(), username="res9", password="pw")
    html = client.get("/projects/oscv/correlation/").content.decode()
    assert 'data-model="j1"' in html and "Krippendorff" in html
    scatter = client.get("/projects/oscv/correlation/download/svg/?judge=j1&criterion=object")
    assert scatter["Content-Disposition"] == 'attachment; filename="oscv-correlation-j1-object.svg"'
    assert scatter.content.decode().count('class="point"') == 4
    assert client.get("/projects/oscv/correlation/download/svg/?judge=j1&criterion=nope").status_code == 404
    heat = client.get("/projects/oscv/correlation/download/svg/").content.decode()
    assert heat.count('class="cell"') == 8
    api = client.get("/api/projects/oscv/correlation/").json()
    assert api["judges"][0]["judge"] == "j1" and api["human"]["object"]["krippendorff_alpha"] == 1.0
    latex = client.get("/projects/oscv/correlation/download/latex/").content.decode()
    assert r"\begin{tabular}" in latex and "j1 &" in latex
    board = client.get("/api/projects/oscv/leaderboard/?judge=j1").json()
    assert board["rows"][0]["model"] == "gen" and board["rows"][0]["metrics"]["object"] == 0.563  # (1 + 2 + 2 + 4) / 16
