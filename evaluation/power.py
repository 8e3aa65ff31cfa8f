"""The power page's answer: from a pilot (a release, or the project's current items) the items, raters
and paired units a study needs for a target precision, per board row and metric (the arithmetic:
protocols/kit/power.py; docs/statistics.md, "Planning a study: items and raters needed").

A row's figures are planned from the same item scores and clusters as its standard errors on the
board (leaderboard.row_scores, protocols/kit/clustered.py), on the board's printed scale
(percentage points, or points of the 0–1 rating scale). The Random row is a reference of random
answers and gets no plan. Raters are planned where an item's score is the mean of human raters
(a board of generators scored by people): from each rater's own scores, aggregated ratings (a
study's published means) left out. Paired units are planned against ``baseline`` on one metric
(the units of evaluation/paired.py: the items, or on a board of generators the prompts).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from annotation.models import Project
from protocols import registry
from protocols.kit import clustered
from protocols.kit import power as power_stats
from protocols.kit.items import ScoringItem

from . import board_cache, correlation, leaderboard, metric_names, paired, ranking, selectors
from .scoring import answer_sets

REFERENCE_ROWS = ("Random",)  # rows of random answers: nothing to plan


class PowerInputError(ValueError):
    """A bad query value; ``field`` names the parameter, the message what was found and expected."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class PowerRequest:
    half_width: float
    difference: float
    metric: str | None  # None: the default (resolve_metric)
    baseline: str | None


def scale_max(protocol: str) -> float:
    """The top of the board's printed scale: 100 percentage points, or 1 for 0–1 scores."""
    return 100.0 if answer_sets.is_percent(protocol) else 1.0


def unit_name(protocol: str) -> str:
    return "percentage points" if answer_sets.is_percent(protocol) else "points of the 0–1 scale"


def defaults(protocol: str) -> tuple[float, float]:
    """(half-width, difference) the form starts with: 2 and 5 points on a percent board (0.02 and
    0.05 on a 0–1 board)."""
    top = scale_max(protocol)
    return 0.02 * top, 0.05 * top


def item_metrics(protocol: str, rows: Sequence[leaderboard.RowScores]) -> list[str]:
    """The main metrics that are means of item scores (a column of the rows' item matrix: the ones
    with a spread to plan from), in the board's column order; a metric derived from several means
    (a mean of subtask means) has none."""
    columns = set(rows[0].matrix.keys) if rows else set()
    return [k for k in answer_sets.main_keys(protocol) if k in columns]


def resolve_metric(protocol: str, metric: str | None, metrics: Sequence[str]) -> str | None:
    """The metric asked for (PowerInputError when it has no item scores); by default the ranking's
    headline where it has them, else the first metric that has."""
    if metric is None:
        headline = ranking.headline(protocol)
        return headline if headline in metrics or not metrics else metrics[0]
    if metric not in metrics:
        raise PowerInputError(
            "metric",
            f"metric: expected a metric of this board with item scores ({', '.join(metrics) or 'none'}), "
            f"found {metric!r}",
        )
    return metric


def _number(query: Mapping[str, str], name: str, default: float, top: float, unit: str) -> float:
    text = query.get(name)
    if text is None or str(text).strip() == "":
        return default
    expected = f"expected a number of {unit} above 0 and at most {top:g}"
    try:
        value = float(str(text).strip())
    except ValueError:
        raise PowerInputError(name, f"{name}: {expected}, found {text!r}")
    if not math.isfinite(value) or value <= 0 or value > top:
        raise PowerInputError(name, f"{name}: {expected}, found {text!r}")
    return value


def parse(protocol: str, query: Mapping[str, str]) -> PowerRequest:
    """The request's half_width, difference, metric and baseline (PowerInputError for a bad number;
    the metric and the baseline are checked against the board by ``build``)."""
    top, unit = scale_max(protocol), unit_name(protocol)
    default_width, default_difference = defaults(protocol)
    half_width = _number(query, "half_width", default_width, top, unit)
    difference = _number(query, "difference", default_difference, top, unit)
    return PowerRequest(half_width, difference, query.get("metric") or None, query.get(paired.PARAMETER) or None)


def _codes(protocol: str, units: Sequence[ScoringItem]) -> np.ndarray:
    codes, _ = clustered.cluster_codes(leaderboard.unit_clusters(protocol, units))
    return codes


def _rater_scores(
    protocol: str, units: Sequence[ScoringItem], ratings: dict, aggregated: dict, keys: Sequence[str]
) -> dict[str, list[list[float]]]:
    """Per metric, per item of ``units``: each rater's own score (scored as a one-rater item by the
    protocol's scoring), raters of an aggregated rating left out."""
    scoring = registry.get(protocol).scoring
    virtual, owner, one_each = [], [], {}
    for position, unit in enumerate(units):
        for index, (rater, scores) in enumerate(ratings.get(unit.key, [])):
            if rater in aggregated.get(unit.key, ()):
                continue
            key = (unit.key, index)
            virtual.append(ScoringItem(key, unit.external_id, unit.payload, unit.resolved))
            owner.append(position)
            one_each[key] = [scores]
    out: dict[str, list[list[float]]] = {k: [[] for _ in units] for k in keys}
    if not virtual:
        return out
    matrix = scoring.score_ratings(virtual, one_each)
    values, counted = matrix.float_values()
    for key in keys:
        j = matrix.column(key)
        for row, position in enumerate(owner):
            if counted[row, j]:
                out[key][position].append(float(values[row, j]))
    return out


