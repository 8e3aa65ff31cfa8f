"""Leaderboard and correlation pages with their downloads (researchers and admins)."""

from __future__ import annotations

import re

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render

from annotation.models import Release, Role
from annotation.permissions import get_project_for
from inference.selectors import usd
from protocols import registry

from . import charts, correlation, leaderboard, metric_names, paired, power, ranking, selectors, tables, vote_intervals
from .board_access import board_or_404, interval_choice, release_and_judge, report_or_404, wants_details
from .board_access import rank_by as requested_ranking
from .scoring import answer_sets

CONTENT_TYPES = {
    "json": ("application/json", "json"),
    "csv": ("text/csv", "csv"),
    "latex": ("application/x-tex", "tex"),
    "markdown": ("text/markdown", "md"),
    "svg": ("image/svg+xml", "svg"),
}


def _download(body: str, fmt: str, name: str) -> HttpResponse:
    content_type, ext = CONTENT_TYPES[fmt]
    response = HttpResponse(body, content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{download_name(name)}.{ext}"'
    return response


def download_name(name: str) -> str:
    """A file name made of letters, digits, '.', '_' and '-' only: query values (metric, judge,
    criterion) end up in it and must not inject header parameters or control characters."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:150] or "download"


def _bad_ranking(exc: ranking.UnknownRanking) -> HttpResponse:
    return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")


@login_required
def leaderboard_page(request, slug: str):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    release, judge = release_and_judge(request)
    try:
        rank_by = requested_ranking(request, project)
        intervals = interval_choice(request, project)
    except ranking.UnknownRanking as exc:
        return _bad_ranking(exc)
    except vote_intervals.IntervalChoiceError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    board = board_or_404(project, release, judge, rank_by, intervals)
    baseline = request.GET.get(paired.PARAMETER) or None
    if baseline is not None:
        try:
            board = paired.with_comparisons(project, board, judge=judge, baseline=baseline)
        except paired.UnknownBaseline as exc:
            return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    keys = list(answer_sets.main_keys(project.protocol))
    groups = leaderboard.breakdown_groups(board)
    protocol = project.protocol
    tabs = [{"id": "main", "label": "Main table", "keys": keys}] + [
        {
            "id": f"tab{i}",
            "label": name.replace(":", " · ").replace("_", " "),
            "keys": group_keys,
            # the tab names the group; a column names its metric
            "short": [metric_names.metric_name(protocol, metric_names.split_key(protocol, k)[0]) for k in group_keys],
        }
        for i, (name, group_keys) in enumerate(groups.items(), start=1)
    ]
    places = tables.places_for(project.protocol)
    headline = ranking.headline(protocol, rank_by)
    for tab in tabs:
        chance = [answer_sets.chance(project.protocol, k) for k in tab["keys"]]
        tab["chance"] = [None if c is None else str(c) for c in chance] if any(c is not None for c in chance) else None
        tab["breakdown"] = (
            None if tab["id"] == "main" else next(name for name, keys in groups.items() if keys == tab["keys"])
        )
        names = tab.get("short") or [metric_names.metric_name(protocol, k) for k in tab["keys"]]
        # The rows come in leaderboard order: on the main table that is the headline column, descending.
        tab["columns"] = [
            {
                "key": k,
                "name": name,
                "title": metric_names.metric_definition(protocol, k),
                "sorted": tab["id"] == "main" and k == headline,
            }
            for k, name in zip(tab["keys"], names)
        ]
        # Tokens, cost and cost per correct answer after the main table's metrics, where some row has a price.
        tab["usage"] = tab["id"] == "main" and tables.has_cost(board)
        tab["rows"] = []
        for row in board["rows"]:
            cells = []
            for key in tab["keys"]:
                value, ci = tables.row_value(row, key)
                se, se_clustered, design_effect = tables.row_errors(row, key) if tab["id"] == "main" else (None,) * 3
                cells.append(
                    {
                        "value": value,
                        # a count (battles, ties) is an integer, printed as one
                        "text": "–" if value is None else _cell_text(value, places),
                        "ci": "" if not ci else f"[{ci[0]:.{places}f}, {ci[1]:.{places}f}]",
                        # the main table's standard errors (naive, clustered) and design effect
                        "se": None if se is None else f"{se:.{places + 1}f}",
                        "se_clustered": None if se_clustered is None else f"{se_clustered:.{places + 1}f}",
                        "design_effect": None if design_effect is None else f"{design_effect:.3f}",
                    }
                )
            tab["rows"].append({"row": row, "cells": cells, "usage": _usage_cells(row) if tab["usage"] else []})
    releases = list(project.releases.order_by("-created_at").values_list("version", flat=True))
    generators = registry.get(protocol).board == "generators"  # rows are generators, scored by people or a judge
    judges = []
    if generators:
        judges = [
            selectors.job_name(j)
            for j in selectors.latest_finished_jobs(project, selectors.release_for(project, release))
        ]
    return render(
        request,
        "evaluation/leaderboard.html",
        {
            "project": project,
            "board": board,
            "tabs": tabs,
            "headline": metric_names.metric_name(protocol, headline),
            "tie_break": [metric_names.metric_name(protocol, k) for k in ranking.ranking_keys(protocol, rank_by)[1:]],
            # The rankings to pick from (a select on the page when there are several), default first.
            "rankings": [(name, metric_names.metric_name(protocol, name)) for name in ranking.choices(protocol)],
            "rank_by": rank_by,
            "default_ranking": rank_by == ranking.default_choice(protocol),
            "legend": [
                (metric_names.metric_name(protocol, k), metric_names.metric_definition(protocol, k)) for k in keys
            ]
            + (USAGE_LEGEND if tabs[0]["usage"] else []),
            "baselines": _baselines(board, any(t["chance"] for t in tabs)),
            "releases": releases,
            "release": release,
            "judge": judge,
            "judges": judges,
            "generators": generators,
            "pairwise": registry.get(protocol).board == "votes",  # the judges page reads votes boards
            "query": request.GET.urlencode(),
            "formats": ["csv", "json", "latex", "markdown", "svg"],
            "bar_svg": charts.leaderboard_bars(board, headline, label=metric_names.metric_name(protocol, headline)),
            "diagnostics": _diagnostics(board),
            # ?baseline=: the paired comparisons (templates/evaluation/_paired.html shows them)
            "paired": board.get("paired"),
            "paired_places": places,
            "cluster_key": ", ".join(key) if isinstance(key := board.get("cluster_key"), list) else key,
            # a votes board's interval (?ci=, ?rounds=: vote_intervals.py), picked on the page
            "interval": intervals,
            "interval_rounds": (vote_intervals.MIN_ROUNDS, vote_intervals.MAX_ROUNDS),
        },
    )


def _cell_text(value, places: int) -> str:
    """A cell's text: a count (an int, e.g. a votes board's battles) as a whole number, any other
    value with the protocol's decimals."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return f"{value:.{places}f}"


