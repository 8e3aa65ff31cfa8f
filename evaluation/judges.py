"""MLLM judges of a pairwise project against its human votes: the page and API "Judges" for a
project whose protocol brings a ``judging_module`` (protocols/base.py), which holds the statistics
and says what of an item the page shows (the protocol's spec page in docs/protocols/ describes it). This module
names no protocol; a project of a protocol without the hook gets a 404 (the API) or a note (the
page) saying that its protocol has no pairwise judges.

The data: the release ``?release=`` names, else the project's newest release (the one the
leaderboard and the ranking comparison read too), else, for a project without any release, the live
items (verified or annotated) and the jobs run on them; ``data`` in the JSON says which.

A *judge* is every finished job of one endpoint (or imported model name) on that release (or on
the live items): its K runs, oldest first. Each run asked every pair twice, sides
swapped. Per judge the report gives swap consistency and position bias (pooled over its runs),
and its verdicts (median-of-K with K > 1) against the human majority: accuracy on the items with
a non-tie majority and Cohen's κ; with K > 1 its stability. ``disagreements`` lists the pairs
where a judge's verdict and the human majority differ.

With ``likert=<slug>`` (a video-rating project the caller is a researcher of, whose boards rank
generators), this board's headline ratings (this report's release) and that project's headline Likert scores
(its newest release) of the models both rank are compared by Kendall's τ-b, with a warning under
MIN_SYSTEMS systems and two intervals (``tau_intervals``): "ci" redraws each system's two scores
from their boards' sampling error (normal, sd = the row's clustered standard error: the pairwise
board's cluster-robust sandwich, the Likert mean's by prompt), and "ci_two_way" also draws the
systems with replacement (evaluation/correlation.py's systems half), which is the one to read with few systems.

JSON: {"project", "release", "data", "protocol", "items", "with_majority", "judges": [{"judge", "k", "jobs",
"prompt_versions", "swap_consistency", "position_bias", "agreement", "stability", "runs"}],
"disagreements": [{"judge", "item", "external_id", "prompt", "model_a", "model_b", "human",
"votes", "judge_verdict", "asks"}], "ranking_comparison" (with likert)}.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np
from django.contrib.auth.decorators import login_required
from django.db.models import F
from django.http import Http404
from django.shortcuts import render
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Item, Project, Release, Role
from annotation.permissions import get_project_for, projects_with_role
from annotation.selectors import media_urls_for
from inference.models import InferenceJob, JobMode, JobStatus
from protocols import registry
from protocols.kit.bootstrap import N_BOOT, percentile_ci

from . import board_cache, correlation, leaderboard, metric_names, selectors

MIN_SYSTEMS = 10
PAGE_DISAGREEMENTS = 200  # the page lists this many; the API all
LIKERT_PARAMETER = "likert"
VERDICT_WORDS = {"a": "a better", "b": "b better", "tie": "tie", "both_bad": "both bad"}


class NotPairwise(ValueError):
    """The project's protocol has no pairwise judges (no ``judging_module``): nothing to report."""


class LikertError(ValueError):
    """The ``likert`` parameter names no project the caller may compare with; the message says why."""


def is_pairwise(project: Project) -> bool:
    """Whether the project's protocol has pairwise judges (it brings a ``judging_module``: protocols/base.py)."""
    return registry.get(project.protocol).judging_module is not None


def not_pairwise_message(project: Project) -> str:
    return (
        f"this project's protocol has no pairwise judges: project {project.slug} is {project.protocol}, "
        "whose protocol brings no judging_module"
    )


def _judge_runs(project: Project, release: Release | None) -> dict[str, list[InferenceJob]]:
    """judge name -> its finished jobs on the release (evaluations and imports), oldest first."""
    jobs = (
        InferenceJob.objects.filter(
            project=project, release=release, status=JobStatus.FINISHED, mode__in=[JobMode.EVALUATE, JobMode.IMPORTED]
        )
        .select_related("endpoint")
        .order_by(F("finished_at").asc(nulls_first=True), "pk")
    )
    out: dict[str, list[InferenceJob]] = defaultdict(list)
    for job in jobs:
        out[selectors.job_name(job)].append(job)
    return dict(sorted(out.items()))


