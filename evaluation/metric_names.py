"""Human names and definitions of every leaderboard metric (which one a board is ranked by: ranking.py).

The one place a metric key (``acc_osi``, ``state_acc_distractor_crop``, ``state_change:scenario:novel``)
turns into words: column headers, their tooltips, chart titles and the legend of the pages and
downloads read from here. Plain Python, no Django. Each protocol's package holds its metrics'
names and definitions (``Protocol.metrics``, protocols/base.py); this module words breakdowns.
"""

from __future__ import annotations

from collections.abc import Mapping

from protocols import registry

# protocol name -> {metric key: (short column name, definition)}, from each protocol's package.
METRICS: Mapping[str, dict[str, tuple[str, str]]] = registry.Attribute("metrics")

GROUPS = {
    "category": "category",
    "difference": "difference",
    "scenario": "scenario",
    "action_category": "action category",
}

# What the two reference rows of a leaderboard are, for the page's legend.
BASELINES = {
    "Random": "Random: seeded random answers (uniform over the options; random 1–5 ratings for videos) scored by "
    "the same code as the models. A model near this row has learnt nothing the metric can see.",
    "Human": "Human: annotators' blind answers (given without the ground truth) scored like a model's.",
    "Chance": "Chance: the expected score of guessing, from the number of options alone (no row of answers).",
}


def split_key(protocol: str, key: str) -> tuple[str, str, str]:
    """(metric, group kind, group value): "category:positional:roa" (a quintuplet
    category) and "state_change:scenario:novel" (a rating scenario) both name a metric over one group of items."""
    parts = key.split(":")
    if len(parts) == 3:
        if parts[0] in METRICS.get(protocol, {}):
            return parts[0], parts[1], parts[2]
        return parts[2], parts[0], parts[1]
    return key, "", ""


def metric_name(protocol: str, key: str) -> str:
    """Short human name of a metric or breakdown key ("category:positional:roa" -> "ROA · category positional")."""
    metric, kind, value = split_key(protocol, key)
    name = METRICS.get(protocol, {}).get(metric, (metric.replace("_", " "), ""))[0]
    if not kind:
        return name
    return f"{name} · {GROUPS.get(kind, kind)} {value.replace('_', ' ')}".strip()


def metric_definition(protocol: str, key: str) -> str:
    """The definition shown as the column's tooltip, limited to the breakdown's items where it is one."""
    metric, kind, value = split_key(protocol, key)
    text = METRICS.get(protocol, {}).get(metric, ("", ""))[1]
    if kind and text:
        text = f"{text} Only items whose {GROUPS.get(kind, kind)} is {value.replace('_', ' ')}."
    return text
