"""The judges page and API read one set of data with or without ?release=: the newest release by
default (as the leaderboard and the arena-vs-Likert τ do), the live items only for a project with
no release; the report says which. And the τ's intervals: the two-way one checked against SciPy's
τ-b over the systems each redraw holds."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from annotation.models import Annotation, ItemStatus, Role
from evaluation import correlation, judges
from protocols.kit.bootstrap import percentile_ci
from protocols.oscbench import CRITERIA
from tests.evaluation.factories import make_release, rate
from tests.evaluation.test_judges import PAIRS, RUN_1, VOTES, _import_run
from tests.helpers.clients import session_client
from tests.inference.factories import release_of

from .helpers import MODEL_NAMES, clips, make_pair

pytestmark = pytest.mark.django_db


@pytest.fixture
def arena(settings, tmp_path, make_project, make_user):
    """Nine voted pairs, all annotated; the release v1 holds the first six only."""
    settings.MEDIA_ROOT = tmp_path / "media"
    researcher = make_user("researcher")
    project = make_project("arena-r", "arena", members={researcher: Role.RESEARCHER})
    media = clips(tmp_path)
    items = [make_pair(project, f"p{i}", media, models=PAIRS[i % 3]) for i in range(len(VOTES))]
    for item, votes in zip(items, VOTES, strict=True):
        for r, winner in enumerate(votes):
            Annotation.objects.create(item=item, external_rater=f"r{r}", result={"winner": winner}, source="import")
        item.status = ItemStatus.ANNOTATED
        item.save(update_fields=["status"])
    return project, items, researcher


def _get(client, url):
    r = client.get(url)
    assert r.status_code == 200, r.content
    return r.json()


def test_without_release_the_report_reads_the_newest_release(arena, make_project):
    project, items, researcher = arena
    client = session_client(researcher)
    # No release yet: the live items, and the report says so.
    live = _get(client, f"/api/projects/{project.slug}/judges/")
    assert (live["release"], live["items"]) == (None, 9) and live["data"].startswith("live items")
    release = release_of(project, items[:6])
    _import_run(project, release, "judge-x", RUN_1)
    default = _get(client, f"/api/projects/{project.slug}/judges/")
    named = _get(client, f"/api/projects/{project.slug}/judges/?release=v1")
    assert (default["release"], default["items"]) == ("v1", 6)
    assert default["data"] == "release v1, the newest" and named["data"] == "release v1"
    # The judge run on the release is in the default report (the live items' report had no judge).
    assert [j["judge"] for j in default["judges"]] == ["judge-x"]
    assert {k: v for k, v in default.items() if k != "data"} == {k: v for k, v in named.items() if k != "data"}
    page = client.get(f"/projects/{project.slug}/judges/").content.decode()
    assert 'data-release="v1"' in page and "Reading release v1, the newest: 6 pairs" in page

    # The τ against a Likert board reads the same release as the report, and names both releases.
    osc = make_project("osc-r", "oscbench", members={researcher: Role.RESEARCHER})
    base = {"video": "v.mp4", "scenario": "regular", "action": "slice", "action_category": "cutting"}
    base |= {"object": "bread", "object_category": "food"}
    payloads = {f"o{i}-{m}": {**base, "prompt": f"slice {i}", "generator": m} for i in range(2) for m in MODEL_NAMES}
    make_release(osc, payloads)
    level = {MODEL_NAMES[0]: 3, MODEL_NAMES[1]: 5, MODEL_NAMES[2]: 4}
    for ext, payload in payloads.items():
        for r in range(2):
            rate(ext, osc, f"r{r}", {c: level[payload["generator"]] for c in CRITERIA})
    found = _get(client, f"/api/projects/{project.slug}/judges/?likert={osc.slug}")["ranking_comparison"]
    board = _get(client, f"/api/projects/{project.slug}/leaderboard/?release=v1&details=1")
    assert found["arena_release"] == found["pairs_release"] == "v1" == board["release"]
    assert found["pairs_label"] == "Arena (pairwise votes)"
    assert found["likert_release"] is not None
    rating = {r["model"]: r["metrics"]["rating"] for r in board["rows"]}
    assert {s["model"]: s["rating"] for s in found["systems"]} == rating
    assert "fewer than 10 systems" in found["warning"]
    assert set(found["tau_intervals"]) == {"ci", "ci_two_way", "n_boot", "without_error"}


def test_two_way_tau_interval_against_scipy():
    """With no sampling error on either board the items-only interval is the point τ, and the
    two-way one is the percentile interval of SciPy's τ-b over each redraw's systems (a system
    drawn twice counted twice), the redraws being correlation.system_draws'."""
    arena = [1100.0, 1050.0, 1000.0, 990.0, 950.0, 900.0]
    likert = [4.1, 3.5, 3.9, 3.0, 3.1, 2.0]
    found = judges.tau_intervals([0.0] * 6, [0.0] * 6, arena, likert, n_boot=400, seed=3)
    tau = sps.kendalltau(arena, likert).statistic
    assert found["ci"] == pytest.approx([tau, tau])
    drawn = correlation.system_draws(6, 400, 3)
    taus = []
    for counts in drawn:
        idx = np.repeat(np.arange(6), counts)
        x, y = np.array(arena)[idx], np.array(likert)[idx]
        taus.append(sps.kendalltau(x, y).statistic if len(set(idx)) >= 3 else np.nan)
    assert found["ci_two_way"] == pytest.approx(percentile_ci(np.array(taus, dtype=float)))
    # Sampling error widens the items-only interval; a score without one is counted.
    noisy = judges.tau_intervals([30.0] * 6, [0.4] * 5 + [None], arena, likert, n_boot=400)
    assert noisy["ci"][0] < tau and noisy["without_error"] == 1