def _row_plan(
    protocol: str,
    row: leaderboard.RowScores,
    request: PowerRequest,
    keys: Sequence[str],
    scale: float,
    raters: dict[str, list[list[float]]] | None,
) -> dict[str, Any]:
    codes = _codes(protocol, row.units)
    values, counted = row.matrix.float_values()
    plans: dict[str, Any] = {}
    for key in keys:
        j = row.matrix.column(key)
        keep = counted[:, j] > 0
        plan = power_stats.plan_mean(values[keep, j] * scale, codes[keep], half_width=request.half_width)
        if raters is not None:
            components = power_stats.variance_components([[v * scale for v in s] for s in raters[key]])
            plan["raters"] = {
                **components,
                "plan": power_stats.plan_raters(
                    components, half_width=request.half_width, design_effect=plan["design_effect_used"] or 1.0
                ),
            }
        plans[key] = plan
    return {"model": row.name, "metrics": plans}


def _paired_plan(
    protocol: str, rows: list[leaderboard.RowScores], request: PowerRequest, scale: float
) -> dict[str, Any]:
    names = [r.name for r in rows]
    base_row = rows[names.index(request.baseline)]
    column = base_row.matrix.column(request.metric)
    by_cluster = registry.get(protocol).board == "generators"
    base = paired.unit_scores(protocol, base_row, column, by_cluster)
    comparisons = []
    for row in rows:
        if row.name == request.baseline or row.name in REFERENCE_ROWS:
            continue
        own = paired.unit_scores(protocol, row, column, by_cluster)
        shared = [uid for uid in own if uid in base]
        codes, _ = clustered.cluster_codes([base[uid][1] for uid in shared])
        result = power_stats.plan_difference(
            [own[uid][0] * scale for uid in shared],
            [base[uid][0] * scale for uid in shared],
            codes,
            difference=request.difference,
        )
        comparisons.append({"model": row.name, **result})
    return {
        "baseline": request.baseline,
        "metric": request.metric,
        "difference": request.difference,
        "units": "prompts" if by_cluster else "items",
        "comparisons": comparisons,
    }


def build(
    project: Project, request: PowerRequest, *, release_version: str | None = None, judge: str | None = None
) -> dict[str, Any]:
    """The plan of a project's board (paired.UnknownBaseline for a baseline that is no row,
    PowerInputError for a metric without item scores; Release.DoesNotExist and
    leaderboard.LeaderboardError as the board's)."""
    protocol = project.protocol
    release = selectors.release_for(project, release_version)
    items = selectors.scoring_items(project, release)
    rows, _ = leaderboard.row_scores(project, release, items, judge=judge)
    names = [r.name for r in rows]
    if request.baseline is not None and request.baseline not in names:
        raise paired.UnknownBaseline(
            f"{paired.PARAMETER}: {request.baseline!r} is not a row of this board; "
            f"its rows: {', '.join(names) or 'none'}"
        )
    keys = item_metrics(protocol, rows)
    metric = resolve_metric(protocol, request.metric, keys)
    request = PowerRequest(request.half_width, request.difference, metric, request.baseline)
    scale = scale_max(protocol)  # item scores are 0–1: percent boards print them ×100
    with_raters = registry.get(protocol).board == "generators" and judge is None
    ratings = selectors.ratings_by_item(items) if with_raters else {}
    aggregated = correlation.aggregated_raters(items) if with_raters else {}
    order = {row["model"]: i for i, row in enumerate(board_cache.board(project, release_version, judge)["rows"])}
    plans = []
    for row in sorted(rows, key=lambda r: order.get(r.name, len(order))):  # the board's order
        if row.name in REFERENCE_ROWS:
            continue
        raters = _rater_scores(protocol, row.units, ratings, aggregated, keys) if with_raters else None
        plans.append(_row_plan(protocol, row, request, keys, scale, raters))
    key = leaderboard.cluster_key(protocol)
    out: dict[str, Any] = {
        "project": project.slug,
        "release": release.version if release is not None else None,
        "protocol": protocol,
        "judge": judge,
        "cluster_key": list(key) if isinstance(key, tuple) else key,
        "unit": unit_name(protocol),
        "level": power_stats.LEVEL,
        "alpha": power_stats.ALPHA,
        "power": power_stats.POWER,
        "half_width": request.half_width,
        "difference": request.difference,
        "metric": request.metric,
        "metrics": keys,
        "rows": plans,
    }
    if request.baseline is not None and metric is not None:
        out["paired"] = _paired_plan(protocol, rows, request, scale)
    return out