def build(project: Project, *, release_version: str | None = None) -> dict[str, Any]:
    """The report of the module docstring (without ``ranking_comparison``). NotPairwise for a
    project whose protocol has no pairwise judges; Release.DoesNotExist for an unknown release."""
    if not is_pairwise(project):
        raise NotPairwise(not_pairwise_message(project))
    judging = registry.get(project.protocol).judging
    release = selectors.release_for(project, release_version)  # the newest when none is named
    items = selectors.vote_items(project, release)
    keys = {it.key for it in items}
    votes = selectors.votes_by_item(items)
    winners = {it.key: [result.get("winner") for _rater, result in votes.get(it.key, ())] for it in items}
    majority = {key: judging.human_majority(found) for key, found in winners.items()}
    judges, disagreements = [], []
    for name, jobs in _judge_runs(project, release).items():
        runs = [
            judging.run_asks(
                (item, query, answer.value)
                for (item, query), answer in selectors.job_answers(job).items()
                if item in keys
            )
            for job in jobs
        ]
        found = judging.judge_report(runs, majority)
        differ = found["agreement"].pop("disagreements")
        stability = found["stability"]
        if stability is not None:
            stability = {k: v for k, v in stability.items() if k != "variance"}
        judges.append(
            {
                "judge": name,
                "k": found["k"],
                "jobs": [job.pk for job in jobs],
                "prompt_versions": sorted({job.prompt_version for job in jobs if job.prompt_version}),
                "swap_consistency": found["swap_consistency"],
                "position_bias": found["position_bias"],
                "agreement": {**found["agreement"], "disagreements": len(differ)},
                "stability": stability,
                "runs": [{"job": job.pk, **run} for job, run in zip(jobs, found["runs"], strict=True)],
            }
        )
        by_key = {it.key: it for it in items}
        latest = runs[-1]
        for key in differ:
            payload = by_key[key].payload
            disagreements.append(
                {
                    "judge": name,
                    "item": key,
                    "external_id": by_key[key].external_id,
                    **{field: payload.get(field) for field in judging.PAIR_FIELDS},
                    "human": majority[key],
                    "votes": dict(Counter(w for w in winners[key] if w in VERDICT_WORDS)),
                    "judge_verdict": found["verdicts"][key],
                    "asks": latest.get(key, {}),
                }
            )
    return {
        "project": project.slug,
        "release": release.version if release is not None else None,
        "data": _data_words(release_version, release),
        "protocol": project.protocol,
        "items": len(items),
        "with_majority": sum(m is not None for m in majority.values()),
        "judges": judges,
        "disagreements": disagreements,
    }


def _data_words(asked: str | None, release: Release | None) -> str:
    if release is None:
        return "live items (verified or annotated): the project has no release yet"
    if asked is None:
        return f"release {release.version}, the newest"
    return f"release {release.version}"


def report(project: Project, release: str | None) -> dict[str, Any]:
    """``build``, cached per state of the project's data (board_cache)."""
    # "v2": without ?release= the report reads the newest release (v1 read the live items).
    return board_cache.cached("judges", project, release, "v2", lambda: build(project, release_version=release))


def likert_choices(user) -> list[Project]:
    """The projects ``likert`` may name for this caller: rating projects ranking generators in
    which the caller is a researcher."""
    generators = [name for name in registry.names() if registry.get(name).board == "generators"]
    return list(projects_with_role(user, Role.RESEARCHER).filter(protocol__in=generators).order_by("slug"))


def likert_project(user, slug: str) -> Project:
    for project in likert_choices(user):
        if project.slug == slug:
            return project
    raise LikertError(
        f"{LIKERT_PARAMETER}: expected the slug of a video-rating project you are a researcher of, got {slug!r}"
    )


