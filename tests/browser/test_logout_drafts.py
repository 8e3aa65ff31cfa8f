"""A shared computer: what one annotator typed must not stay in the browser for the next person.
Logging out saves the draft to the server and clears StateLab's browser storage; a session that
ended without a logout is cleared when someone else signs in, and kept for its owner."""

import pytest

from annotation.models import Role, Task

from .work_helpers import make_item, png, served_media_root, store, wait_saved, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STORED = "() => Object.keys({...localStorage, ...sessionStorage}).filter(k => k.startsWith('statelab:')).sort()"


@pytest.fixture
def shared_project(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    alice, bob = make_user("alice"), make_user("bob")
    project = make_project("shared", "visualtrans", members={alice: Role.ANNOTATOR, bob: Role.ANNOTATOR})
    sha = store(png(tmp_path / "x.png", color=(100, 100, 160)), "image")
    for i in range(4):
        make_item(
            project,
            f"c{i}",
            {"images": ["x.png", "x.png"], "question": f"How many squares? ({i})", "format": "count", "answer": 2},
            {"images": [sha, sha]},
        )
    return alice, bob


def draft_key(task_id: int) -> str:
    task = Task.objects.get(pk=task_id)
    return f"statelab:draft:{task.annotator_id}:{task.item_id}"


def start_answer(page, live_server, answer: str) -> int:
    page.goto(f"{live_server.url}/projects/shared/annotate/")
    task = int(wait_task(page))
    page.fill("#qa-answer", answer)
    wait_saved(page)
    return task


def test_logout_saves_the_draft_and_leaves_nothing_for_the_next_person(page, login, live_server, shared_project):
    login(page, "alice")
    task = start_answer(page, live_server, "2")
    # One more digit, and Log out before the autosave: the draft is in this browser only.
    page.type("#qa-answer", "3")
    assert draft_key(task) in page.evaluate(STORED)
    page.click("header button:has-text('Log out')")
    page.wait_for_url(f"{live_server.url}/accounts/login/")

    assert page.evaluate(STORED) == []
    assert Task.objects.get(pk=task).draft["answer"] == 23  # saved to the server before leaving

    login(page, "bob")
    page.goto(f"{live_server.url}/projects/shared/annotate/")
    bobs = int(wait_task(page))
    assert Task.objects.get(pk=bobs).annotator.username == "bob"
    assert page.input_value("#qa-answer") == ""
    assert page.evaluate(STORED) == ["statelab:owner"]  # nothing of alice's: only whose entries come next
    assert page.evaluate("localStorage.getItem('statelab:owner')") == "bob"


def expire_session_with_unsaved_answer(page, live_server) -> int:
    """Alice's answer cannot reach the server, then her session ends without a logout."""
    task = start_answer(page, live_server, "2")
    page.route("**/api/tasks/*/draft/", lambda route: route.abort("connectionreset"))
    page.type("#qa-answer", "3")
    page.wait_for_function("() => document.querySelector('[data-save-status]').textContent.startsWith('Not saved')")
    page.unroute("**/api/tasks/*/draft/")
    page.context.clear_cookies()  # the session expired (or the browser was closed)
    page.goto(f"{live_server.url}/projects/shared/annotate/")
    page.wait_for_url(f"{live_server.url}/accounts/login/?next=/projects/shared/annotate/")
    assert draft_key(task) in page.evaluate(STORED)
    return task


def sign_in_from_here(page, live_server, username: str) -> None:
    """Sign in on the login page the expired session was sent to; it leads back to the workbench."""
    page.fill("#id_username", username)
    page.fill("#id_password", "pw")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/projects/shared/annotate/")


def test_a_session_that_ended_without_logout_is_cleared_when_someone_else_signs_in(
    page, login, live_server, shared_project
):
    login(page, "alice")
    alices = expire_session_with_unsaved_answer(page, live_server)

    sign_in_from_here(page, live_server, "bob")
    bobs = int(wait_task(page))
    assert bobs != alices and page.input_value("#qa-answer") == ""
    assert page.evaluate(STORED) == ["statelab:owner"]


def test_the_same_person_signing_in_again_gets_the_unsaved_answer_back(page, login, live_server, shared_project):
    login(page, "alice")
    task = expire_session_with_unsaved_answer(page, live_server)

    sign_in_from_here(page, live_server, "alice")
    assert int(wait_task(page)) == task
    assert page.input_value("#qa-answer") == "23"
    wait_saved(page)
    assert Task.objects.get(pk=task).draft["answer"] == 23


def test_the_admins_logout_clears_too(page, login, live_server, shared_project, make_user):
    make_user("root", superuser=True)
    login(page, "root")
    task = start_answer(page, live_server, "4")
    assert draft_key(task) in page.evaluate(STORED)
    page.goto(f"{live_server.url}/admin/")
    page.click("#logout-form button")
    page.wait_for_url(f"{live_server.url}/accounts/login/")  # LOGOUT_REDIRECT_URL
    assert page.evaluate(STORED) == []
