"""The judges report of a pairwise project (evaluation/judges.py) through its API and page, as a
researcher reads it: judge predictions imported as an MLLM judge's two asks per pair, human votes
as annotations, every figure worked out by hand below."""

from __future__ import annotations

import json

import pytest
from scipy import stats as sps

from annotation.models import Annotation, Role
from inference.services import predictions_import
from protocols.oscbench import CRITERIA
from tests.evaluation.factories import make_release, rate
from tests.helpers.clients import session_client
from tests.inference.factories import release_of
from tests.protocols.arena.helpers import MODEL_NAMES, clips, make_pair

pytestmark = pytest.mark.django_db

ALPHA, BETA, GAMMA = MODEL_NAMES
PAIRS = [(ALPHA, BETA), (BETA, GAMMA), (GAMMA, ALPHA)]
# Three raters' votes per pair (item terms) and the majority they make.
VOTES = [
    ["a", "a", "b"],  # p0: a
    ["b", "b", "b"],  # p1: b
    ["tie", "tie", "a"],  # p2: tie
    ["a", "b", "tie"],  # p3: no majority
    ["a", "a", "a"],  # p4: a
    ["both_bad", "both_bad", "a"],  # p5: both bad
    ["a", "a", "tie"],  # p6: a (never judged)
    ["a", "b", "a"],  # p7: a (never judged)
    ["b", "b", "a"],  # p8: b (never judged)
]
# The judge's letters per pair: (a shown first, b shown first); A = first shown better, B = second.
RUN_1 = {
    "p0": ("A", "B"),  # a, a -> a (right)
    "p1": ("A", "A"),  # a, b -> inconsistent: tie (wrong: humans say b)
    "p2": ("C", "C"),  # tie (right)
    "p3": ("A", "B"),  # a (no majority)
    "p4": ("B", "A"),  # b, b -> b (wrong: humans say a)
    "p5": ("D", "D"),  # both bad (right)
}
RUN_2 = {**RUN_1, "p1": ("B", "A")}  # p1: b, b -> b


def _import_run(project, release, name, letters):
    lines = [
        json.dumps({"item": item, "query": query, "answer": letter})
        for item, pair in letters.items()
        for query, letter in zip(("judge_ab", "judge_ba"), pair, strict=True)
    ]
    return predictions_import(project=project, lines=lines, model_name=name, release=release)


@pytest.fixture
def arena(settings, tmp_path, make_project, make_user):
    settings.MEDIA_ROOT = tmp_path / "media"
    researcher = make_user("researcher")
    project = make_project("arena-j", "arena", members={researcher: Role.RESEARCHER})
    media = clips(tmp_path)
    items = [make_pair(project, f"p{i}", media, models=PAIRS[i % 3]) for i in range(len(VOTES))]
    for item, votes in zip(items, VOTES, strict=True):
        for r, winner in enumerate(votes):
            Annotation.objects.create(item=item, external_rater=f"r{r}", result={"winner": winner}, source="import")
    release = release_of(project, items)
    return project, release, researcher


def _report(client, project, query=""):
    r = client.get(f"/api/projects/{project.slug}/judges/{query}")
    assert r.status_code == 200, r.content
    return r.json()


def test_one_run_against_the_human_majority(arena):
    project, release, researcher = arena
    job = _import_run(project, release, "judge-x", RUN_1)
    found = _report(session_client(researcher), project, "?release=v1")
    assert (found["items"], found["with_majority"]) == (9, 8)
    [judge] = found["judges"]
    assert (judge["judge"], judge["k"], judge["jobs"], judge["stability"]) == ("judge-x", 1, [job.pk], None)
    # Both asks answered on all six judged pairs; p1 alone changes its verdict with the order.
    assert judge["swap_consistency"] == {"rate": 5 / 6, "consistent": 5, "n": 6}
    # Asks picking a side: p0 (first, second), p1 (first, first), p3 (first, second), p4 (second,
    # first): 5 of 8 picked the output shown first.
    assert (judge["position_bias"]["first"], judge["position_bias"]["n"]) == (5, 8)
    assert judge["position_bias"]["p"] == pytest.approx(sps.binomtest(5, 8).pvalue)
    agreement = judge["agreement"]
    # Non-tie majorities the judge gave a verdict on: p0 (right), p1 (tie: wrong), p4 (wrong).
    assert (agreement["correct"], agreement["n_accuracy"]) == (1, 3)
    assert agreement["accuracy"] == pytest.approx(1 / 3)
    # kappa over p0, p1, p2, p4, p5: judge a, tie, tie, b, both bad; humans a, b, tie, a, both bad.
    # p_o = 3/5; p_e = (a 1*2 + tie 2*1 + b 1*1 + both bad 1*1) / 25 = 6/25.
    assert agreement["n_kappa"] == 5
    assert agreement["kappa"] == pytest.approx((3 / 5 - 6 / 25) / (1 - 6 / 25))
    assert agreement["disagreements"] == 2
    rows = {d["external_id"]: d for d in found["disagreements"]}
    assert set(rows) == {"p1", "p4"}
    assert rows["p1"]["human"] == "b" and rows["p1"]["judge_verdict"] == "tie"
    assert rows["p1"]["votes"] == {"b": 3}
    assert rows["p1"]["asks"] == {"judge_ab": "a", "judge_ba": "b"}
    assert (rows["p4"]["model_a"], rows["p4"]["model_b"]) == PAIRS[4 % 3]


