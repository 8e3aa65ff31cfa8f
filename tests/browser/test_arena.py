"""The arena in Chromium: an annotator compares two clips played together, votes with the keyboard
once both played through, and the vote is stored about a and b; a researcher then reads the board
of ratings with their intervals. The page never names a model."""

from __future__ import annotations

import json

import pytest

from annotation.importing import annotations_import
from annotation.models import Annotation, Role
from protocols.arena import workflow
from tests.protocols.arena.helpers import MODEL_NAMES, clips, make_pair

from .work_helpers import served_media_root, shot, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ALPHA, BETA, GAMMA = MODEL_NAMES


@pytest.fixture
def arena(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    voter, researcher = make_user("voter"), make_user("researcher")
    project = make_project(
        "duel",
        "arena",
        members={voter: Role.ANNOTATOR, researcher: Role.RESEARCHER},
        annotations_per_item=1,
        option_seed=5,
        name="Duel",
    )
    media = clips(tmp_path)
    ours = make_pair(project, "ours", media, models=(ALPHA, BETA))
    # Votes made elsewhere on other items, so the board has three models and finite ratings.
    lines = []
    pairs = [(ALPHA, BETA)] * 6 + [(BETA, GAMMA)] * 6 + [(GAMMA, ALPHA)] * 6
    wins = ["a", "a", "a", "b", "tie", "a"] + ["a", "b", "a", "tie", "b", "a"] + ["b", "b", "a", "b", "both_bad", "b"]
    for i, (models, winner) in enumerate(zip(pairs, wins, strict=True)):
        make_pair(project, f"elsewhere-{i}", media, models=models)
        lines.append({"item": f"elsewhere-{i}", "rater": "study", "winner": winner})
    path = tmp_path / "votes.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    annotations_import(project=project, path=path)
    return project, voter, ours


def test_vote_with_the_keyboard_then_read_the_board(page, login, live_server, arena):
    project, voter, ours = arena
    login(page, "voter")
    page.goto(f"{live_server.url}/projects/duel/annotate/")
    wait_task(page)
    html = page.content()
    for name in MODEL_NAMES:
        assert name not in html
    assert page.locator("video").count() == 2
    shown = workflow.shown_order(project.option_seed, str(ours.pk), str(voter.pk))
    page.wait_for_function("() => [...document.querySelectorAll('video')].every(v => v.duration > 0.5)")

    # Before both played through, no vote: the buttons are disabled and the keys say why.
    assert page.locator("[data-vote]:disabled").count() == 8
    page.keyboard.press("ArrowLeft")
    assert page.locator(".notice").filter(has_text="Watch both videos through").count() == 1
    assert page.locator("[data-vote].chosen").count() == 0

    # One key plays both; they end together and unlock the votes.
    page.keyboard.press("Space")
    page.wait_for_function("() => [...document.querySelectorAll('video')].every(v => !v.paused)", timeout=5_000)
    page.wait_for_selector("[data-workbench][data-watched]", timeout=10_000)
    assert page.locator("[data-vote]:disabled").count() == 0

    page.keyboard.press("ArrowLeft")  # overall: the left output
    assert page.locator(".criterion.focused").get_attribute("data-criterion") == "state_change"
    page.keyboard.press("t")  # the state change: a tie
    assert page.locator('[data-criterion="overall"] [data-vote="left"]').get_attribute("aria-pressed") == "true"
    assert page.locator('[data-criterion="state_change"] [data-vote="tie"]').get_attribute("aria-pressed") == "true"
    shot(page, "arena")
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("[data-queue-empty]", timeout=15_000)
    stored = Annotation.objects.get(item=ours)
    assert stored.result == {"winner": shown[0], "criteria": {"state_change": "tie"}, "shown": shown}

    # The researcher's board: three models rated, each with its interval.
    page.context.clear_cookies()
    login(page, "researcher")
    page.goto(f"{live_server.url}/projects/duel/leaderboard/")
    rows = page.locator("#panel-main tbody tr")
    assert sorted(r.get_attribute("data-model") for r in rows.all()) == sorted(MODEL_NAMES)
    # The rating column (after model, rank, n and parse failures) is the headline, with its interval.
    assert page.locator('#panel-main th[data-key="rating"]').get_attribute("aria-sort") == "descending"
    for row in rows.all():
        cell = row.locator("td:nth-child(5)")
        value = float(cell.get_attribute("data-value"))
        lo, hi = (float(x) for x in cell.locator(".ci:not(.se)").inner_text().strip("[]").split(","))
        assert lo < value < hi
    shot(page, "arena-board")
