"""Every leaderboard metric has a human name and a definition (evaluation/metric_names.py), every
metric a board is ranked by (evaluation/ranking.py) is one of them, and the correlation LaTeX
typesets τ_b."""

import ast
from pathlib import Path

import pytest

from evaluation import metric_names, ranking, tables
from evaluation.scoring import answer_sets


@pytest.mark.parametrize("protocol", ["status", "changeit", "visualtrans", "m3verse", "oscbench"])
def test_every_metric_key_has_a_name_and_a_definition(protocol):
    for key in answer_sets.main_keys(protocol):
        name, definition = metric_names.metric_name(protocol, key), metric_names.metric_definition(protocol, key)
        assert name and name != key and "_" not in name, key
        assert len(definition) > 30 and not definition.startswith(key), key  # a definition, not the key again
    # What a board is ranked by is a metric of its main table, so the table shows it.
    assert ranking.headline(protocol) in answer_sets.main_keys(protocol)
    assert all(key in answer_sets.main_keys(protocol) for key in ranking.ranking_keys(protocol))


def test_breakdown_keys_name_their_group_in_either_order():
    assert metric_names.metric_name("status", "category:positional:roa") == "ROA · category positional"
    assert metric_names.metric_definition("status", "difference:slight:acc_sci").endswith(
        "Only items whose difference is slight."
    )
    assert metric_names.metric_name("oscbench", "state_change:action_category:cutting") == (
        "State-change score · action category cutting"
    )
    assert metric_names.metric_name("changeit", "state_acc_distractor_crop") == "State acc. · distractor · crop"


def test_headline_metrics_are_the_papers():
    # STATUS: the paper measures models "in terms of the proposed ROA metric" (OA is its standard
    # companion, the tie-break); OSCBench: the state-change score, not one of its two halves.
    assert {p: ranking.headline(p) for p in ranking.RANKING} == {
        "status": "roa",
        "changeit": "state_acc_standard_full",
        "visualtrans": "overall",
        "m3verse": "overall",
        "oscbench": "state_change",
        "arena": "rating",  # the pairwise votes' Bradley-Terry rating (no paper; the arena's own)
    }
    assert ranking.ranking_keys("status") == ("roa", "oa")


def test_metric_names_imports_nothing_from_django():
    source = Path(metric_names.__file__).read_text()
    imported = {n.module or "" for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m.startswith("django") for m in imported)


def test_correlation_latex_typesets_tau_b():
    report = {
        "criteria": ["osc_accuracy", "scene"],
        "judges": [
            {
                "judge": "judge_1",
                "system_kendall_tau_b": 0.5,
                "per_criterion": {"osc_accuracy": {"kendall_tau_b": 0.25}, "scene": {"kendall_tau_b": None}},
            }
        ],
        "human": {c: {"loo_kendall_tau_b": 0.5, "krippendorff_alpha": 0.75} for c in ("osc_accuracy", "scene")},
    }
    latex = tables.correlation_latex(report)
    head = next(line for line in latex.splitlines() if line.startswith("Judge &"))
    assert head == r"Judge & osc\_accuracy $\tau_b$ & scene $\tau_b$ & System $\tau_b$ & System 95\% CI (two-way) \\"
    assert r"\tau\_b" not in latex
    # No "system" entry (no two-way interval): a dash in the interval's column.
    assert r"judge\_1 & 0.250 & -- & 0.500 & -- \\" in latex
