"""Blind QA pages in Chromium: image pairs (choice, count, set) and video pairs (several answers).

Besides the keyboard flow, these tests check that no ground truth or metadata reaches the
browser while each item is on screen (gold items included): not in the HTML, not in the page's
in-memory task data, not in any API response the annotator's page has received so far.
A model's suggestion pre-fills the answer, marked as machine-made.
"""

import json

import pytest

from annotation.models import Annotation, Role, Suggestion

from .work_helpers import capture_api, make_item, mp4, png, served_media_root, shot, store, wait_saved, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECRET = "TRUTH-"  # every free-text truth/metadata value below carries it
COUNT_TRUTH = "86420975"  # the count item's answer: too long to turn up in an id or a timestamp
TRUTH_KEYS = {
    "answer",
    "subtask",
    "scene",
    "context",
    "capabilities",
    "hallucination",
    "is_gold",
    "gold",
    "external_id",
}


def truth_keys(value):
    """Keys of a JSON value, leaving out model suggestions and the annotator's own draft/result."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("suggestions", "draft", "result"):
                continue
            yield k
            yield from truth_keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from truth_keys(v)


def assert_blind_now(page, responses, task_id: str):
    """What the browser holds while task `task_id` is on screen carries no truth or metadata."""
    html = page.content()
    assert SECRET not in html and COUNT_TRUTH not in html
    held = page.evaluate(
        "() => JSON.stringify({current: window.statelabWorkbench.lastData, next: window.statelabWorkbench.preloaded})"
    )
    assert SECRET not in held and COUNT_TRUTH not in held
    held = json.loads(held)
    assert held["current"]["task"] == int(task_id)
    assert not set(truth_keys(held)) & TRUTH_KEYS
    tasks_seen = set()
    for url, status, body in responses:
        assert SECRET not in body and COUNT_TRUTH not in body, url
        data = json.loads(body) if body.strip().startswith(("{", "[")) else None
        assert not set(truth_keys(data)) & TRUTH_KEYS, url
        if "/tasks/next/" in url and status == 200:
            tasks_seen.add(data["task"])
    assert int(task_id) in tasks_seen


@pytest.fixture
def image_qa(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    ann = make_user("qa1")
    # Every claim first looks for a gold item: the first item (gold) comes first, unannounced.
    project = make_project(
        "vt", "visualtrans", members={ann: Role.ANNOTATOR}, name="VisualTrans check", settings={"gold_share": 1.0}
    )
    initial = store(png(tmp_path / "i.png", color=(230, 200, 160), shape=(60, 60, 140, 160)), "image")
    final = store(png(tmp_path / "f.png", color=(230, 200, 160), shape=(160, 60, 300, 120)), "image")
    media = {"images": [initial, final]}
    base = {"images": ["i.png", "f.png"], "subtask": "TRUTH-causal", "scene": "TRUTH-kitchen"}
    items = [
        make_item(
            project,
            "TRUTH-q-choice",
            {
                **base,
                "question": "Which tool made the change?",
                "format": "choice",
                "options": ["a knife", "a spoon", "a fork"],
                "answer": "C",
            },
            media,
        ),
        make_item(
            project,
            "TRUTH-q-count",
            {
                **base,
                "question": "How many boards are visible at the end?",
                "format": "count",
                "answer": int(COUNT_TRUTH),
            },
            media,
        ),
        make_item(
            project,
            "TRUTH-q-set",
            {**base, "question": "Which objects moved?", "format": "set", "answer": ["TRUTH-board", "TRUTH-bowl"]},
            media,
        ),
    ]
    items[0].is_gold = True
    items[0].save(update_fields=["is_gold"])
    # A suggest job's answers (a model's guesses, never the truth); the newest pre-fills.
    Suggestion.objects.create(item=items[0], source="job:3 old-vlm", result={"answer": "B", "machine": True})
    Suggestion.objects.create(item=items[0], source="job:4 tiny-vlm", result={"answer": "A", "machine": True})
    Suggestion.objects.create(item=items[1], source="job:4 tiny-vlm", result={"answer": 5, "machine": True})
    return project, items


def test_qa_images_keyboard_and_blind(page, login, live_server, image_qa):
    project, items = image_qa
    responses = []
    capture_api(page, responses)
    login(page, "qa1")
    page.goto(f"{live_server.url}/projects/vt/annotate/")
    first = wait_task(page)
    # While the annotator works, the page already holds the next task and loads its media.
    preloaded = page.wait_for_function(
        "() => window.statelabWorkbench.preloaded && window.statelabWorkbench.preloaded.task"
    ).json_value()
    assert preloaded != int(first)
    assert page.inner_text(".question") == "Which tool made the change?"
    assert page.locator("figcaption").all_inner_texts() == ["Initial", "Final"]
    assert_blind_now(page, responses, first)
    # The newest suggestion pre-fills the answer, marked as machine-made with its source; no flags.
    assert page.is_checked("input[name=answer][value=A]")
    assert page.is_visible("[data-machine]") and "tiny-vlm" in page.inner_text(".machine-note")
    assert page.locator("input[name=flags]:checked").count() == 0
    shot(page, "qa")
    # One correct option: radios; keys pick options and flags; Enter submits.
    assert page.locator("input[name=answer][type=radio]").count() == 3
    page.keyboard.press("a")
    assert not page.is_visible("[data-machine]")  # the annotator's own answer now
    page.keyboard.press("b")
    page.keyboard.press("u")
    assert page.is_checked("input[name=answer][value=B]") and not page.is_checked("input[name=answer][value=A]")
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

    # Count: a number input, focused, pre-filled by the model; the draft survives a reload.
    assert_blind_now(page, responses, second)
    assert page.evaluate("document.activeElement.type") == "number"
    assert page.input_value("#qa-answer") == "5" and page.is_visible("[data-machine]")
    page.keyboard.press("Control+a")
    page.keyboard.type("4")
    assert not page.is_visible("[data-machine]")
    wait_saved(page)
    page.reload()
    assert wait_task(page) == second
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'qa-answer'")
    assert page.input_value("#qa-answer") == "4"
    assert not page.is_visible("[data-machine]")  # the draft is the annotator's, not the model's
    assert_blind_now(page, responses, second)
    page.keyboard.press("Enter")
    third = wait_task(page, second)
    assert Annotation.objects.get(item=items[1]).result == {"answer": 4, "flags": []}
    assert_blind_now(page, responses, third)
    assert not page.is_visible("[data-machine]")  # no suggestion for this item

    # Set: Enter (or a comma) adds an entry, Backspace on the empty box removes the last one,
    # Enter on the empty box submits.
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'qa-answer'")
    page.keyboard.type("cutting board")
    page.keyboard.press("Enter")
    page.keyboard.type("bowl, spoon")
    page.keyboard.press("Enter")
    assert page.locator(".chip").count() == 3
    # A half-typed entry is autosaved: after a reload it is there (as an entry).
    page.keyboard.type("ket")
    wait_saved(page)
    page.reload()
    assert wait_task(page) == third
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'qa-answer'")
    assert page.locator(".chip").all_inner_texts()[-1].startswith("ket")
    page.keyboard.press("Backspace")  # removes it again
    assert page.locator(".chip").count() == 3
    page.keyboard.press("Backspace")
    page.keyboard.press("i")  # typing goes into the box, not to the flag shortcut
    page.keyboard.press("Backspace")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-queue-empty]")
    assert Annotation.objects.get(item=items[2]).result == {"answer": ["cutting board", "bowl"], "flags": []}
    assert int(third) != int(second)
    assert SECRET not in page.content() and all(SECRET not in body for _, _, body in responses)


@pytest.fixture
def video_qa(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    ann = make_user("qa2")
    project = make_project(
        "m3", "m3verse", members={ann: Role.ANNOTATOR}, name="M3 pairs", settings={"gold_share": 1.0}
    )
    before = store(mp4(tmp_path / "before.mp4", pattern="testsrc"), "video")
    after = store(mp4(tmp_path / "after.mp4", pattern="testsrc2"), "video")
    media = {"video_before": before, "video_after": after}
    items = [
        make_item(
            project,
            f"TRUTH-m-{i}",
            {
                "video_before": "before.mp4",
                "video_after": "after.mp4",
                "question": f"What changed between the clips? ({i})",
                "options": ["the colours", "the text", "the layout", "none of the listed"],
                "answer": ["A", "C"],
                "context": "TRUTH-inter",
                "capabilities": ["TRUTH-attr"],
                "hallucination": False,
            },
            media,
        )
        for i in range(2)
    ]
    items[0].is_gold = True  # served first (gold_share 1.0), looking like any other item
    items[0].save(update_fields=["is_gold"])
    Suggestion.objects.create(item=items[0], source="job:9 tiny-vlm", result={"answer": ["B", "D"], "machine": True})
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
    page.wait_for_function(
        "() => [...document.querySelectorAll('video')].every(v => v.readyState >= 1 && v.duration > 0.5)"
    )
    assert_blind_now(page, responses, first)
    # Several correct options: checkboxes, pre-filled from the model and marked; each key toggles.
    assert page.locator("input[name=answer][type=checkbox]").count() == 4
    assert [page.is_checked(f"input[name=answer][value={x}]") for x in "ABCD"] == [False, True, False, True]
    assert page.is_visible("[data-machine]")
    for key in ("b", "d", "a", "b", "c", "b"):
        page.keyboard.press(key)
    assert not page.is_visible("[data-machine]")
    shot(page, "qa_video")
    page.keyboard.press("Enter")
    second = wait_task(page, first)
    assert Annotation.objects.get(item=items[0]).result == {"answer": ["A", "C"], "flags": []}
    page.reload()
    assert wait_task(page) == second
    assert_blind_now(page, responses, second)
    assert not page.is_visible("[data-machine]") and page.locator("input[name=answer]:checked").count() == 0
    # D says that none of the others is correct: it is the one way to say so here (no flag for it),
    # and it cannot go with another option.
    assert page.locator("input[name=flags][value=missing_correct_option]").count() == 0
    page.keyboard.press("a")
    page.keyboard.press("d")
    page.keyboard.press("Enter")
    assert "Option D says that no listed option is correct" in page.inner_text("[data-notices] li.notice.error")
    assert not Annotation.objects.filter(item=items[1]).exists()
    page.keyboard.press("a")
    page.keyboard.press("d")
    # No answer but a flag is a valid submission.
    page.keyboard.press("i")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-queue-empty]")
    assert Annotation.objects.get(item=items[1]).result == {"answer": None, "flags": ["insufficient_evidence"]}
    assert SECRET not in page.content() and all(SECRET not in body for _, _, body in responses)