def ranking_comparison(pairs_board: dict[str, Any], likert_board: dict[str, Any]) -> dict[str, Any]:
    """Kendall's τ-b between the pairwise board's headline ratings (its protocol's first ranking
    metric) and the Likert board's headline scores of the models ranked on both boards (rows
    without a value are left out). ``pairs_release`` and ``pairs_label`` name the pairwise board's
    release and its protocol; the release is also under ``<protocol>_release``, the name the JSON
    was published with, and the ratings stay ``systems[].rating``."""
    protocol = likert_board["protocol"]
    metric = registry.get(protocol).ranking[0]
    pairs_protocol = registry.get(pairs_board["protocol"])
    rated = pairs_protocol.ranking[0]
    rated_scores = {
        r["model"]: float(r["metrics"][rated]) for r in pairs_board["rows"] if r["metrics"].get(rated) is not None
    }
    likert = {
        r["model"]: float(r["metrics"][metric]) for r in likert_board["rows"] if r["metrics"].get(metric) is not None
    }
    common = sorted(set(rated_scores) & set(likert), key=lambda m: (-rated_scores[m], m))
    out: dict[str, Any] = {
        "pairs_release": pairs_board.get("release"),
        "pairs_label": pairs_protocol.label,
        f"{pairs_board['protocol']}_release": pairs_board.get("release"),
        "likert_project": likert_board["project"],
        "likert_release": likert_board.get("release"),
        "metric": metric,
        "metric_name": metric_names.metric_name(protocol, metric),
        "systems": [{"model": m, "rating": rated_scores[m], "likert": likert[m]} for m in common],
        "n": len(common),
        "kendall_tau_b": pairs_protocol.judging.kendall_tau(
            [rated_scores[m] for m in common], [likert[m] for m in common]
        ),
    }
    out["tau_intervals"] = tau_intervals(
        [_row_sd(pairs_board, m, rated) for m in common],
        [_row_sd(likert_board, m, metric) for m in common],
        [rated_scores[m] for m in common],
        [likert[m] for m in common],
    )
    if len(common) < MIN_SYSTEMS:
        out["warning"] = (
            f"only {len(common)} models are ranked on both boards: a τ over fewer than {MIN_SYSTEMS} systems "
            "moves a lot with one model more or less; read it with its two-way interval (systems resampled)"
        )
    return out


def _row_sd(board: dict[str, Any], model: str, metric: str) -> float | None:
    """The sampling sd of a row's ``metric``: its clustered standard error, else its plain one, else
    its 95 % interval's half-width / 1.96; None when the row has none of them."""
    row = next(r for r in board["rows"] if r["model"] == model)
    for errors in ("se_clustered", "se"):
        value = (row.get(errors) or {}).get(metric)
        if value is not None:
            return float(value)
    ci = (row.get("ci") or {}).get(metric)
    return None if not ci else (float(ci[1]) - float(ci[0])) / (2 * 1.959964)


