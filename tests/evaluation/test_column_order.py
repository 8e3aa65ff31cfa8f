"""The M3-Verse main table's columns follow the paper's Table 2 in every rendering: the page, the API's
JSON and text formats, and the CSV / LaTeX / Markdown / JSON downloads.

Table 2 of the M3-Verse paper (../shared/seeds/004_*.txt) heads its columns
"Model Size Overall | Intra-state: Avg. S. U. T. U. A. R. Rs | Inter-state: Avg. S. U. T. U. A. R. Rs"
(S. U. spatial understanding, T. U. temporal understanding, A. R. attribute recognition, Rs
reasoning). Hallucination and factual, which Table 2 does not print, come after it."""

import csv
import io
import json
import re

import pytest
from django.http import HttpRequest

from annotation.models import Role
from inference.services import predictions_import

from .factories import make_release

pytestmark = pytest.mark.django_db

TABLE_2 = [
    "overall",
    "intra",
    "intra_spatial",
    "intra_temporal",
    "intra_attribute",
    "intra_reasoning",
    "inter",
    "inter_spatial",
    "inter_temporal",
    "inter_attribute",
    "inter_reasoning",
    "hallucination",
    "factual",
]
TABLE_2_NAMES = [
    "Overall",
    "Intra-state",
    "Intra-state · spatial",
    "Intra-state · temporal",
    "Intra-state · attribute",
    "Intra-state · reasoning",
    "Inter-state",
    "Inter-state · spatial",
    "Inter-state · temporal",
    "Inter-state · attribute",
    "Inter-state · reasoning",
    "Hallucination",
    "Factual",
]


@pytest.fixture
def m3_board(make_project, make_user, client):
    researcher = make_user("res")
    project = make_project("m3cols", "m3verse", members={researcher: Role.RESEARCHER})
    base = {
        "video_before": "b.mp4",
        "video_after": "a.mp4",
        "question": "What changed?",
        "options": ["cup", "lamp", "door", "none listed"],
    }
    release = make_release(
        project,
        {
            "q1": {
                **base,
                "answer": ["A"],
                "context": "intra",
                "capabilities": ["spatial", "reasoning"],
                "hallucination": False,
            },
            "q2": {
                **base,
                "answer": ["B"],
                "context": "inter",
                "capabilities": ["temporal", "attribute"],
                "hallucination": False,
            },
            "q3": {**base, "answer": ["D"], "context": "inter", "capabilities": ["spatial"], "hallucination": True},
        },
    )
    predictions_import(
        project=project,
        model_name="m",
        release=release,
        lines=[
            json.dumps({"item": "q1", "query": "qa", "answer": "A"}),
            json.dumps({"item": "q2", "query": "qa", "answer": "C"}),
            json.dumps({"item": "q3", "query": "qa", "answer": "D"}),
        ],
    )
    client.login(request=HttpRequest(), username="res", password="pw")
    return project


def test_the_main_table_and_every_download_follow_table_2(client, m3_board):
    # The page: the main table's metric headers, left to right.
    html = client.get("/projects/m3cols/leaderboard/").content.decode()
    panel = html.split('id="panel-main"', 1)[1].split("</section>", 1)[0]
    assert re.findall(r'<th class="sortable" data-type="num" data-key="([^"]+)"', panel) == TABLE_2
    assert [
        re.sub(r"\s+", " ", h) for h in re.findall(r'data-key="[^"]+" title="[^"]*"[^>]*>([^<]+)</th>', panel)
    ] == TABLE_2_NAMES
    # Each row's cells are in the same order (m: q1 right, q2 wrong, q3 right).
    row = panel.split('<tr data-model="m"', 1)[1].split("</tr>", 1)[0]
    values = re.findall(r'<td data-value="([^"]*)">', row)[3:]
    assert values == ["66.67", "100.0", "100.0", "", "", "100.0", "50.0", "100.0", "0.0", "0.0", "", "100.0", "50.0"]

    # The API: JSON metrics and intervals keyed in that order; the text formats likewise.
    for details in ("", "?details=1"):
        rows = client.get(f"/api/projects/m3cols/leaderboard/{details}").json()["rows"]
        assert [list(r["metrics"]) for r in rows] == [TABLE_2] * len(rows)
        assert [list(r["ci"]) for r in rows] == [TABLE_2] * len(rows)
    api_csv = client.get("/api/projects/m3cols/leaderboard/?fmt=csv").content.decode()
    assert next(csv.reader(io.StringIO(api_csv)))[4::6] == TABLE_2

    base = "/projects/m3cols/leaderboard/download"
    header = next(csv.reader(io.StringIO(client.get(f"{base}/csv/").content.decode())))
    assert header[:4] == ["model", "rank", "n", "parse_failures"]
    assert header[4:] == [
        c
        for k in TABLE_2
        for c in (k, f"{k}_ci_lo", f"{k}_ci_hi", f"{k}_se", f"{k}_se_clustered", f"{k}_design_effect")
    ]
    # LaTeX and Markdown, read by people, name the columns as the page does.
    latex = client.get(f"{base}/latex/").content.decode()
    latex_header = next(line for line in latex.splitlines() if line.startswith("Model & "))
    assert latex_header.removesuffix(r" \\").split(" & ")[4:] == TABLE_2_NAMES
    markdown = client.get(f"{base}/markdown/").content.decode().splitlines()[0]
    assert markdown.strip("| ").split(" | ")[4:] == TABLE_2_NAMES
    download = json.loads(client.get(f"{base}/json/").content)
    assert [list(r["metrics"]) for r in download["rows"]] == [TABLE_2] * len(download["rows"])
