"""The system-level correlation's two-way interval (items and systems resampled) against a naive
recomputation with SciPy, and the warning when fewer than 10 systems are ranked."""

import numpy as np
import pytest
from scipy import stats as sps

from evaluation import correlation, stats, tables
from protocols.kit.bootstrap import percentile_ci
from protocols.oscbench import CRITERIA

from .test_correlation_system import gen_means, vectors


def naive_two_way(human, judge, generators, draws, criterion=None):
    """SciPy tau-b over the generators defined on both sides, each repeated as often as it was drawn."""
    names = sorted(set(generators))
    if criterion is not None:
        h, j = gen_means(human[criterion], generators), gen_means(judge[criterion], generators)
    else:
        hc = [gen_means(human[c], generators) for c in CRITERIA]
        jc = [gen_means(judge[c], generators) for c in CRITERIA]
        h = {g: (np.mean(v) if (v := [m[g] for m in hc if m.get(g) is not None]) else None) for g in names}
        j = {g: (np.mean(v) if (v := [m[g] for m in jc if m.get(g) is not None]) else None) for g in names}
    keep = [g for g in names if h.get(g) is not None and j.get(g) is not None and draws[g] > 0]
    if len(keep) < 3:
        return np.nan
    xs = [h[g] for g in keep for _ in range(draws[g])]
    ys = [j[g] for g in keep for _ in range(draws[g])]
    return sps.kendalltau(xs, ys, variant="b").statistic


def test_two_way_interval_equals_the_naive_resample_of_items_and_systems():
    human, judge = vectors(seed=3)
    generators = [g for g in ("g1", "g2", "g3", "g4", "g5") for _ in range(6)]
    names = sorted(set(generators))
    n_boot = 80
    out = correlation.system_agreement(human, judge, generators, n_boot=n_boot, seed=0)
    system_draws = correlation.system_draws(len(names), n_boot, 0)
    assert system_draws.shape == (n_boot, 5) and (system_draws.sum(axis=1) == 5).all()
    naive = {"overall": [], **{c: [] for c in CRITERIA}}
    r = 0
    for _, w in stats.resample_weights(len(generators), n_boot, 0):
        for row in w:
            idx = np.repeat(np.arange(len(generators)), row)
            gens = [generators[i] for i in idx]
            h = {c: [human[c][i] for i in idx] for c in CRITERIA}
            j = {c: [judge[c][i] for i in idx] for c in CRITERIA}
            draws = dict(zip(names, system_draws[r].tolist()))
            naive["overall"].append(naive_two_way(h, j, gens, draws))
            for c in CRITERIA:
                naive[c].append(naive_two_way(h, j, gens, draws, c))
            r += 1
    assert np.isfinite(naive["overall"]).sum() > 40
    assert out["overall"]["ci_two_way"] == pytest.approx(percentile_ci(np.array(naive["overall"])), abs=1e-12)
    for c in CRITERIA:
        expected = percentile_ci(np.array(naive[c]))
        if out["per_criterion"][c]["kendall_tau_b"] is None:
            assert out["per_criterion"][c]["ci_two_way"] is None
        else:
            assert out["per_criterion"][c]["ci_two_way"] == pytest.approx(expected, abs=1e-12), c
    # Resampling the systems too widens the interval over items alone.
    lo2, hi2 = out["overall"]["ci_two_way"]
    lo, hi = out["overall"]["ci"]
    assert hi2 - lo2 > hi - lo


def test_fewer_than_ten_systems_carry_a_warning():
    human, judge = vectors()
    generators = [g for g in ("g1", "g2", "g3", "g4", "g5") for _ in range(6)]
    out = correlation.system_agreement(human, judge, generators, n_boot=20, seed=0)
    assert out["overall"]["n"] == 5
    assert out["overall"]["warning"] == correlation.few_systems_warning(5)
    assert out["overall"]["warning"].startswith("only 5 systems ranked: a rank correlation over fewer than 10 systems")

    # Twelve generators, each with two videos the judge and the humans score alike: no warning.
    many = [f"g{k:02d}" for k in range(12) for _ in range(2)]
    level = {g: k % 5 + 1 for k, g in enumerate(sorted(set(many)))}
    scores = {c: [float(level[g]) + (0.1 * (i % 2)) for i, g in enumerate(many)] for c in CRITERIA}
    out = correlation.system_agreement(scores, scores, many, n_boot=20, seed=0)
    assert out["overall"]["n"] == 12 and "warning" not in out["overall"]
    assert out["overall"]["kendall_tau_b"] == pytest.approx(1.0)
    assert out["overall"]["ci_two_way"] == [pytest.approx(1.0), pytest.approx(1.0)]