def test_k_runs_give_a_median_verdict_and_stability(arena):
    project, release, researcher = arena
    _import_run(project, release, "judge-x", RUN_1)
    _import_run(project, release, "judge-x", RUN_2)
    [judge] = _report(session_client(researcher), project, "?release=v1")["judges"]
    assert judge["k"] == 2 and len(judge["runs"]) == 2
    # Pooled: 5 of 6 and 6 of 6 consistent.
    assert judge["swap_consistency"]["consistent"] == 11 and judge["swap_consistency"]["n"] == 12
    # p1: tie (0) and b (-1): median -0.5 -> b, now right; p4 still wrong.
    assert judge["agreement"]["accuracy"] == pytest.approx(2 / 3)
    # Per-pair variance: p1 1/4, the rest 0 -> mean 1/24; 5 of 6 pairs judged alike in both runs.
    assert judge["stability"]["n"] == 6
    assert judge["stability"]["mean_variance"] == pytest.approx(1 / 24)
    assert judge["stability"]["consistency_rate"] == pytest.approx(5 / 6)
    assert [run["agreement"]["accuracy"] for run in judge["runs"]] == pytest.approx([1 / 3, 2 / 3])


def test_an_unreadable_reply_leaves_one_ask(arena):
    project, release, researcher = arena
    _import_run(project, release, "judge-y", {"p0": ("maybe", "A"), "p1": ("B", "A")})
    [judge] = _report(session_client(researcher), project, "?release=v1")["judges"]
    # p0: only the b-first ask reads (A: b better) -> b, wrong; p1: b, b -> right.
    assert judge["swap_consistency"] == {"rate": 1.0, "consistent": 1, "n": 1}
    assert (judge["agreement"]["correct"], judge["agreement"]["n_accuracy"]) == (1, 2)


def test_the_arena_ranking_against_a_likert_board(arena, make_project):
    project, release, researcher = arena
    osc = make_project("osc-j", "oscbench", members={researcher: Role.RESEARCHER})
    base = {"video": "v.mp4", "scenario": "regular", "action": "slice", "action_category": "cutting"}
    base |= {"object": "bread", "object_category": "food"}
    payloads = {f"o{i}-{m}": {**base, "prompt": f"slice {i}", "generator": m} for i in range(2) for m in MODEL_NAMES}
    make_release(osc, payloads)
    level = {ALPHA: 3, BETA: 5, GAMMA: 4}
    for ext, payload in payloads.items():
        for r in range(2):
            rate(ext, osc, f"r{r}", {c: level[payload["generator"]] for c in CRITERIA})
    client = session_client(researcher)
    found = _report(client, project, f"?release=v1&likert={osc.slug}")["ranking_comparison"]
    # Independently: both boards as the leaderboard API gives them, tau-b by scipy.
    arena_rows = client.get(f"/api/projects/{project.slug}/leaderboard/?release=v1").json()["rows"]
    osc_rows = client.get(f"/api/projects/{osc.slug}/leaderboard/").json()["rows"]
    rating = {r["model"]: r["metrics"]["rating"] for r in arena_rows}
    likert = {r["model"]: r["metrics"]["state_change"] for r in osc_rows if r["model"] in rating}
    assert set(likert) == set(MODEL_NAMES) and found["n"] == 3 and found["metric"] == "state_change"
    expected = sps.kendalltau([rating[m] for m in MODEL_NAMES], [likert[m] for m in MODEL_NAMES]).statistic
    assert found["kendall_tau_b"] == pytest.approx(expected)
    assert "fewer than 10 systems" in found["warning"]


def test_bad_requests_name_what_was_wrong(arena, make_project, make_user):
    project, release, researcher = arena
    client = session_client(researcher)
    r = client.get(f"/api/projects/{project.slug}/judges/?likert=nowhere")
    assert r.status_code == 400
    assert "video-rating project you are a researcher of, got 'nowhere'" in r.json()["likert"][0]
    r = client.get(f"/api/projects/{project.slug}/judges/?release=v9")
    assert r.status_code == 404
    other = make_project("status-j", "status", members={researcher: Role.RESEARCHER})
    r = client.get(f"/api/projects/{other.slug}/judges/")
    assert r.status_code == 404 and "project status-j is status" in r.json()["detail"]
    page = client.get(f"/projects/{other.slug}/judges/")
    assert page.status_code == 200 and b"judges-not-pairwise" in page.content
    page = client.get(f"/projects/{project.slug}/judges/?likert=nowhere")
    assert page.status_code == 400 and b"got &#x27;nowhere&#x27;" in page.content


def test_the_page_lists_the_disagreements_with_both_outputs(arena):
    project, release, researcher = arena
    _import_run(project, release, "judge-x", RUN_1)
    page = session_client(researcher).get(f"/projects/{project.slug}/judges/?release=v1")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-judge="judge-x"' in html
    for ext in ("p1", "p4"):
        assert f'data-item="{ext}"' in html
    assert html.count('<video src="/media/') == 4
    assert html.count("/review/") == 2
