"""Read-only API for leaderboards and human-judge correlation (same JSON as the commands; ?fmt=csv,
latex (and markdown for leaderboards) give the tables the page downloads, as text)."""

from __future__ import annotations

from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Release, Role
from annotation.permissions import get_project_for

from . import leaderboard, paired, power, ranking, tables, vote_intervals
from .board_access import board_or_404, report_or_404, wants_details
from .views import CONTENT_TYPES

LEADERBOARD_FORMATS = ("json", "csv", "latex", "markdown")
CORRELATION_FORMATS = ("json", "csv", "latex")


def _responses(formats: tuple[str, ...]) -> dict:
    return {
        (200, CONTENT_TYPES[fmt][0]): OpenApiResponse(OpenApiTypes.OBJECT if fmt == "json" else OpenApiTypes.STR)
        for fmt in formats
    }


def _text(body: str, fmt: str) -> HttpResponse:
    return HttpResponse(body, content_type=f"{CONTENT_TYPES[fmt][0]}; charset=utf-8")


class LeaderboardApi(APIView):
    class InputSerializer(serializers.Serializer):
        release = serializers.CharField(required=False, allow_blank=True)
        judge = serializers.CharField(required=False, allow_blank=True)
        rank_by = serializers.CharField(
            required=False,
            allow_blank=True,
            help_text="the ranking: the protocol's headline metric by default; video rating also criteria_mean "
            "(the mean of the eight criteria, as the paper's Figure 3)",
        )
        fmt = serializers.ChoiceField(choices=LEADERBOARD_FORMATS, default="json", required=False)
        ci = serializers.CharField(
            required=False,
            allow_blank=True,
            help_text="a board rated from pairwise votes: the ratings' interval, sandwich (default: cluster-robust, "
            "votes clustered by the protocol's cluster key) or bootstrap (multinomial redraws of the battle counts)",
        )
        rounds = serializers.CharField(
            required=False,
            allow_blank=True,
            help_text=f"with ci=bootstrap: the bootstrap rounds, {vote_intervals.MIN_ROUNDS} to "
            f"{vote_intervals.MAX_ROUNDS} (default 1000)",
        )
        baseline = serializers.CharField(
            required=False,
            allow_blank=True,
            help_text='a row\'s model name: adds "paired", every other row compared with it on the ranking metric '
            "(difference with a paired bootstrap interval, McNemar or paired t p, Holm-adjusted); json and markdown",
        )

    @extend_schema(
        parameters=[InputSerializer],
        responses=_responses(LEADERBOARD_FORMATS),
        summary="Leaderboard of a project ({project, release, protocol, rows}; ?details=1 adds ranks and breakdowns)",
    )
    def get(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        try:
            rank_by = ranking.resolve(project.protocol, params.validated_data.get("rank_by") or None)
        except ranking.UnknownRanking as exc:
            raise serializers.ValidationError({ranking.PARAMETER: [str(exc)]})
        try:
            intervals = vote_intervals.parse(
                project.protocol, params.validated_data.get("ci"), params.validated_data.get("rounds")
            )
        except vote_intervals.IntervalChoiceError as exc:
            raise serializers.ValidationError({exc.field: [exc.message]})
        judge = params.validated_data.get("judge") or None
        baseline = params.validated_data.get("baseline") or None
        if baseline is not None and params.validated_data["fmt"] not in ("json", "markdown"):
            raise serializers.ValidationError(
                {paired.PARAMETER: [f"comes with fmt json or markdown, not {params.validated_data['fmt']}"]}
            )
        board = board_or_404(project, params.validated_data.get("release") or None, judge, rank_by, intervals)
        if baseline is not None:
            try:
                board = paired.with_comparisons(project, board, judge=judge, baseline=baseline)
            except paired.UnknownBaseline as exc:
                raise serializers.ValidationError({paired.PARAMETER: [str(exc)]})
        if params.validated_data["fmt"] != "json":
            fmt = params.validated_data["fmt"]
            return _text(tables.render_leaderboard(board, fmt, details=wants_details(request)), fmt)
        return Response(board if wants_details(request) else tables.leaderboard_public(board))


class CorrelationApi(APIView):
    class InputSerializer(serializers.Serializer):
        release = serializers.CharField(required=False, allow_blank=True)
        fmt = serializers.ChoiceField(choices=CORRELATION_FORMATS, default="json", required=False)

    @extend_schema(
        parameters=[InputSerializer],
        responses=_responses(CORRELATION_FORMATS),
        summary="Human-judge correlation of a video-rating project ({criteria, judges, human})",
    )
    def get(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        report = report_or_404(project, params.validated_data.get("release") or None)
        if params.validated_data["fmt"] != "json":
            fmt = params.validated_data["fmt"]
            return _text(tables.render_correlation(report, fmt, details=wants_details(request)), fmt)
        return Response(report if wants_details(request) else tables.correlation_public(report))


POWER_FORMATS = ("json", "markdown")


class PowerApi(APIView):
    class InputSerializer(serializers.Serializer):
        release = serializers.CharField(
            required=False, allow_blank=True, help_text="the pilot release (default: the newest)"
        )
        judge = serializers.CharField(required=False, allow_blank=True, help_text="video rating: a judge's scores")
        half_width = serializers.CharField(
            required=False,
            allow_blank=True,
            help_text="target half-width of the 95 % interval, in the board's points (default 2 percentage points, "
            "0.02 on a 0-1 board)",
        )
        difference = serializers.CharField(
            required=False,
            allow_blank=True,
            help_text="with baseline: the difference to detect at 80 % power (default 5 points, 0.05 on a 0-1 board)",
        )
        metric = serializers.CharField(
            required=False, allow_blank=True, help_text="the metric of the paired plan and markdown (default: headline)"
        )
        baseline = serializers.CharField(
            required=False, allow_blank=True, help_text="a row's model name: adds paired units needed against it"
        )
        fmt = serializers.ChoiceField(choices=POWER_FORMATS, default="json", required=False)

    @extend_schema(
        parameters=[InputSerializer],
        responses=_responses(POWER_FORMATS),
        summary="Items (and raters, and paired units) needed for a target precision, from the board as a pilot",
    )
    def get(self, request, slug: str):
        project = get_project_for(request.user, slug, Role.RESEARCHER)
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        release, judge = data.get("release") or None, data.get("judge") or None
        try:
            asked = power.parse(project.protocol, data)
            plan = power.cached_plan(project, asked, release_version=release, judge=judge)
        except power.PowerInputError as exc:  # the field names itself once, as the key
            raise serializers.ValidationError({exc.field: [str(exc).removeprefix(f"{exc.field}: ")]})
        except paired.UnknownBaseline as exc:
            raise serializers.ValidationError({paired.PARAMETER: [str(exc)]})
        except Release.DoesNotExist:
            raise Http404("No such release.")
        except leaderboard.LeaderboardError as exc:
            raise Http404(str(exc))
        if data["fmt"] == "markdown":
            return _text(power.render_markdown(plan), "markdown")
        return Response(plan)
