"""What the evaluation pages and API read for a request: the cached board or correlation report
(board_cache), an unknown release or a refused board as 404, and the shared query parameters
(an unknown ranking is the caller's 400: ranking.UnknownRanking)."""

from __future__ import annotations

from django.http import Http404

from annotation.models import Release

from . import board_cache, correlation, leaderboard, ranking, vote_intervals


def board_or_404(
    project,
    release: str | None,
    judge: str | None,
    rank_by: str | None = None,
    intervals: vote_intervals.IntervalChoice = vote_intervals.DEFAULT,
):
    try:
        return board_cache.board(project, release, judge, rank_by, intervals)
    except Release.DoesNotExist:
        raise Http404("No such release.")
    except leaderboard.LeaderboardError as exc:
        raise Http404(str(exc))


def report_or_404(project, release: str | None):
    try:
        return board_cache.report(project, release)
    except Release.DoesNotExist:
        raise Http404("No such release.")
    except correlation.CorrelationError as exc:
        raise Http404(str(exc))


def wants_details(request) -> bool:
    return request.GET.get("details") in ("1", "true", "yes")


def release_and_judge(request):
    return request.GET.get("release") or None, request.GET.get("judge") or None


def interval_choice(request, project) -> vote_intervals.IntervalChoice:
    """The interval a votes board shows (?ci=, ?rounds=); vote_intervals.IntervalChoiceError (a 400
    for the caller) for a choice the board cannot give."""
    return vote_intervals.parse(
        project.protocol,
        request.GET.get(vote_intervals.CI_PARAMETER),
        request.GET.get(vote_intervals.ROUNDS_PARAMETER),
    )


def rank_by(request, project) -> str:
    """The ranking the request picks (?rank_by=), the protocol's default when none; raises
    ranking.UnknownRanking (a 400 for the caller) for a name the protocol has no ranking by."""
    return ranking.resolve(project.protocol, request.GET.get(ranking.PARAMETER))
