"""The arena board's multinomial bootstrap on request (?ci=bootstrap&rounds=N on the page and API,
--ci / --rounds on the command), its validation (a clear 400 naming the parameter) and its cache
key (a board asked with one interval is never served for another)."""

from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command

from annotation.importing import annotations_import
from annotation.models import Role
from tests.helpers.clients import session_client

from .helpers import MODEL_NAMES, clips, make_pair
from .test_board import VOTES, davidson_direct

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(settings, tmp_path, make_project, make_user):
    settings.MEDIA_ROOT = tmp_path / "media"
    researcher = make_user("researcher")
    project = make_project("boot", "arena", members={researcher: Role.RESEARCHER}, annotations_per_item=1)
    media = clips(tmp_path)
    lines = []
    n = 0
    for (a, b), outcomes in VOTES.items():
        for vote in outcomes:
            make_pair(project, f"v{n}", media, models=(a, b), prompt=f"prompt {n % 10}")
            lines.append({"item": f"v{n}", "rater": f"r{n % 4}", "winner": vote})
            n += 1
    path = tmp_path / "votes.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    annotations_import(project=project, path=path)
    return project, researcher


def _direct_bootstrap(rounds: int, seed: int):
    """The same multinomial bootstrap done here: per pair (models in name order, the pair's first
    model's wins, its losses, ties with both bad), the votes redrawn from the pair's outcome shares
    with the kit's documented draw (numpy's multinomial, ``default_rng(seed)``, all rounds at once),
    each round refitted by scipy (test_board.davidson_direct); percentile intervals."""
    words = ["a", "b", "tie", "both_bad"]
    counts = {}
    for (a, b), outcomes in VOTES.items():
        n = {w: outcomes.count(w) for w in words}
        first, second = sorted((a, b))
        won, lost = (n["a"], n["b"]) if first == a else (n["b"], n["a"])
        counts[(first, second)] = [won, lost, n["tie"] + n["both_bad"]]
    pairs = sorted(counts)
    table = np.array([counts[p] for p in pairs])
    totals = table.sum(axis=1)
    draws = np.random.default_rng(seed).multinomial(totals, table / totals[:, None], size=(rounds, len(pairs)))
    samples = {m: [] for m in MODEL_NAMES}
    for r in range(rounds):
        redrawn = {
            pair: ["a"] * int(w) + ["b"] * int(lo) + ["tie"] * int(t)
            for pair, (w, lo, t) in zip(pairs, draws[r], strict=True)
        }
        ratings, _ = davidson_direct(redrawn)
        for m in MODEL_NAMES:
            samples[m].append(ratings[m])
    return {m: np.quantile(samples[m], [0.025, 0.975]) for m in MODEL_NAMES}


def test_the_api_gives_the_bootstrap_on_request(project):
    project, researcher = project
    client = session_client(researcher)
    url = f"/api/projects/{project.slug}/leaderboard/?details=1"
    sandwich = client.get(url).json()
    boot = client.get(url + "&ci=bootstrap&rounds=100").json()
    assert sandwich["pairwise"]["method"] == "sandwich"
    assert boot["pairwise"]["method"] == "bootstrap"
    assert boot["pairwise"]["bootstrap"] == {"rounds": 100, "seed": 0, "unbounded_rounds": 0}
    # Same ratings, other intervals; the sandwich board is still served as a sandwich board (cache key).
    assert [r["metrics"] for r in boot["rows"]] == [r["metrics"] for r in sandwich["rows"]]
    assert [r["ci"] for r in boot["rows"]] != [r["ci"] for r in sandwich["rows"]]
    assert client.get(url).json()["pairwise"]["method"] == "sandwich"
    assert client.get(url + "&ci=bootstrap").json()["pairwise"]["bootstrap"]["rounds"] == 1000
    # The same draws refitted by an independent maximisation: the same percentile interval.
    direct = _direct_bootstrap(100, seed=0)
    for row in boot["rows"]:
        lo, hi = row["ci"]["rating"]
        assert lo == pytest.approx(direct[row["model"]][0], abs=0.02)
        assert hi == pytest.approx(direct[row["model"]][1], abs=0.02)
        assert lo < row["metrics"]["rating"] < hi


@pytest.mark.parametrize(
    "query, field, words",
    [
        ("ci=jackknife", "ci", "expected one of sandwich, bootstrap; got 'jackknife'"),
        ("ci=bootstrap&rounds=5", "rounds", "from 100 to 5000; got '5'"),
        ("ci=bootstrap&rounds=99999", "rounds", "from 100 to 5000; got '99999'"),
        ("ci=bootstrap&rounds=lots", "rounds", "whole number from 100 to 5000; got 'lots'"),
        ("rounds=300", "rounds", "rounds apply to ci=bootstrap only"),
    ],
)
def test_bad_interval_choices_are_a_400_naming_them(project, query, field, words):
    project, researcher = project
    client = session_client(researcher)
    r = client.get(f"/api/projects/{project.slug}/leaderboard/?{query}")
    assert r.status_code == 400
    assert words in r.json()[field][0]
    page = client.get(f"/projects/{project.slug}/leaderboard/?{query}")
    assert page.status_code == 400 and words.replace("'", "") in page.content.decode().replace("'", "")


def test_only_a_votes_board_takes_ci(make_project, make_user):
    researcher = make_user("researcher")
    other = make_project("osc-ci", "oscbench", members={researcher: Role.RESEARCHER})
    r = session_client(researcher).get(f"/api/projects/{other.slug}/leaderboard/?ci=bootstrap")
    assert r.status_code == 400 and "only a board rated from pairwise votes" in r.json()["ci"][0]


def test_the_page_says_which_interval(project):
    project, researcher = project
    client = session_client(researcher)
    html = client.get(f"/projects/{project.slug}/leaderboard/").content.decode()
    assert "cluster-robust sandwich interval" in html and "(10 clusters)" in html
    assert 'id="lb-ci"' in html
    html = client.get(f"/projects/{project.slug}/leaderboard/?ci=bootstrap&rounds=150").content.decode()
    assert "multinomial bootstrap interval (150 rounds" in html and 'id="lb-rounds"' in html


def test_the_command_takes_ci_and_rounds(project):
    project, _ = project
    out = StringIO()
    call_command("leaderboard", project.slug, "--details", "--ci", "bootstrap", "--rounds", "120", stdout=out)
    board = json.loads(out.getvalue())
    assert board["pairwise"]["method"] == "bootstrap" and board["pairwise"]["bootstrap"]["rounds"] == 120
    with pytest.raises(CommandError, match="rounds: expected a whole number from 100 to 5000; got '7'"):
        call_command("leaderboard", project.slug, "--ci", "bootstrap", "--rounds", "7", stdout=StringIO())
