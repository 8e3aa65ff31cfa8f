"""A newcomer's rough edges on the annotator pages, in Chromium.

An old error stays on screen after a successful submit; a two-tab double submit is explained in
words with both answers side by side; the key help opens from a number box with "?" and from a
text box (where "?" is text) with F1; typed rating scores visibly move on to the next criterion.
"""

import pytest

from annotation.models import Annotation, Role
from annotation.queue import annotation_submit

from .work_helpers import make_item, mp4, png, served_media_root, store, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def qa_project(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    ann = make_user("newbie")
    project = make_project("edges", "visualtrans", members={ann: Role.ANNOTATOR}, name="Edges")
    initial = store(png(tmp_path / "i.png", color=(230, 200, 160)), "image")
    final = store(png(tmp_path / "f.png", color=(200, 230, 160)), "image")
    base = {"images": ["i.png", "f.png"], "subtask": "causal", "scene": "kitchen"}

    def add(external_id: str, fmt: str, question: str):
        return make_item(
            project,
            external_id,
            {**base, "question": question, "format": fmt, "answer": 1 if fmt == "count" else ["x"]},
            {"images": [initial, final]},
        )

    return ann, project, add


def visible_errors(page) -> list[str]:
    return page.locator("[data-notices] li.notice.error").all_inner_texts()


def test_stale_error_cleared_on_success_and_question_mark_in_number_box(page, login, live_server, qa_project):
    ann, project, add = qa_project
    add("c1", "count", "How many boards?")
    add("c2", "count", "How many bowls?")
    login(page, "newbie")
    page.goto(f"{live_server.url}/projects/edges/annotate/")
    first = wait_task(page)
    page.wait_for_function("() => document.activeElement && document.activeElement.type === 'number'")

    # Submitting nothing: refused, with an error on screen.
    page.click("[data-submit]")
    assert any("Answer the question" in text for text in visible_errors(page))
    # Then a real answer: the old error goes with the successful submit.
    page.fill("#qa-answer", "3")
    page.click("[data-submit]")
    second = wait_task(page, first)
    assert Annotation.objects.get(task_id=int(first)).result == {"answer": 3, "flags": []}
    assert visible_errors(page) == []
    assert "Submitted." in page.inner_text("[data-notices]")

    # "?" in a number box (which can never hold a "?") opens the key help.
    page.wait_for_function("() => document.activeElement && document.activeElement.type === 'number'")
    page.keyboard.press("?")
    assert page.is_visible("[data-help]")
    assert "F1" in page.inner_text("[data-help-hint]")
    page.keyboard.press("Escape")
    assert not page.is_visible("[data-help]")
    assert page.eval_on_selector("[data-workbench]", "r => r.dataset.task") == second


def test_text_box_keeps_question_mark_and_f1_opens_help(page, login, live_server, qa_project):
    ann, project, add = qa_project
    add("s1", "set", "Which objects moved?")
    login(page, "newbie")
    page.goto(f"{live_server.url}/projects/edges/annotate/")
    wait_task(page)
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'qa-answer'")
    assert "F1" in page.inner_text("[data-help-open]")

    # In a free-text box "?" is text; F1 opens the key help from there.
    page.keyboard.type("lid?")
    assert page.input_value("#qa-answer") == "lid?"
    assert not page.is_visible("[data-help]")
    page.keyboard.press("F1")
    assert page.is_visible("[data-help]")
    assert "Show keyboard shortcuts" in page.inner_text("[data-help-body]")
    page.keyboard.press("Escape")
    assert not page.is_visible("[data-help]")


def test_two_tab_conflict_explained_side_by_side(page, login, live_server, qa_project):
    ann, project, add = qa_project
    add("s1", "set", "Which objects moved?")
    login(page, "newbie")
    page.goto(f"{live_server.url}/projects/edges/annotate/")
    task = wait_task(page)
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'qa-answer'")
    # Another tab submitted this task first, with another answer.
    annotation_submit(task_id=int(task), user=ann, result={"answer": ["bowl"], "flags": []}, time_spent_ms=1000)
    page.fill("#qa-answer", "lid, board")
    page.keyboard.press("Enter")  # adds the chip
    page.keyboard.press("Control+Enter")
    table = page.locator("[data-notices] [data-conflict]")
    table.wait_for()
    notice = page.inner_text("[data-notices] li.notice.error")
    assert "already submitted this task with a different answer" in notice
    assert "first answer is the one kept" in notice
    assert '"annotation"' not in notice and "annotation.result" not in notice and "{" not in notice
    assert table.locator("thead th").all_inner_texts() == [
        "Field",
        "Your answer here (not saved)",
        "Stored answer (kept)",
    ]
    row = table.locator("tr[data-field=answer]")
    assert row.locator("[data-yours]").inner_text() == "lid, board"
    assert row.locator("[data-stored]").inner_text() == "bowl"
    assert "differs" in row.get_attribute("class")
    assert Annotation.objects.get(task_id=int(task)).result == {"answer": ["bowl"], "flags": []}


def test_rating_digits_move_focus_visibly_and_help_says_so(
    page, login, live_server, settings, make_user, make_project, tmp_path
):
    settings.MEDIA_ROOT = served_media_root()
    rater = make_user("rater")
    project = make_project("osc", "oscbench", members={rater: Role.ANNOTATOR}, name="OSC")
    video = store(mp4(tmp_path / "g.mp4", seconds=1), "video")
    make_item(
        project,
        "g1",
        {
            "video": "g.mp4",
            "prompt": "A hand slices a tomato",
            "generator": "g",
            "scenario": "regular",
            "action": "slice",
            "action_category": "cutting",
            "object": "tomato",
            "object_category": "veg",
        },
        {"video": video},
    )
    login(page, "rater")
    page.goto(f"{live_server.url}/projects/osc/annotate/")
    wait_task(page)
    page.keyboard.press("?")
    help_text = page.inner_text("[data-help-body]")
    assert "Score the focused criterion, then move on to the next" in help_text
    page.keyboard.press("Escape")
    page.keyboard.press("4")  # subject
    assert page.evaluate("document.activeElement.dataset.criterion") == "object"
    assert page.inner_text("[data-score-moved]") == "Subject: 4 — now scoring Object"
    page.keyboard.press("2")
    assert page.evaluate("document.activeElement.dataset.criterion") == "action"
    assert page.is_checked("input[name=score-object][value='2']")


@pytest.mark.parametrize("protocol", ["status", "oscbench"])
def test_project_page_shows_only_links_that_open(page, login, live_server, make_user, make_project, protocol):
    people = {role: make_user(f"{role}1") for role in (Role.ANNOTATOR, Role.REVIEWER, Role.RESEARCHER)}
    make_project("links", protocol, members={user: role for role, user in people.items()}, name="Links")
    expected = {
        Role.ANNOTATOR: ["Annotate"],
        Role.REVIEWER: ["Annotate", "Review", "Agreement"],
        Role.RESEARCHER: ["Annotate", "Review", "Agreement", "Leaderboard"]
        + (["Human–model correlation"] if protocol == "oscbench" else []),
    }
    for role, user in people.items():
        page.context.clear_cookies()
        login(page, user.username)
        page.goto(f"{live_server.url}/projects/links/")
        names = page.locator("#project-links a").all_inner_texts()
        assert names[: len(expected[role])] == expected[role], role
        for href in page.eval_on_selector_all("#project-links a", "els => els.map(a => a.href)"):
            assert page.request.get(href).status == 200, (role, href)


def test_rating_controls_above_the_fold_at_800x600(
    page, login, live_server, settings, make_user, make_project, tmp_path
):
    settings.MEDIA_ROOT = served_media_root()
    rater = make_user("rater")
    project = make_project("osc", "oscbench", members={rater: Role.ANNOTATOR}, name="OSC")
    video = store(mp4(tmp_path / "g.mp4", seconds=1), "video")
    make_item(
        project,
        "g1",
        {
            "video": "g.mp4",
            "prompt": "A hand slices a tomato",
            "generator": "g",
            "scenario": "regular",
            "action": "slice",
            "action_category": "cutting",
            "object": "tomato",
            "object_category": "veg",
        },
        {"video": video},
    )
    page.set_viewport_size({"width": 800, "height": 600})
    login(page, "rater")
    page.goto(f"{live_server.url}/projects/osc/annotate/")
    wait_task(page)
    page.wait_for_function("() => document.querySelector('video').duration > 0.5")
    boxes = page.evaluate("""() => ({
        first: document.querySelector('.criterion').getBoundingClientRect().toJSON(),
        last: document.querySelector('.criterion:last-of-type').getBoundingClientRect().toJSON(),
        submit: document.querySelector('[data-submit]').getBoundingClientRect().toJSON(),
        scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth})""")
    assert boxes["scrollWidth"] <= boxes["innerWidth"]
    assert boxes["submit"]["bottom"] <= 600 and boxes["submit"]["right"] <= 800
    assert boxes["first"]["bottom"] <= 600, boxes
    assert boxes["last"]["bottom"] <= 600, boxes
