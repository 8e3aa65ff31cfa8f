"""The arena board against an independent computation: Davidson's likelihood maximised directly
by scipy.optimize (no code shared with protocols/kit/pairwise), on votes imported into a project
and read back through the leaderboard API as a researcher reads it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.optimize import minimize

from annotation.importing import annotations_import
from annotation.models import Role
from evaluation import leaderboard
from protocols.arena import scoring
from tests.helpers.clients import session_client

from .helpers import MODEL_NAMES, clips, make_pair

pytestmark = pytest.mark.django_db

ELO = 400 / math.log(10)
# (model_a, model_b) -> votes (winner in the item's terms): three models, every pair met, ties
# and "both bad" in the mix, alpha clearly best, beta and gamma close.
ALPHA, BETA, GAMMA = MODEL_NAMES
VOTES = {
    (ALPHA, BETA): ["a"] * 27 + ["b"] * 6 + ["tie"] * 5 + ["both_bad"] * 2,
    (GAMMA, ALPHA): ["a"] * 5 + ["b"] * 28 + ["tie"] * 3 + ["both_bad"] * 4,
    (BETA, GAMMA): ["a"] * 16 + ["b"] * 14 + ["tie"] * 8,
}


def davidson_direct(votes):
    """Ratings (centred Elo, mean 1000) and nu by minimising Davidson's negative log-likelihood
    over (log-strength of beta and gamma with alpha's fixed at 0, log nu) with Nelder–Mead, then
    polishing with BFGS: P(i beats j) = p_i / (p_i + p_j + nu sqrt(p_i p_j)), P(tie) = nu sqrt(p_i
    p_j) / (same). "both bad" counts as a tie."""
    index = {ALPHA: 0, BETA: 1, GAMMA: 2}
    rows = []
    for (a, b), outcomes in votes.items():
        w = outcomes.count("a")
        lo = outcomes.count("b")
        t = outcomes.count("tie") + outcomes.count("both_bad")
        rows.append((index[a], index[b], w, lo, t))

    def nll(x):
        theta = np.array([0.0, x[0], x[1]])
        nu = math.exp(x[2])
        total = 0.0
        for i, j, w, lo, t in rows:
            pi, pj = math.exp(theta[i]), math.exp(theta[j])
            den = pi + pj + nu * math.sqrt(pi * pj)
            total -= w * math.log(pi / den) + lo * math.log(pj / den) + t * math.log(nu * math.sqrt(pi * pj) / den)
        return total

    first = minimize(nll, np.zeros(3), method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12, "maxiter": 20000})
    best = minimize(nll, first.x, method="BFGS", options={"gtol": 1e-10})
    theta = np.array([0.0, best.x[0], best.x[1]])
    ratings = 1000 + ELO * (theta - theta.mean())
    return dict(zip((ALPHA, BETA, GAMMA), ratings, strict=True)), math.exp(best.x[2])


@pytest.fixture
def project(settings, tmp_path, make_project, make_user):
    settings.MEDIA_ROOT = tmp_path / "media"
    researcher = make_user("researcher")
    project = make_project("board", "arena", members={researcher: Role.RESEARCHER}, annotations_per_item=1)
    media = clips(tmp_path)
    lines = []
    n = 0
    for (a, b), outcomes in VOTES.items():
        for vote in outcomes:
            # One item per vote; half of them with the models the other way round (b then a),
            # the vote swapped with them: the same battle, so the same ratings.
            swap = n % 2 == 1
            models = (b, a) if swap else (a, b)
            make_pair(project, f"v{n}", media, models=models)
            winner = {"a": "b", "b": "a"}.get(vote, vote) if swap else vote
            lines.append({"item": f"v{n}", "rater": f"r{n % 4}", "winner": winner})
            n += 1
    path = tmp_path / "votes.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    assert annotations_import(project=project, path=path).created == n
    return project, researcher


def test_ratings_match_a_direct_maximisation_of_davidsons_likelihood(project):
    project, researcher = project
    expected, nu = davidson_direct(VOTES)
    r = session_client(researcher).get(f"/api/projects/{project.slug}/leaderboard/")
    assert r.status_code == 200, r.content
    rows = r.json()["rows"]
    assert [row["model"] for row in rows] == [ALPHA, BETA, GAMMA]  # by rating
    for row in rows:
        assert row["metrics"]["rating"] == pytest.approx(expected[row["model"]], abs=0.01)
    assert sum(row["metrics"]["rating"] for row in rows) == pytest.approx(3000, abs=0.02)
    # Battles, win rates (ties and both bad as half a win) and both bad, per model, counted here.
    battles = {m: sum(len(v) for pair, v in VOTES.items() if m in pair) for m in MODEL_NAMES}
    score = {m: 0.0 for m in MODEL_NAMES}
    both_bad = {m: 0 for m in MODEL_NAMES}
    for (a, b), outcomes in VOTES.items():
        for vote in outcomes:
            score[a] += {"a": 1, "b": 0}.get(vote, 0.5)
            score[b] += {"a": 0, "b": 1}.get(vote, 0.5)
            if vote == "both_bad":
                both_bad[a] += 1
                both_bad[b] += 1
    for row in rows:
        m = row["model"]
        assert row["metrics"]["battles"] == battles[m]
        assert row["metrics"]["win_rate"] == round(score[m] / battles[m], 4)
        assert row["metrics"]["both_bad"] == both_bad[m]
        lo, hi = row["ci"]["rating"]
        assert lo < row["metrics"]["rating"] < hi
    # Rank by overlap: alpha's interval lies above the others'; beta and gamma overlap and share a rank.
    detailed = session_client(researcher).get(f"/api/projects/{project.slug}/leaderboard/?details=1").json()
    ranks = {row["model"]: row["rank"] for row in detailed["rows"]}
    cis = {row["model"]: row["ci"]["rating"] for row in detailed["rows"]}
    assert cis[ALPHA][0] > max(cis[BETA][1], cis[GAMMA][1])
    assert cis[BETA][0] < cis[GAMMA][1]
    assert ranks == {m: 1 + sum(cis[o][0] > cis[m][1] for o in MODEL_NAMES if o != m) for m in MODEL_NAMES}
    assert ranks == {ALPHA: 1, BETA: 2, GAMMA: 2}
    assert detailed["pairwise"]["tie"]["nu"] == pytest.approx(nu, abs=1e-3)
    assert detailed["pairwise"]["method"] == "sandwich"


def test_the_board_rates_each_criterion_voted_on_apart(project):
    project, _ = project
    # The same votes as the state-change votes of fresh items: the breakdown equals the headline.
    board = leaderboard.build(project)
    assert all(row["breakdowns"] == {} for row in board["rows"])
    items = [type("I", (), {"key": i, "payload": {"model_a": a, "model_b": b}}) for i, (a, b) in enumerate(VOTES)]
    votes = {
        i: [("r", {"winner": "tie", "criteria": {"state_change": v}}) for v in VOTES[pair]]
        for i, pair in enumerate(VOTES)
    }
    found = scoring.vote_board(items, votes)
    expected, _ = davidson_direct(VOTES)
    for row in found["rows"]:
        assert row["breakdowns"]["criterion:state_change:rating"]["value"] == pytest.approx(
            expected[row["model"]], abs=0.01
        )


def test_a_board_without_a_finite_fit_says_why(settings, tmp_path, make_project):
    settings.MEDIA_ROOT = tmp_path / "media"
    project = make_project("oneway", "arena", annotations_per_item=1)
    make_pair(project, "only", clips(tmp_path))
    path = tmp_path / "v.jsonl"
    path.write_text(json.dumps({"item": "only", "rater": "r", "winner": "a"}) + "\n", encoding="utf-8")
    annotations_import(project=project, path=path)
    board = leaderboard.build(project)
    assert [row["metrics"]["rating"] for row in board["rows"]] == [None, None]
    assert [row["metrics"]["battles"] for row in board["rows"]] == [1, 1]
    assert board["notes"] == [
        f"no ratings: model {ALPHA!r} never lost to or tied with another model: its rating "
        "has no finite maximum-likelihood value (more votes are needed)"
    ]
    empty = make_project("empty", "arena")
    assert leaderboard.build(empty)["rows"] == []


def test_the_board_says_how_many_votes_would_flip_the_top_model(project):
    """The kit's flip search (protocols/kit/pairwise/flip.py) runs on the board's headline fit: the
    count is in the figures and in the board's notes, and changing that many votes (as it lists)
    does lift the challenger above the top model."""
    items = [type("I", (), {"key": i, "payload": {"model_a": a, "model_b": b}}) for i, (a, b) in enumerate(VOTES)]
    votes = {i: [("r", {"winner": v}) for v in VOTES[pair]] for i, pair in enumerate(VOTES)}
    found = scoring.vote_board(items, votes)
    flip = found["pairwise"]["flip"]
    assert flip["votes"] >= 1 and flip["top"] != flip["challenger"]
    assert f"{flip['votes']} vote" in " ".join(found["notes"]) and flip["challenger"] in " ".join(found["notes"])
    assert sum(change["votes"] for change in flip["changes"]) == flip["votes"]
