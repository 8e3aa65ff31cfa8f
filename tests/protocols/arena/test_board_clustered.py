"""The arena board's cluster-robust sandwich (votes clustered by prompt) against an independent
computation: Davidson's likelihood written out here per vote, maximised by scipy.optimize, its
Hessian and every prompt's score taken by central differences (no code shared with
protocols/kit/pairwise), read back through the leaderboard API as a researcher reads it."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import norm

from annotation.importing import annotations_import
from annotation.models import Role
from tests.helpers.clients import session_client

from .helpers import MODEL_NAMES, clips, make_pair

pytestmark = pytest.mark.django_db

ELO = 400 / math.log(10)
ALPHA, BETA, GAMMA = MODEL_NAMES
INDEX = {ALPHA: 0, BETA: 1, GAMMA: 2}


def _prompt_votes():
    """(prompt, model_a, model_b, winner) per vote: eight prompts, each leaning its own way (a prompt
    that suits beta gives beta most of its votes), so votes of one prompt move together."""
    rng = np.random.default_rng(7)
    out = []
    pairs = [(ALPHA, BETA), (BETA, GAMMA), (GAMMA, ALPHA)]
    for p in range(8):
        favourite = MODEL_NAMES[p % 3]
        for n in range(18):
            a, b = pairs[n % 3]
            if favourite == a:
                probs = [0.6, 0.2, 0.15, 0.05]
            elif favourite == b:
                probs = [0.2, 0.6, 0.15, 0.05]
            else:
                probs = [0.4, 0.35, 0.2, 0.05]
            out.append((f"prompt {p}", a, b, str(rng.choice(["a", "b", "tie", "both_bad"], p=probs))))
    return out


VOTES = _prompt_votes()


def _log_prob(x, a, b, winner):
    theta = np.array([0.0, x[0], x[1]])
    nu = math.exp(x[2])
    pa, pb = math.exp(theta[INDEX[a]]), math.exp(theta[INDEX[b]])
    den = pa + pb + nu * math.sqrt(pa * pb)
    if winner == "a":
        return math.log(pa / den)
    if winner == "b":
        return math.log(pb / den)
    return math.log(nu * math.sqrt(pa * pb) / den)  # tie and both bad alike


def independent_errors(votes):
    """(rating, se plain, se clustered by prompt) per model, centred Elo scale."""

    def loglik(x, subset=votes):
        return sum(_log_prob(x, a, b, w) for _p, a, b, w in subset)

    first = minimize(lambda x: -loglik(x), np.zeros(3), method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-12})
    x = minimize(lambda x: -loglik(x), first.x, method="BFGS", options={"gtol": 1e-10}).x

    def grad(f, h=1e-5):
        return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(3)])

    h = 1e-4
    hess = np.array(
        [
            [
                (
                    loglik(x + h * ei + h * ej)
                    - loglik(x + h * ei - h * ej)
                    - loglik(x - h * ei + h * ej)
                    + loglik(x - h * ei - h * ej)
                )
                / (4 * h * h)
                for ej in np.eye(3)
            ]
            for ei in np.eye(3)
        ]
    )
    bread = np.linalg.inv(-hess)
    per_vote = [grad(lambda y, v=v: _log_prob(y, *v[1:])) for v in votes]
    meat_plain = sum(np.outer(g, g) for g in per_vote)
    prompts = sorted({v[0] for v in votes})
    per_prompt = [sum(g for g, v in zip(per_vote, votes, strict=True) if v[0] == p) for p in prompts]
    c = len(prompts)
    meat_clustered = c / (c - 1) * sum(np.outer(g, g) for g in per_prompt)
    centre = ELO * (np.eye(3) - np.full((3, 3), 1 / 3))
    theta = np.array([0.0, x[0], x[1]])
    rating = 1000 + ELO * (theta - theta.mean())

    def se(meat):
        cov = np.zeros((3, 3))
        cov[1:, 1:] = (bread @ meat @ bread)[:2, :2]
        return np.sqrt(np.diag(centre @ cov @ centre.T))

    names = (ALPHA, BETA, GAMMA)
    return (
        dict(zip(names, rating, strict=True)),
        dict(zip(names, se(meat_plain), strict=True)),
        dict(zip(names, se(meat_clustered), strict=True)),
    )


@pytest.fixture
def project(settings, tmp_path, make_project, make_user):
    settings.MEDIA_ROOT = tmp_path / "media"
    researcher = make_user("researcher")
    project = make_project("clustered", "arena", members={researcher: Role.RESEARCHER}, annotations_per_item=1)
    media = clips(tmp_path)
    lines = []
    for n, (prompt, a, b, winner) in enumerate(VOTES):
        make_pair(project, f"c{n}", media, models=(a, b), prompt=prompt)
        lines.append({"item": f"c{n}", "rater": f"r{n % 5}", "winner": winner})
    path = tmp_path / "votes.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    assert annotations_import(project=project, path=path).created == len(VOTES)
    return project, researcher


def test_clustered_sandwich_matches_an_independent_computation(project):
    project, researcher = project
    rating, se_plain, se_clustered = independent_errors(VOTES)
    board = session_client(researcher).get(f"/api/projects/{project.slug}/leaderboard/?details=1").json()
    assert board["cluster_key"] == "prompt"
    assert board["pairwise"]["clusters"] == 8 and board["pairwise"]["interval_errors"] == "clustered"
    z = norm.ppf(0.975)
    for row in board["rows"]:
        m = row["model"]
        assert row["metrics"]["rating"] == pytest.approx(rating[m], abs=0.01)
        assert row["se"]["rating"] == pytest.approx(se_plain[m], abs=2e-3)
        assert row["se_clustered"]["rating"] == pytest.approx(se_clustered[m], abs=2e-3)
        assert row["design_effect"]["rating"] == pytest.approx((se_clustered[m] / se_plain[m]) ** 2, abs=2e-3)
        # The interval shown is the clustered one.
        lo, hi = row["ci"]["rating"]
        assert lo == pytest.approx(rating[m] - z * se_clustered[m], abs=0.02)
        assert hi == pytest.approx(rating[m] + z * se_clustered[m], abs=0.02)
    # The prompts lean: clustering must change the errors, or this test could not tell them apart.
    assert max(abs(se_clustered[m] / se_plain[m] - 1) for m in MODEL_NAMES) > 0.1


def test_one_vote_per_prompt_only_scales_by_c_over_c_minus_1(project):
    """Every vote its own cluster: the clustered meat is the plain one times C / (C − 1)."""
    from protocols.arena import scoring

    items = [
        type("I", (), {"key": n, "payload": {"prompt": f"p{n}", "model_a": a, "model_b": b}})
        for n, (_p, a, b, _w) in enumerate(VOTES)
    ]
    votes = {n: [("r", {"winner": w})] for n, (_p, _a, _b, w) in enumerate(VOTES)}
    found = scoring.vote_board(items, votes)
    c = len(VOTES)
    for row in found["rows"]:
        assert row["se_clustered"]["rating"] == pytest.approx(row["se"]["rating"] * math.sqrt(c / (c - 1)), abs=1e-3)
    plain = scoring.vote_board(items, votes, cluster_key=None)
    assert all(row["se_clustered"] == {} and row["se"] for row in plain["rows"])
    assert "clusters" not in plain["pairwise"]