def cached_plan(
    project: Project, request: PowerRequest, *, release_version: str | None, judge: str | None
) -> dict[str, Any]:
    """``build``, computed once per state of the data and request."""
    extra = f"{judge}:{request.metric}:{request.half_width!r}:{request.difference!r}:{request.baseline}"
    return board_cache.cached(
        "power",
        project,
        release_version,
        extra,
        lambda: build(project, request, release_version=release_version, judge=judge),
    )


# --- text -----------------------------------------------------------------------------------


def _cell(value: float | None, places: int) -> str:
    return "–" if value is None else f"{value:.{places}f}"


def _count(value: int | None) -> str:
    return "–" if value is None else str(value)


def render_markdown(plan: dict[str, Any]) -> str:
    """The plan's tables for one metric (``plan["metric"]``): items, raters, paired units."""
    protocol, metric = plan["protocol"], plan["metric"]
    if metric is None:
        return "No row of this board has item scores to plan from.\n"
    places = registry.get(protocol).places + 1
    name = metric_names.metric_name(protocol, metric)
    lines = [
        f"Items needed for a {plan['level']:.0%} interval of half-width {plan['half_width']:g} {plan['unit']} "
        f"on {name}: n = (1.96 × sd / half-width)² × design effect",
        "",
        "| Model | Items now | Clusters now | sd | Design effect | Half-width now | Items needed | Clusters needed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in plan["rows"]:
        p = row["metrics"][metric]
        cells = [
            row["model"].replace("|", "\\|"),
            str(p["n"]),
            str(p["clusters"]),
            _cell(p["sd"], places),
            _cell(p["design_effect"], 3),
            _cell(p["half_width_now"], places),
            _count(p["items_needed"]),
            _count(p["clusters_needed"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    rater_rows = [(row["model"], row["metrics"][metric].get("raters")) for row in plan["rows"]]
    if any(r and r["plan"] for _, r in rater_rows):
        ks = [entry["raters"] for entry in next(r for _, r in rater_rows if r and r["plan"])["plan"]]
        lines += [
            "",
            "Items (ratings) needed with k raters per item: n = (1.96 / half-width)² × design effect × "
            "(item variance + rater variance / k)",
            "",
            "| Model | " + " | ".join(f"k = {k}" for k in ks) + " |",
            "|---|" + "---:|" * len(ks),
        ]
        for model, r in rater_rows:
            cells = [f"{e['items_needed']} ({e['ratings_needed']})" for e in r["plan"]] if r and r["plan"] else []
            lines.append(f"| {model.replace('|', chr(92) + '|')} | " + " | ".join(cells or ["–"] * len(ks)) + " |")
    if plan.get("paired"):
        pp = plan["paired"]
        lines += [
            "",
            f"{pp['units'].capitalize()} needed to detect a difference of {pp['difference']:g} {plan['unit']} from "
            f"{pp['baseline']} on {name} at {plan['power']:.0%} power (two-sided, level {plan['alpha']:g}): "
            "n = ((1.96 + 0.84) × sd of the differences / difference)² × design effect",
            "",
            f"| Model | Shared {pp['units']} | Difference now | sd of differences | Design effect | "
            f"Detectable now | {pp['units'].capitalize()} needed |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for c in pp["comparisons"]:
            cells = [
                c["model"].replace("|", "\\|"),
                str(c["n"]),
                _cell(c["difference_now"], places),
                _cell(c["sd_difference"], places),
                _cell(c["design_effect"], 3),
                _cell(c["detectable_now"], places),
                _count(c["units_needed"]),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def page_tables(plan: dict[str, Any]) -> dict[str, Any]:
    """What the page shows of a plan: the selected metric's rows, the rater plan where there is one,
    and a worked example (the first row with an answer) that spells the formula out in numbers."""
    metric = plan["metric"]
    if metric is None:
        return {
            "rows": [],
            "raters": None,
            "example": None,
            "metric_name": None,
            "half_width_text": "",
            "difference_text": "",
        }
    rows = [{"model": row["model"], **row["metrics"][metric]} for row in plan["rows"]]
    with_raters = [r for r in rows if r.get("raters") and r["raters"]["plan"]]
    raters = None
    if with_raters:
        raters = {
            "ks": [e["raters"] for e in with_raters[0]["raters"]["plan"]],
            "rows": [{"model": r["model"], **r["raters"]} for r in rows if r.get("raters")],
        }
    example = next((r for r in rows if r["items_needed"] is not None), None)
    return {
        "half_width_text": f"{plan['half_width']:g}",
        "difference_text": f"{plan['difference']:g}",
        "rows": rows,
        "raters": raters,
        "example": example,
        "metric_name": metric_names.metric_name(plan["protocol"], metric),
    }
