"""Box page in Chromium: draw with the mouse, move/resize with keys, clip to the image, outcomes."""

import pytest

from annotation.models import Annotation, Role

from .work_helpers import make_item, png, served_media_root, shot, store, wait_saved, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

W, H = 320, 240


@pytest.fixture
def box_project(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    ann = make_user("boxer")
    project = make_project("boxes", "changeit", members={ann: Role.ANNOTATOR}, name="Apples")
    items = []
    for i in range(3):
        sha = store(
            png(tmp_path / f"apple{i}.png", color=(90 + 40 * i, 140, 90), size=(W, H), shape=(40, 30, 200, 150)),
            "image",
        )
        payload = {
            "image": f"apple{i}.png",
            "object": "apple",
            "state": "peeled apple",
            "distractors": ["whole apple", "sliced apple"],
        }
        items.append(make_item(project, f"apple-{i}", payload, {"image": sha}))
    return project, items


def bbox_shown(page):
    return page.evaluate("JSON.parse(document.querySelector('[data-bbox]').dataset.bbox || 'null')")


def to_screen(page, x, y):
    r = page.eval_on_selector(
        "canvas.box-canvas", "c => { const r = c.getBoundingClientRect(); return [r.left, r.top, r.width]; }"
    )
    scale = r[2] / W
    return r[0] + x * scale, r[1] + y * scale


def drag(page, start, end):
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
    page.mouse.move(*end)
    page.mouse.up()


def test_box_draw_keys_outcomes(page, login, live_server, box_project):
    project, items = box_project
    login(page, "boxer")
    page.goto(f"{live_server.url}/projects/boxes/annotate/")
    first = wait_task(page)
    page.wait_for_function("() => document.querySelector('canvas.box-canvas').width > 0")
    # "?" lists the page's shortcuts.
    page.keyboard.press("?")
    assert page.is_visible("[data-help]")
    assert "Nothing to label" in page.inner_text("[data-help-body]")
    page.keyboard.press("Escape")
    assert not page.is_visible("[data-help]")
    # Candidates in alphabetical order; the item's listed state is marked and preselected, for
    # the annotator to confirm or correct (this workflow is not blind).
    labels = page.eval_on_selector_all("label.candidate input", "els => els.map(e => e.value)")
    assert labels == ["peeled apple", "sliced apple", "whole apple"]
    assert page.eval_on_selector_all(
        "label.candidate.proposed", "els => els.map(e => e.querySelector('input').value)"
    ) == ["peeled apple"]
    assert page.locator("label.candidate .badge").all_inner_texts() == ["listed"]
    assert page.is_checked("input[name=state][value='peeled apple']")
    assert "Listed state: peeled apple" in page.inner_text(".box-side")

    # A drag past the image's bottom-right corner is clipped to the image.
    x0, y0 = to_screen(page, 250, 200)
    x1, y1 = to_screen(page, W + 40, H + 40)
    drag(page, (x0, y0), (x1, y1))
    clipped = bbox_shown(page)
    assert abs(clipped[0] - 250) <= 1 and abs(clipped[1] - 200) <= 1
    assert clipped[0] + clipped[2] == W and clipped[1] + clipped[3] == H

    # Drawing again replaces the box: there is only ever one.
    drag(page, to_screen(page, 40, 30), to_screen(page, 200, 150))
    drawn = bbox_shown(page)
    assert all(abs(a - b) <= 1 for a, b in zip(drawn, [40, 30, 160, 120]))
    page.keyboard.press("1")
    shot(page, "box")
    # Keys: arrows move by one image pixel, Shift+arrows resize.
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowUp")
    for _ in range(3):
        page.keyboard.press("Shift+ArrowDown")
    page.keyboard.press("Shift+ArrowLeft")
    moved = [drawn[0] + 2, drawn[1] - 1, drawn[2] - 1, drawn[3] + 3]
    assert bbox_shown(page) == moved
    # Dragging inside the box moves it (size unchanged).
    cx, cy = to_screen(page, moved[0] + moved[2] / 2, moved[1] + moved[3] / 2)
    scale = page.eval_on_selector("canvas.box-canvas", "c => c.getBoundingClientRect().width") / W
    drag(page, (cx, cy), (cx + 10 * scale, cy + 5 * scale))
    after_move = bbox_shown(page)
    assert (
        after_move[2:] == moved[2:]
        and abs(after_move[0] - moved[0] - 10) <= 1
        and abs(after_move[1] - moved[1] - 5) <= 1
    )
    # Dragging the right edge resizes: only the width changes.
    ex, ey = to_screen(page, after_move[0] + after_move[2], after_move[1] + after_move[3] / 2)
    drag(page, (ex, ey), (ex + 20 * scale, ey))
    resized = bbox_shown(page)
    assert resized[:2] == after_move[:2] and resized[3] == after_move[3] and abs(resized[2] - after_move[2] - 20) <= 1
    after_move = resized
    page.keyboard.press("3")  # state label corrected: whole apple
    page.keyboard.press("Enter")
    second = wait_task(page, first)
    a = Annotation.objects.get(item=items[0])
    assert a.result == {"bbox": after_move, "state": "whole apple"}

    # Second task: draw (the listed state stays chosen), let the draft save, reload: the same
    # task, box and state come back.
    page.wait_for_function("() => document.querySelector('canvas.box-canvas').width > 0")
    drag(page, to_screen(page, 10, 10), to_screen(page, 60, 50))
    wait_saved(page)
    kept = bbox_shown(page)
    page.reload()
    assert wait_task(page) == second
    page.wait_for_function("() => document.querySelector('canvas.box-canvas').width > 0")
    assert bbox_shown(page) == kept
    assert page.is_checked("input[name=state][value='peeled apple']")
    assert page.evaluate("window.statelabWorkbench.view.collect().result") == {"bbox": kept, "state": "peeled apple"}
    # "Cannot determine" replaces the box; Enter submits.
    page.keyboard.press("c")
    assert bbox_shown(page) is None
    page.keyboard.press("Enter")
    wait_task(page, second)
    # With the mouse: the clicked button keeps the focus, and Ctrl+Enter still submits.
    page.click("button[data-outcome=nothing_to_label]")
    assert page.evaluate("document.activeElement.dataset.outcome") == "nothing_to_label"
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("[data-queue-empty]")

    assert Annotation.objects.get(item=items[1]).result == {"outcome": "cannot_determine"}
    assert Annotation.objects.get(item=items[2]).result == {"outcome": "nothing_to_label"}
    assert Annotation.objects.filter(item__project=project).count() == 3
