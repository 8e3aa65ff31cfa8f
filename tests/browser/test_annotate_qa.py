"""Blind QA pages in Chromium: image pairs (choice, count, set) and video pairs (several answers).

Besides the keyboard flow, these tests check that no ground truth or metadata reaches the
browser: not in the HTML, not in any API response the annotator's page receives.
"""
import json

import pytest

from annotation.models import Annotation, Role

from .work_helpers import capture_api, make_item, mp4, png, served_media_root, shot, store, wait_saved, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECRET = "TRUTH-"  # every truth/metadata value below carries it


def assert_blind(page, responses):
    assert SECRET not in page.content()
    items_seen = 0
    for url, status, body in responses:
        assert SECRET not in body, url
        if "/tasks/next/" in url and status == 200:
            item = json.loads(body)["item"]
            assert not {"answer", "subtask", "scene", "context", "capabilities", "hallucination"} & set(item)
            items_seen += 1
    assert items_seen >= 2


@pytest.fixture
def image_qa(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    ann = make_user("qa1")
    project = make_project("vt", "visualtrans", members={ann: Role.ANNOTATOR}, name="VisualTrans check")
    initial = store(png(tmp_path / "i.png", color=(230, 200, 160), shape=(60, 60, 140, 160)), "image")
    final = store(png(tmp_path / "f.png", color=(230, 200, 160), shape=(160, 60, 300, 120)), "image")
    media = {"images": [initial, final]}
    base = {"images": ["i.png", "f.png"], "subtask": "TRUTH-causal", "scene": "TRUTH-kitchen"}
    items = [
        make_item(project, "q-choice", {**base, "question": "Which tool made the change?", "format": "choice",
                                        "options": ["a knife", "a spoon", "a fork"], "answer": "C"}, media),
        make_item(project, "q-count", {**base, "question": "How many boards are visible at the end?", "format": "count",
                                       "answer": 3}, media),
        make_item(project, "q-set", {**base, "question": "Which objects moved?", "format": "set",
                                     "answer": ["TRUTH-board", "TRUTH-bowl"]}, media),
    ]
    return project, items


def test_qa_images_keyboard_and_blind(page, login, live_server, image_qa):
    project, items = image_qa
    responses = []
    capture_api(page, responses)
    login(page, "qa1")
    page.goto(f"{live_server.url}/projects/vt/annotate/")
    first = wait_task(page)
    # While the annotator works, the page already holds the next task and loads its media.
    preloaded = page.wait_for_function("() => window.statelabWorkbench.preloaded && window.statelabWorkbench.preloaded.task").json_value()
    assert preloaded != int(first)
    assert page.inner_text(".question") == "Which tool made the change?"
    assert page.locator("figcaption").all_inner_texts() == ["Initial", "Final"]
    # One correct option: radios; keys pick options and flags; Enter submits.
    assert page.locator("input[name=answer][type=radio]").count() == 3
    page.keyboard.press("a")
    page.keyboard.press("b")
    page.keyboard.press("u")
    assert page.is_checked("input[name=answer][value=B]") and not page.is_checked("input[name=answer][value=A]")
    shot(page, "qa")
    page.keyboard.press("Enter")
    second = wait_task(page, first)
    assert int(second) == preloaded
    # Its hold is renewed in the background once it is shown.
    for _ in range(50):
        if any(url.endswith(f"/api/tasks/{preloaded}/renew/") for url, _, _ in responses):
            break
        page.wait_for_timeout(100)
    assert any(url.endswith(f"/api/tasks/{preloaded}/renew/") for url, _, _ in responses)
    assert Annotation.objects.get(item=items[0]).result == {"answer": "B", "flags": ["ambiguous"]}

    # Count: a number input, focused; the draft survives a reload.
    assert page.evaluate("document.activeElement.type") == "number"
    page.keyboard.type("4")
    wait_saved(page)
    page.reload()
    assert wait_task(page) == second
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'qa-answer'")
    assert page.input_value("#qa-answer") == "4"
    page.keyboard.press("Enter")
    third = wait_task(page, second)
    assert Annotation.objects.get(item=items[1]).result == {"answer": 4, "flags": []}

    # Set: Enter (or a comma) adds an entry, Backspace on the empty box removes the last one,
    # Enter on the empty box submits.
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'qa-answer'")
    page.keyboard.type("cutting board")
    page.keyboard.press("Enter")
    page.keyboard.type("bowl, spoon")
    page.keyboard.press("Enter")
    assert page.locator(".chip").count() == 3
    page.keyboard.press("Backspace")
    page.keyboard.press("i")  # typing goes into the box, not to the flag shortcut
    page.keyboard.press("Backspace")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-queue-empty]")
    assert Annotation.objects.get(item=items[2]).result == {"answer": ["cutting board", "bowl"], "flags": []}
    assert int(third) != int(second)
    assert_blind(page, responses)


@pytest.fixture
def video_qa(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    ann = make_user("qa2")
    project = make_project("m3", "m3verse", members={ann: Role.ANNOTATOR}, name="M3 pairs")
    before = store(mp4(tmp_path / "before.mp4", pattern="testsrc"), "video")
    after = store(mp4(tmp_path / "after.mp4", pattern="testsrc2"), "video")
    media = {"video_before": before, "video_after": after}
    items = [
        make_item(project, f"m-{i}", {"video_before": "before.mp4", "video_after": "after.mp4",
                                      "question": f"What changed between the clips? ({i})",
                                      "options": ["the colours", "the text", "the layout", "none of the listed"],
                                      "answer": ["A", "C"], "context": "TRUTH-inter", "capabilities": ["TRUTH-attr"],
                                      "hallucination": False}, media)
        for i in range(2)
    ]
    return project, items


def test_qa_video_pair_several_answers(page, login, live_server, video_qa):
    project, items = video_qa
    responses = []
    capture_api(page, responses)
    login(page, "qa2")
    page.goto(f"{live_server.url}/projects/m3/annotate/")
    first = wait_task(page)
    assert page.locator("figure.video figcaption").all_inner_texts() == ["Before", "After"]
    # Both videos are real, playable files.
    page.wait_for_function("() => [...document.querySelectorAll('video')].every(v => v.readyState >= 1 && v.duration > 0.5)")
    # Several correct options: checkboxes, each key toggles.
    assert page.locator("input[name=answer][type=checkbox]").count() == 4
    for key in ("a", "b", "c", "b"):
        page.keyboard.press(key)
    shot(page, "qa_video")
    page.keyboard.press("Enter")
    second = wait_task(page, first)
    assert Annotation.objects.get(item=items[0]).result == {"answer": ["A", "C"], "flags": []}
    page.reload()
    assert wait_task(page) == second
    # No answer but a flag is a valid submission.
    page.keyboard.press("m")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-queue-empty]")
    assert Annotation.objects.get(item=items[1]).result == {"answer": None, "flags": ["missing_correct_option"]}
    assert_blind(page, responses)