# The legend's lines for the usage columns (shown where some row has a price).
USAGE_LEGEND = [
    ("Tokens", "Tokens the model's endpoint reported for the job's requests, prompt plus reply (hover: in / out)."),
    (
        "Cost",
        "What those tokens cost at the endpoint's prices per million tokens, in USD; cached answers cost nothing.",
    ),
    ("Cost per correct answer", "The cost over the number of answers scored correct on the headline metric."),
]


def _usage_cells(row) -> list[dict]:
    """A main-table row's Tokens, Cost and Cost per correct answer cells ({value, text, title});
    "–" where unknown (Random, Human, imported answers, an endpoint with no price, nothing correct)."""
    usage = row.get("usage") or {}
    tokens = tables.usage_tokens(row)
    cost, per_correct, correct = usage.get("cost_usd"), usage.get("cost_per_correct_usd"), usage.get("correct")
    return [
        {"value": None, "text": "–", "title": ""}
        if tokens is None
        else {"value": sum(tokens), "text": f"{sum(tokens):,}", "title": f"{tokens[0]:,} in, {tokens[1]:,} out"},
        {"value": cost, "text": usd(cost), "title": ""},
        {
            "value": per_correct,
            "text": usd(per_correct),
            "title": "" if per_correct is None else f"{correct:,} correct answer{'' if correct == 1 else 's'}",
        },
    ]


def _baselines(board, has_chance: bool) -> list[tuple[str, str]]:
    """The legend lines for the reference rows this board shows (Random, Human, Chance)."""
    present = {row["model"] for row in board["rows"]} | ({"Chance"} if has_chance else set())
    return [(name, text) for name, text in metric_names.BASELINES.items() if name in present]


def _diagnostics(board) -> list[dict]:
    out = []
    for row in board["rows"]:
        d = row.get("diagnostics") or {}
        entry = {"model": row["model"]}
        if "same_letter" in d:
            entry["same_letter"] = d["same_letter"]["combined"]["share"]
        if "reassigned" in d:
            entry["reassigned"] = d["reassigned"]
        if "unsupported" in d:
            entry["unsupported"] = ", ".join(d["unsupported"])
        if len(entry) > 1:
            out.append(entry)
    return out


@login_required
def leaderboard_download(request, slug: str, fmt: str):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    if fmt not in CONTENT_TYPES:
        raise Http404("Unknown format.")
    release, judge = release_and_judge(request)
    try:
        rank_by = requested_ranking(request, project)
        intervals = interval_choice(request, project)
    except ranking.UnknownRanking as exc:
        return _bad_ranking(exc)
    except vote_intervals.IntervalChoiceError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    board = board_or_404(project, release, judge, rank_by, intervals)
    name = f"{project.slug}-leaderboard" + (f"-{board['release']}" if board["release"] else "")
    if rank_by != ranking.default_choice(project.protocol):
        name += f"-by-{rank_by}"
    if fmt == "svg":
        # ?metric= picks the metric drawn; the bars keep the leaderboard's order either way.
        metric = request.GET.get("metric") or ranking.headline(project.protocol, rank_by)
        chart = charts.leaderboard_bars(board, metric, label=metric_names.metric_name(project.protocol, metric))
        return _download(chart, fmt, f"{name}-{metric}")
    breakdown = request.GET.get("breakdown") or None
    try:
        body = tables.render_leaderboard(board, fmt, details=wants_details(request), breakdown=breakdown)
    except tables.UnknownBreakdown as exc:
        raise Http404(str(exc))
    if breakdown:
        name += "-" + "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in breakdown)
    return _download(body, fmt, name)


