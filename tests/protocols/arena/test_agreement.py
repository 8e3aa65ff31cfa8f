"""Agreement on arena votes: Krippendorff's α (nominal) per criterion on the agreement API,
checked against the textbook formula computed here, and differing votes left unmarked (a
preference, not an error); agreeing annotators verify an item where the project asks for it."""

from __future__ import annotations

import json
from collections import Counter
from itertools import permutations

import pytest

from annotation import agreement
from annotation.importing import annotations_import
from annotation.models import Item, ItemStatus, Role
from tests.helpers.clients import session_client

from .helpers import clips, make_pair

pytestmark = pytest.mark.django_db

# item -> votes of raters r1, r2, r3 (None: that rater did not vote on the criterion)
OVERALL = {"p0": ["a", "a", "b"], "p1": ["tie", "tie", "tie"], "p2": ["b", "both_bad", "b"], "p3": ["a", "a", "a"]}
STATE = {"p0": ["a", None, "a"], "p1": ["b", "b", None], "p2": [None, None, "a"], "p3": ["tie", "a", "a"]}


def nominal_alpha(units):
    """Krippendorff (2011), nominal: 1 - (n - 1) * sum_c o_cc' (c != c') / sum_c,c' n_c n_c' (c != c')."""
    o = Counter()
    for unit in units:
        values = [v for v in unit if v is not None]
        m = len(values)
        if m < 2:
            continue
        for x, y in permutations(range(m), 2):
            o[(values[x], values[y])] += 1 / (m - 1)
    n_c = Counter()
    for (c, _k), w in o.items():
        n_c[c] += w
    n = sum(n_c.values())
    observed = sum(w for (c, k), w in o.items() if c != k)
    expected = sum(n_c[c] * n_c[k] for c in n_c for k in n_c if c != k)
    return 1 - (n - 1) * observed / expected


@pytest.fixture
def project(settings, tmp_path, make_project, make_user):
    settings.MEDIA_ROOT = tmp_path / "media"
    reviewer = make_user("rev")
    project = make_project("agree", "arena", members={reviewer: Role.REVIEWER}, annotations_per_item=3)
    media = clips(tmp_path)
    for item in OVERALL:
        make_pair(project, item, media)
    lines = []
    for item, votes in OVERALL.items():
        for k, vote in enumerate(votes):
            lines.append({"item": item, "rater": f"r{k + 1}", "winner": vote})
            if STATE[item][k] is not None:
                lines.append(
                    {"item": item, "rater": f"r{k + 1}", "winner": STATE[item][k], "criterion": "state_change"}
                )
    path = tmp_path / "votes.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    annotations_import(project=project, path=path)
    return project, reviewer


def test_alpha_per_criterion_on_the_agreement_api(project):
    project, reviewer = project
    r = session_client(reviewer).get(f"/api/projects/{project.slug}/agreement/")
    assert r.status_code == 200, r.content
    figures = r.json()["workflow"]
    assert figures["kind"] == "pairwise"
    assert figures["criteria"]["overall"] == {
        "alpha": round(nominal_alpha(OVERALL.values()), 4),
        "n_items": 4,
    }
    assert figures["criteria"]["state_change"] == {
        "alpha": round(nominal_alpha(STATE.values()), 4),
        "n_items": 3,
    }


def test_differing_votes_are_not_marked_and_agreeing_ones_agree(project):
    project, _ = project
    assert set(Item.objects.filter(project=project).values_list("status", flat=True)) == {ItemStatus.ANNOTATED}
    assert not Item.objects.filter(project=project, disagreement__isnull=False).exists()
    same = [{"winner": "a", "criteria": {"state_change": "tie"}, "shown": "ab"}, {"winner": "a", "shown": "ba"}]
    assert agreement.results_agree("pairwise", same, protocol="arena")
    assert not agreement.results_agree("pairwise", [*same, {"winner": "b"}], protocol="arena")
    assert (
        agreement.pair_agreement(
            "pairwise",
            {"winner": "a", "criteria": {"state_change": "a"}},
            {"winner": "a", "criteria": {"state_change": "b"}},
        )
        == 0.5
    )
