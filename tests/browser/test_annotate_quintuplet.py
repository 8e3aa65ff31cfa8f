"""Quintuplet page in Chromium: keyboard-only labeling, machine suggestions, drafts survive a reload."""

import pytest

from annotation.models import Annotation, Role, Suggestion, Task

from .work_helpers import make_item, png, served_media_root, shot, store, wait_saved, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def quint_project(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    ann = make_user("ann")
    project = make_project("quint", "status", members={ann: Role.ANNOTATOR}, name="Kitchen pairs")
    items = []
    for i, (a, b) in enumerate(
        [((200, 60, 60), (60, 200, 60)), ((60, 60, 200), (200, 200, 60)), ((120, 120, 120), (20, 20, 20))]
    ):
        ia = store(png(tmp_path / f"a{i}.png", color=a, shape=(100, 80, 180, 200), mark=f"A{i}"), "image")
        ib = store(png(tmp_path / f"b{i}.png", color=b, shape=(60, 60, 260, 200), mark=f"B{i}"), "image")
        payload = {"image_a": f"a{i}.png", "image_b": f"b{i}.png"}
        items.append(make_item(project, f"pair-{i}", payload, {"image_a": ia, "image_b": ib}))
    Suggestion.objects.create(
        item=items[0],
        source="job:7 tiny-vlm",
        result={
            "state_a": "a closed jar",
            "state_b": "an open jar",
            "change": "open the jar",
            "change_distractors": ["shake the jar", "fill the jar", "close the jar"],
            "category": "functional",
            "difference": "significant",
        },
    )
    return project, items


def fill_row(page, values):
    """Type into the focused field and press Enter to move on, for each value."""
    for value in values:
        page.keyboard.press("Control+a")
        page.keyboard.type(value)
        page.keyboard.press("Enter")


def test_quintuplet_keyboard_flow(page, login, live_server, quint_project):
    project, items = quint_project
    login(page, "ann")
    page.goto(f"{live_server.url}/projects/quint/annotate/")
    first = wait_task(page)
    assert page.locator("[data-task-label]").inner_text() == "3 of 3 left"  # never a database id

    # The model's suggestion pre-fills the form, each field marked as machine-made.
    assert page.input_value("#q-state_a") == "a closed jar"
    assert page.input_value("#q-distractor_2") == "close the jar"
    assert page.locator(".field .badge.machine:visible").count() == 6
    # Hovering an image zooms under the pointer; a click locks a stronger zoom.
    page.hover(".zoomable >> nth=0")
    assert page.locator(".zoomable.zoom").count() == 1
    page.click(".zoomable >> nth=0")
    assert page.locator(".zoomable.zoom-locked").count() == 1
    page.click(".zoomable >> nth=0")
    page.mouse.move(5, 5)
    assert page.locator(".zoomable.zoom").count() == 0
    # Correct state B and the third distractor by keyboard; the badge goes away where edited.
    page.focus("#q-state_b")
    page.keyboard.press("Control+a")
    page.keyboard.type("a jar with its lid off")
    page.focus("#q-distractor_2")
    page.keyboard.press("Control+a")
    page.keyboard.type("rinse the jar")
    assert page.locator(".field .badge.machine:visible").count() == 4
    # Category and difference from the keyboard while still in a text field (Alt+key), then submit.
    page.keyboard.press("Alt+o")
    page.keyboard.press("Alt+s")
    assert page.is_checked("input[name=category][value=other]")
    shot(page, "quintuplet")
    page.keyboard.press("Control+Enter")
    second = wait_task(page, first)

    a = Annotation.objects.get(item=items[0])
    assert a.result == {
        "state_a": "a closed jar",
        "state_b": "a jar with its lid off",
        "change": "open the jar",
        "change_distractors": ["shake the jar", "fill the jar", "rinse the jar"],
        "category": "other",
        "difference": "slight",
    }
    assert a.annotator.username == "ann" and a.idempotency_key and a.time_spent_ms > 0

    assert page.locator("[data-task-label]").inner_text() == "2 of 3 left"
    # Second item: no suggestion, typed from scratch; a one-word state only warns.
    assert page.locator(".field .badge.machine:visible").count() == 0
    assert page.evaluate("document.activeElement.id") == "q-state_a"
    fill_row(page, ["jar", "an open jar"])
    assert "object and its state" in page.inner_text("[data-warning-for=state_a]")
    fill_row(page, ["open the jar", "shake the jar", "fill the jar", "close the jar"])
    # The last Enter moved focus to the category radios: plain keys now.
    page.keyboard.press("f")
    page.keyboard.press("g")
    wait_saved(page)
    # A reload brings back the same held task with its draft.
    page.reload()
    assert wait_task(page) == second
    assert page.input_value("#q-change") == "open the jar"
    assert page.is_checked("input[name=difference][value=significant]")
    page.keyboard.press("Control+Enter")
    third = wait_task(page, second)
    # The server's format note on the one-word state comes back as a warning, not an error.
    assert page.locator(".notice.warning").filter(has_text="state a").count() == 1
    assert Annotation.objects.get(item=items[1]).result["state_a"] == "jar"

    # Submitting twice (double click) creates one annotation; then the queue is empty.
    page.focus("#q-state_a")
    fill_row(
        page,
        ["a full glass", "an empty glass", "drink the water", "fill the glass", "break the glass", "wash the glass"],
    )
    page.keyboard.press("p")
    page.keyboard.press("s")
    page.locator("[data-submit]").dblclick()
    page.wait_for_selector("[data-queue-empty]")
    assert Annotation.objects.filter(item__project=project).count() == 3
    assert list(Annotation.objects.filter(item=items[2]).values_list("result__category", flat=True)) == ["positional"]
    assert not Task.objects.filter(item__project=project, status="active").exists()
    assert {int(first), int(second), int(third)} == set(
        Task.objects.filter(status="submitted").values_list("pk", flat=True)
    )