@login_required
def correlation_page(request, slug: str):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    release, _ = release_and_judge(request)
    report = report_or_404(project, release)
    rows = []
    for j in report["judges"]:
        rows.append(
            {"judge": j, "mean": correlation.mean_tau(j), "cells": [j["per_criterion"][c] for c in report["criteria"]]}
        )
    return render(
        request,
        "evaluation/correlation.html",
        {
            "project": project,
            "report": report,
            "rows": rows,
            "human": [(metric_names.metric_name(project.protocol, c), report["human"][c]) for c in report["criteria"]],
            "criteria": [
                (metric_names.metric_name(project.protocol, c), metric_names.metric_definition(project.protocol, c))
                for c in report["criteria"]
            ],
            "scatters": [
                (r["judge"]["judge"], [(c, metric_names.metric_name(project.protocol, c)) for c in report["criteria"]])
                for r in rows
            ],
            "heatmap_svg": charts.heatmap(report),
            # one warning for the page when a judge's system level ranks fewer than 10 generators
            "few_systems": next((j["system_warning"] for j in report["judges"] if j.get("system_warning")), None),
            "release": release,
            "query": request.GET.urlencode(),
        },
    )


@login_required
def correlation_download(request, slug: str, fmt: str):
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    release, judge = release_and_judge(request)
    if fmt not in ("json", "csv", "latex", "svg"):
        raise Http404("Unknown format.")
    name = f"{project.slug}-correlation"
    if fmt == "svg":
        criterion = request.GET.get("criterion")
        if judge and criterion:
            try:
                xs, ys = correlation.scatter_points(project, judge=judge, criterion=criterion, release_version=release)
            except (correlation.CorrelationError, Release.DoesNotExist) as exc:
                raise Http404(str(exc))
            return _download(
                charts.scatter(xs, ys, criterion=criterion, judge_name=judge), fmt, f"{name}-{judge}-{criterion}"
            )
        return _download(charts.heatmap(report_or_404(project, release)), fmt, f"{name}-heatmap")
    return _download(
        tables.render_correlation(report_or_404(project, release), fmt, details=wants_details(request)), fmt, name
    )


@login_required
def power_page(request, slug: str):
    """Items (and raters, and paired units) a study needs for a target precision, from this board
    as a pilot (evaluation/power.py). A bad form value re-renders the form with a 400 naming it."""
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    protocol = project.protocol
    release, judge = release_and_judge(request)
    board = board_or_404(project, release, judge)  # the rows and metrics the form offers (cached)
    error, plan = None, None
    try:
        asked = power.parse(protocol, request.GET)
        plan = power.cached_plan(project, asked, release_version=release, judge=judge)
    except (power.PowerInputError, paired.UnknownBaseline) as exc:
        error = str(exc)
    except Release.DoesNotExist:
        raise Http404("No such release.")
    except leaderboard.LeaderboardError as exc:
        raise Http404(str(exc))
    metrics = list(board["rows"][0].get("se") or {}) if board["rows"] else []
    default_width, default_difference = power.defaults(protocol)
    generators = registry.get(protocol).board == "generators"
    context = {
        "project": project,
        "board": board,
        "plan": plan,
        "error": error,
        "form": {
            "half_width": request.GET.get("half_width") or f"{default_width:g}",
            "difference": request.GET.get("difference") or f"{default_difference:g}",
            "metric": plan["metric"] if plan else request.GET.get("metric") or "",
            "baseline": request.GET.get(paired.PARAMETER) or "",
        },
        "metrics": [(k, metric_names.metric_name(protocol, k)) for k in metrics],
        "unit": power.unit_name(protocol),
        "top": f"{power.scale_max(protocol):g}",
        "places": tables.places_for(protocol) + 1,
        "releases": list(project.releases.order_by("-created_at").values_list("version", flat=True)),
        "release": release,
        "judge": judge,
        "judges": [
            selectors.job_name(j)
            for j in selectors.latest_finished_jobs(project, selectors.release_for(project, release))
        ]
        if generators
        else [],
        "cluster_key": ", ".join(key) if isinstance(key := board.get("cluster_key"), list) else key,
        "query": request.GET.urlencode(),
    }
    if plan is not None:
        context.update(power.page_tables(plan))
    return render(request, "evaluation/power.html", context, status=400 if error else 200)