def test_the_csv_and_public_json_carry_the_two_way_interval_and_the_warning():
    human, judge = vectors()
    generators = [g for g in ("g1", "g2", "g3", "g4", "g5") for _ in range(6)]
    system = correlation.system_agreement(human, judge, generators, n_boot=30, seed=0)
    judge_entry = {
        "judge": "j",
        "per_criterion": {
            c: {"kendall_tau_b": None, "spearman_rho": None, "n": 0, "ci": None, "note": "none"} for c in CRITERIA
        },
        "system_kendall_tau_b": system["overall"]["kendall_tau_b"],
        "system_warning": system["overall"]["warning"],
        "system": {k: v for k, v in system["overall"].items() if k != "warning"},
        "system_per_criterion": system["per_criterion"],
    }
    human_entry = {
        "loo_kendall_tau_b": None,
        "loo_spearman_rho": None,
        "krippendorff_alpha": None,
        "n": 0,
        "ci": None,
        "note": "too few raters",
    }
    report = {"criteria": list(CRITERIA), "judges": [judge_entry], "human": {c: human_entry for c in CRITERIA}}
    lines = tables.correlation_csv(report).splitlines()
    assert lines[0] == (
        "source,criterion,kendall_tau_b,spearman_rho,n,tau_ci_lo,tau_ci_hi,rho_ci_lo,rho_ci_hi,"
        "tau_two_way_ci_lo,tau_two_way_ci_hi,krippendorff_alpha,note"
    )
    system_line = next(line for line in lines if line.startswith("j,system,"))
    lo, hi = system["overall"]["ci_two_way"]
    assert f",{lo:.4f},{hi:.4f},," in system_line and "only 5 systems ranked" in system_line
    public = tables.correlation_public(report)
    assert public["judges"][0]["system_warning"] == correlation.few_systems_warning(5)
    assert "j / system: only 5 systems ranked" in "\n".join(tables.correlation_notes(report))


@pytest.mark.django_db
def test_the_page_and_the_api_warn_when_few_systems_are_ranked(client, make_project, make_user):
    import json

    from django.http import HttpRequest

    from annotation.models import Role
    from inference.services import predictions_import
    from tests.helpers.items import osc_payload

    from .factories import make_release, rate

    researcher = make_user("res-tw")
    project = make_project("osctw", "oscbench", members={researcher: Role.RESEARCHER})
    payloads = {f"{gen}{i}": osc_payload(gen, i, "regular") for gen in ("genA", "genB", "genC") for i in range(2)}
    make_release(project, payloads)
    human = {"genA0": 1, "genA1": 2, "genB0": 3, "genB1": 3, "genC0": 5, "genC1": 4}
    for item, level in human.items():
        for rater in ("r1", "r2"):
            rate(item, project, rater, {c: level for c in CRITERIA})
    lines = [
        json.dumps({"item": item, "query": "judge", "answer": {c: min(5, level + 1) for c in CRITERIA}})
        for item, level in human.items()
    ]
    predictions_import(project=project, lines=lines, model_name="j1", release=project.releases.get())
    client.login(request=HttpRequest(), username="res-tw", password="pw")

    api = client.get("/api/projects/osctw/correlation/").json()
    (j,) = api["judges"]
    assert j["system_kendall_tau_b"] == pytest.approx(1.0)  # the judge ranks A < B < C as the humans do
    assert j["system_warning"] == correlation.few_systems_warning(3)
    details = client.get("/api/projects/osctw/correlation/?details=1").json()["judges"][0]["system"]
    assert details["n"] == 3 and len(details["ci_two_way"]) == 2 and details["ci_two_way"][1] == pytest.approx(1.0)
    html = client.get("/projects/osctw/correlation/").content.decode()
    assert 'id="corr-few-systems"' in html and "only 3 systems ranked" in html
    assert "data-ci-two-way" in html and "n=3 systems" in html
