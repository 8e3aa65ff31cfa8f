"""The demo's arena project, made by the demo command's own steps: sample items, the raters' votes
imported, release v1 frozen, and a board of the three generators with intervals, ordered as their
made-up strengths are."""

from __future__ import annotations

import pytest

from annotation.management.commands.demo import demo_projects, fill, make_project, make_users
from annotation.models import Annotation, Release
from evaluation import leaderboard
from protocols.arena import samples

pytestmark = pytest.mark.django_db


def test_the_demo_arena_has_votes_and_a_board(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    (slug, protocol, demo) = next(p for p in demo_projects() if p[1] == "arena")
    project = make_project(slug, protocol, demo, make_users())
    fill(project, demo, tmp_path / "demo")
    verified = demo.files["verified.jsonl"][0]
    assert Annotation.objects.filter(item__project=project).count() == len(verified) * len(samples.RATERS)
    assert Release.objects.filter(project=project, version="v1").exists()
    for version in (None, "v1"):
        board = leaderboard.build(project, release_version=version)
        rows = board["rows"]
        assert [row["model"] for row in rows] == ["gen-0", "gen-1", "gen-2"]  # the strengths' order
        for row in rows:
            lo, hi = row["ci"]["rating"]
            assert lo < row["metrics"]["rating"] < hi
            assert row["metrics"]["battles"] == 2 * len(verified)  # in 2 of the 3 pairs: 16 items, 3 raters each
        assert "criterion:state_change:rating" in rows[0]["breakdowns"]