def tau_intervals(
    pairs_sd: list[float | None],
    likert_sd: list[float | None],
    rated_scores: list[float],
    likert: list[float],
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> dict[str, Any]:
    """{"ci", "ci_two_way", "n_boot", "without_error"}: percentile intervals of τ-b over ``n_boot``
    redraws of the systems' scores, each score drawn from N(value, sd²) on its own board (a system
    without an sd keeps its value; ``without_error`` counts those scores), and, for "ci_two_way",
    the systems also drawn with replacement (correlation.system_draws). None where τ is undefined
    in too many redraws (fewer than three systems)."""
    n = len(rated_scores)
    rng = np.random.default_rng([seed, 2])
    sd_a = np.array([0.0 if s is None else s for s in pairs_sd], dtype=float)
    sd_l = np.array([0.0 if s is None else s for s in likert_sd], dtype=float)
    h = np.asarray(rated_scores, dtype=float)[None, :] + rng.standard_normal((n_boot, n)) * sd_a
    j = np.asarray(likert, dtype=float)[None, :] + rng.standard_normal((n_boot, n)) * sd_l
    drawn = correlation.system_draws(n, n_boot, seed)
    items_only = correlation._tau_over_drawn_generators(h, j, np.ones((n_boot, n), dtype=np.int64))
    two_way = correlation._tau_over_drawn_generators(h, j, drawn)
    return {
        "ci": percentile_ci(items_only) if n >= 3 else None,
        "ci_two_way": percentile_ci(two_way) if n >= 3 else None,
        "n_boot": n_boot,
        "without_error": sum(s is None for s in pairs_sd) + sum(s is None for s in likert_sd),
    }


def _comparison(user, project: Project, release: str | None, slug: str) -> dict[str, Any]:
    other = likert_project(user, slug)
    try:
        pairs_board = board_cache.board(project, release)  # the newest release when None, as the report
        likert_board = board_cache.board(other, None)
    except leaderboard.LeaderboardError as exc:
        raise LikertError(f"{LIKERT_PARAMETER}: {exc}") from None
    return ranking_comparison(pairs_board, likert_board)


# --- the page and the API ---------------------------------------------------------------------


def _media_of(judging: Any, keys: list[int]) -> dict[int, dict[str, dict | None]]:
    """item pk -> {side: media entry (url, kind)} of the pairs' outputs, the sides as the protocol's
    judging module finds them (``side_media``)."""
    items = list(Item.objects.filter(pk__in=keys).only("pk", "media"))
    urls = media_urls_for(items=items)
    return {
        item.pk: {side: urls.get(sha) if sha else None for side, sha in judging.side_media(item.media or {}).items()}
        for item in items
    }


@login_required
def judges_page(request, slug: str):
    """The report as a page; a ``likert`` it cannot compare with re-renders it with a 400 naming it."""
    project = get_project_for(request.user, slug, Role.RESEARCHER)
    release = request.GET.get("release") or None
    likert = request.GET.get(LIKERT_PARAMETER) or ""
    context: dict[str, Any] = {
        "project": project,
        "release": release,
        "pairwise": is_pairwise(project),
        # a board ranking generators by ratings: its judges are on the correlation page
        "rates_generators": registry.get(project.protocol).board == "generators",
    }
    status = 200
    other = None
    if likert:
        try:
            other = likert_project(request.user, likert)
        except LikertError as exc:
            context["likert_error"] = str(exc)
            status = 400
    if context["pairwise"]:
        try:
            found = report(project, release)
        except Release.DoesNotExist:
            raise Http404("No such release.")
        shown = found["disagreements"][:PAGE_DISAGREEMENTS]
        media = _media_of(registry.get(project.protocol).judging, [d["item"] for d in shown])
        context.update(
            report=found,
            disagreements=[
                {
                    **d,
                    "human_word": VERDICT_WORDS.get(d["human"], d["human"]),
                    "judge_word": VERDICT_WORDS.get(d["judge_verdict"], d["judge_verdict"]),
                    "asks_words": ", ".join(
                        f"{key[-2]} first: {VERDICT_WORDS.get(v, 'no answer') if v else 'no answer'}"
                        for key, v in sorted(d["asks"].items())
                    ),
                    "media": media.get(d["item"], {}),
                }
                for d in shown
            ],
            more=len(found["disagreements"]) - len(shown),
            releases=list(project.releases.order_by("-created_at").values_list("version", flat=True)),
            likert_choices=likert_choices(request.user),
            likert=likert,
        )
        if other is not None:
            try:
                context["comparison"] = _comparison(request.user, project, release, other.slug)
            except LikertError as exc:
                context["likert_error"] = str(exc)
                status = 400
    return render(request, "evaluation/judges.html", context, status=status)


class JudgesApi(APIView):
    class InputSerializer(serializers.Serializer):
        release = serializers.CharField(required=False, allow_blank=True)
        likert = serializers.CharField(
            required=False,
            allow_blank=True,
            help_text="the slug of a video-rating project you are a researcher of: adds ranking_comparison, "
            "Kendall's tau-b between this board's ratings and that board's headline scores of the same models",
        )

    @extend_schema(
        parameters=[InputSerializer],
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT)},
        summary="MLLM judges of a pairwise project: swap consistency, position bias, stability, agreement with "
        "the human majority (accuracy, Cohen's kappa) and the pairs where they differ",
    )
    def get(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        release = params.validated_data.get("release") or None
        likert = params.validated_data.get("likert") or None
        try:
            other = likert_project(request.user, likert) if likert is not None else None
            found = report(project, release)
            if other is not None:
                found = {**found, "ranking_comparison": _comparison(request.user, project, release, other.slug)}
        except LikertError as exc:
            raise serializers.ValidationError({LIKERT_PARAMETER: [str(exc).removeprefix(f"{LIKERT_PARAMETER}: ")]})
        except NotPairwise as exc:
            raise Http404(str(exc))
        except Release.DoesNotExist:
            raise Http404("No such release.")
        return Response(found)
