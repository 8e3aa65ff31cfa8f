"""What the evaluation pages and API read for a request: the cached board or correlation report
(board_cache), an unknown release or a refused board as 404, and the shared query parameters."""
from __future__ import annotations

from django.http import Http404

from annotation.models import Release

from . import board_cache, correlation, leaderboard


def board_or_404(project, release: str | None, judge: str | None):
    try:
        return board_cache.board(project, release, judge)
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
