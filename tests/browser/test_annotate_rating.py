"""Video rating page in Chromium: watch-through gate, frame step, loop, rubric, keyboard scoring.

The test videos are 1 s at 10 fps (work_helpers.mp4), so one frame is 0.1 s.
"""

import pytest

from annotation.models import Annotation, Role

from .work_helpers import make_item, mp4, served_media_root, shot, store, wait_saved, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def rating_project(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    ann = make_user("rater")
    project = make_project(
        "osc",
        "oscbench",
        members={ann: Role.ANNOTATOR},
        name="OSC videos",
        settings={"rubric": {"osc_accuracy": "Score 5 only when the tomato ends fully sliced."}},
    )
    video = store(mp4(tmp_path / "gen.mp4", seconds=1), "video")
    items = [
        make_item(
            project,
            f"gen-{i}",
            {
                "video": "gen.mp4",
                "prompt": f"A hand slices a tomato on a board ({i})",
                "generator": "TRUTH-gen",
                "scenario": "regular",
                "action": "slice",
                "action_category": "cutting",
                "object": "tomato",
                "object_category": "vegetable",
            },
            {"video": video},
        )
        for i in range(2)
    ]
    return project, items


def focused_criterion(page):
    return page.eval_on_selector(".criterion.focused", "el => el.dataset.criterion")


def test_rating_keyboard_and_watch_gate(page, login, live_server, rating_project):
    project, items = rating_project
    login(page, "rater")
    page.goto(f"{live_server.url}/projects/osc/annotate/")
    first = wait_task(page)
    assert page.inner_text("[data-prompt]") == "A hand slices a tomato on a board (0)"
    assert "TRUTH-gen" not in page.content()
    page.wait_for_function("() => document.querySelector('video').duration > 0.5")
    assert page.is_disabled("[data-submit]")

    # N/A exists only for subject and scene.
    assert [
        r
        for r in page.eval_on_selector_all(
            ".criterion", "els => els.map(e => e.dataset.criterion + ':' + !!e.querySelector('input[value=na]'))"
        )
    ] == [
        "subject:true",
        "object:false",
        "action:false",
        "osc_accuracy:false",
        "osc_consistency:false",
        "scene:true",
        "realism:false",
        "aesthetics:false",
    ]
    assert focused_criterion(page) == "subject"
    page.keyboard.press("0")  # subject: N/A, moves on
    assert focused_criterion(page) == "object"
    page.keyboard.press("0")  # object allows no N/A: nothing happens
    assert focused_criterion(page) == "object"
    for key in "45336":  # 6 is no score: ignored
        page.keyboard.press(key)
    assert focused_criterion(page) == "scene"
    page.keyboard.press("0")
    page.keyboard.press("2")
    page.keyboard.press("4")
    page.keyboard.press("ArrowUp")
    assert focused_criterion(page) == "realism"
    page.keyboard.press("3")
    assert focused_criterion(page) == "aesthetics"
    # The arrows adjust the focused criterion in place (a typed score moves on).
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert focused_criterion(page) == "realism" and page.is_checked("input[name=score-realism][value='5']")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert focused_criterion(page) == "realism" and page.is_checked("input[name=score-realism][value='3']")

    # Rubric one key away, with the project's own wording.
    page.keyboard.press("r")
    assert page.is_visible("[data-rubric-dialog]")
    assert "fully sliced" in page.inner_text("[data-rubric-dialog] [data-rubric=osc_accuracy]")
    page.keyboard.press("Escape")
    assert not page.is_visible("[data-rubric-dialog]")

    # Frame stepping by the asset's own frame rate (10 fps: 0.1 s), and loop.
    page.keyboard.press(".")
    page.wait_for_function("() => document.querySelector('video').currentTime > 0")
    assert abs(page.evaluate("document.querySelector('video').currentTime") - 0.1) < 0.01
    page.keyboard.press(",")
    page.wait_for_function("() => document.querySelector('video').currentTime === 0")
    page.keyboard.press("l")
    assert page.evaluate("document.querySelector('video').loop") is True
    page.keyboard.press("l")
    assert page.evaluate("document.querySelector('video').loop") is False

    # Dragging the scrubber to the end is not watching: Submit stays disabled.
    for t in (0.3, 0.6, 0.9, 1.0):
        page.evaluate("t => { const v = document.querySelector('video'); v.currentTime = Math.min(t, v.duration); }", t)
        page.wait_for_function("() => !document.querySelector('video').seeking")
    page.wait_for_timeout(300)
    assert not page.locator("[data-workbench][data-watched]").count()
    assert page.is_disabled("[data-submit]")
    # Nor is playing only the second half to the end.
    page.evaluate("() => { const v = document.querySelector('video'); v.currentTime = v.duration / 2; v.play(); }")
    page.wait_for_function("() => document.querySelector('video').ended", timeout=10_000)
    page.wait_for_timeout(300)
    assert not page.locator("[data-workbench][data-watched]").count()
    assert page.is_disabled("[data-submit]")
    assert "watch the whole video" in page.inner_text("[data-watched]")

    # Submitting before the video played through is refused in the page.
    page.keyboard.press("Control+Enter")
    assert page.locator(".notice").filter(has_text="Watch the whole video").count() == 1
    assert Annotation.objects.count() == 0
    # Playing it through (play restarts an ended video from the start) unlocks Submit.
    page.keyboard.press("Space")
    page.wait_for_selector("[data-workbench][data-watched]", timeout=10_000)
    assert page.is_enabled("[data-submit]")
    shot(page, "rating")
    page.keyboard.press("Control+Enter")
    second = wait_task(page, first)
    a = Annotation.objects.get(item=items[0])
    assert a.result == {
        "scores": {
            "subject": None,
            "object": 4,
            "action": 5,
            "osc_accuracy": 3,
            "osc_consistency": 3,
            "scene": None,
            "realism": 3,
            "aesthetics": 4,
        }
    }

    # Second video: half the scores and the watched mark survive a reload.
    page.wait_for_function("() => document.querySelector('video').duration > 0.5")
    page.evaluate("document.querySelector('video').playbackRate = 4")
    page.keyboard.press("Space")
    page.wait_for_selector("[data-workbench][data-watched]", timeout=10_000)
    for key in "5555":
        page.keyboard.press(key)
    wait_saved(page)
    page.reload()
    assert wait_task(page) == second
    assert page.is_checked("input[name=score-osc_accuracy][value='5']")
    page.wait_for_selector("[data-workbench][data-watched]")
    assert focused_criterion(page) == "osc_consistency"
    for key in "1111":
        page.keyboard.press(key)
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("[data-queue-empty]")
    assert Annotation.objects.get(item=items[1]).result == {
        "scores": {
            "subject": 5,
            "object": 5,
            "action": 5,
            "osc_accuracy": 5,
            "osc_consistency": 1,
            "scene": 1,
            "realism": 1,
            "aesthetics": 1,
        }
    }


def test_single_text_rubric_is_one_click_away(page, login, live_server, settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    ann = make_user("rater2")
    text = "Judge only what the video shows.\n\nA 3 means acceptable with visible flaws; keep 5 for flawless."
    project = make_project("osc1", "oscbench", members={ann: Role.ANNOTATOR}, settings={"rubric": text})
    video = store(mp4(tmp_path / "gen.mp4", seconds=1), "video")
    make_item(project, "gen-x", {"video": "gen.mp4", "prompt": "A hand folds a towel"}, {"video": video})
    login(page, "rater2")
    page.goto(f"{live_server.url}/projects/osc1/annotate/")
    wait_task(page)
    assert not page.is_visible("[data-rubric-dialog]")

    page.click("[data-rubric-open]")

    assert page.is_visible("[data-rubric-text]")
    assert page.locator("[data-rubric-text] p").all_inner_texts() == [
        "Judge only what the video shows.",
        "A 3 means acceptable with visible flaws; keep 5 for flawless.",
    ]
    # The per-criterion reminders follow the project's text.
    assert "Would the video pass for real footage" in page.inner_text("[data-rubric-dialog] [data-rubric=realism]")
