"""The leaderboard cache: leaderboards and correlation reports as the pages serve them, computed
once per state of their data and cached (Redis when configured, shared by web processes and
workers).

The key is a fingerprint of everything a board depends on (selectors.data_fingerprint), so a
new job, prediction import, annotation or verification gives a new key and a stale board is
never served. When a job finishes, a worker pre-computes its project's boards (`warm`, run by
tasks.warm_boards, which settings.STATELAB_JOB_FINISHED_TASKS names) so the first page view does
not pay for scoring.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from django.core.cache import cache

from annotation.models import Project, Release
from protocols import registry

from . import correlation, leaderboard, ranking, rater_exclusion, selectors, vote_intervals
from .scoring import answer_sets

CACHE_SECONDS = 24 * 3600  # a key never goes stale (it names the data); this only bounds memory


def cached(kind: str, project: Project, release: str | None, extra: str, build: Callable[[], Any]) -> Any:
    raw = f"{kind}:{extra}:{selectors.data_fingerprint(project, release)}"
    key = "eval:" + hashlib.sha256(raw.encode()).hexdigest()
    value = cache.get(key)
    if value is None:
        value = build()
        cache.set(key, value, CACHE_SECONDS)
    return value


def board(
    project: Project,
    release: str | None,
    judge: str | None = None,
    rank_by: str | None = None,
    intervals: vote_intervals.IntervalChoice = vote_intervals.DEFAULT,
) -> dict:
    """The board in the order of ranking ``rank_by`` (the protocol's default when None;
    ranking.UnknownRanking for a name the protocol has not), a votes board with the interval
    ``intervals`` picks (vote_intervals.py; part of the key)."""
    protocol = project.protocol
    rank_by = ranking.resolve(protocol, rank_by)
    # The ordering and the columns are part of the key: a board cached in another order or with
    # other columns (an older definition, still in Redis after a deploy) is never served.
    extra = f"{judge}:{ranking.signature(protocol, rank_by)}:cols:{','.join(answer_sets.main_keys(protocol))}:se"
    # The raters left out of a pairwise board (project settings, not in the data fingerprint): a
    # change of the list is a new key, so the board is fitted again at once.
    extra += f":screen:excluded={json.dumps(rater_exclusion.excluded_raters(project))}"
    extra += f":ci={intervals.signature()}"
    if rank_by == ranking.default_choice(protocol):
        return cached(
            "lb",
            project,
            release,
            extra,
            lambda: leaderboard.build(project, release_version=release, judge=judge, intervals=intervals),
        )
    # Another ranking: the default board's rows, scored once, in that ranking's order.
    return cached(
        "lb",
        project,
        release,
        extra,
        lambda: ranking.reordered(board(project, release, judge, None, intervals), rank_by),
    )


def report(project: Project, release: str | None) -> dict:
    # "two-way": reports cached before the two-way system intervals existed are never served.
    return cached("corr", project, release, "two-way", lambda: correlation.build(project, release_version=release))


def warm(project_id: int, release_id: int | None) -> list[str]:
    """Compute and cache the boards a finished job changes: its release's and the live one."""
    project = Project.objects.get(pk=project_id)
    versions: list[str | None] = [None]
    if release_id is not None:
        versions.insert(0, Release.objects.get(pk=release_id).version)
    done = []
    for version in versions:
        board(project, version)
        done.append(f"leaderboard {version or 'live'}")
        if registry.get(project.protocol).board == "generators":  # human–judge correlation: ratings only
            try:
                report(project, version)
                done.append(f"correlation {version or 'live'}")
            except correlation.CorrelationError:
                pass  # no human ratings yet: the page says so
    return done
