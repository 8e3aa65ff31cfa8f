"""No lost or doubled work in the browser: a lost submit response retried with the same key,
a lost draft response retried with the same body and version, and two tabs on the same task
(draft conflict, one annotation)."""

import json

import pytest
from django.db.models import F

from annotation.models import Annotation, Role, Task

from .work_helpers import make_item, png, served_media_root, store, wait_saved, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def count_project(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    ann = make_user("safe")
    project = make_project("safe", "visualtrans", members={ann: Role.ANNOTATOR})
    sha = store(png(tmp_path / "x.png", color=(100, 100, 160)), "image")
    items = [
        make_item(
            project,
            f"c{i}",
            {"images": ["x.png", "x.png"], "question": f"How many squares? ({i})", "format": "count", "answer": 2},
            {"images": [sha, sha]},
        )
        for i in range(3)
    ]
    return project, items


def test_lost_submit_response_is_retried_with_the_same_key(page, login, live_server, count_project):
    project, items = count_project
    seen = []

    def drop_first_response(route):
        # The server stores the annotation, but the browser never hears back (a dropped connection).
        seen.append(route.request.headers.get("idempotency-key"))
        if len(seen) == 1:
            route.fetch()
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route("**/api/tasks/*/submit/", drop_first_response)
    login(page, "safe")
    page.goto(f"{live_server.url}/projects/safe/annotate/")
    first = wait_task(page)
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'qa-answer'")
    page.keyboard.type("2")
    page.keyboard.press("Enter")
    wait_task(page, first)
    assert len(seen) == 2 and seen[0] == seen[1] and len(seen[0]) == 36
    assert Annotation.objects.filter(item__project=project).count() == 1
    assert Annotation.objects.get(item=items[0]).idempotency_key == seen[0]


def test_lost_draft_response_is_retried_unchanged_and_a_real_conflict_still_shows(
    page, login, live_server, count_project
):
    project, items = count_project
    sent = []

    def drop_first_response(route):
        # The server stores the draft, but the browser never hears back (a dropped connection).
        sent.append(json.loads(route.request.post_data))
        if len(sent) == 1:
            route.fetch()
            route.abort("connectionreset")
        else:
            route.continue_()

    page.route("**/api/tasks/*/draft/", drop_first_response)
    login(page, "safe")
    page.goto(f"{live_server.url}/projects/safe/annotate/")
    task = wait_task(page)
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'qa-answer'")
    page.keyboard.type("2")
    wait_saved(page)

    # The retry is the very same request: same draft, same base version.
    assert len(sent) == 2 and sent[0] == sent[1] and sent[0]["version"] == 0 and sent[0]["draft"]["answer"] == 2
    assert page.locator(".notice.error").count() == 0
    stored = Task.objects.get(pk=task)
    assert (stored.draft_version, stored.draft["answer"]) == (1, 2)

    # A genuine stale write (another tab saved a different draft meanwhile) still shows the conflict.
    Task.objects.filter(pk=task).update(draft={"answer": 9, "flags": []}, draft_version=F("draft_version") + 1)
    page.keyboard.type("3")
    page.wait_for_selector(".notice.error:has-text('another tab')")
    assert page.inner_text("[data-save-status]") == "Conflict"
    assert sent[-1]["version"] == 1 and sent[-1]["draft"]["answer"] == 23
    assert Task.objects.get(pk=task).draft["answer"] == 9


def test_two_tabs_on_one_task(page, login, live_server, count_project):
    project, items = count_project
    login(page, "safe")
    page.goto(f"{live_server.url}/projects/safe/annotate/")
    task = wait_task(page)
    other = page.context.new_page()
    other.goto(f"{live_server.url}/projects/safe/annotate/")
    assert wait_task(other) == task  # the same held task in both tabs

    page.fill("#qa-answer", "5")
    wait_saved(page)
    # The second tab still has the old draft version: its save is refused with a clear message.
    other.fill("#qa-answer", "7")
    other.wait_for_selector(".notice.error:has-text('another tab')")
    assert other.inner_text("[data-save-status]") == "Conflict"
    other.click(".notice.error button:has-text('Load the other copy')")
    other.wait_for_function("() => document.querySelector('#qa-answer').value === '5'")

    other.fill("#qa-answer", "6")
    wait_saved(other)
    # Now the first tab is behind; it keeps its own answer over the other copy.
    page.fill("#qa-answer", "8")
    page.wait_for_selector(".notice.error:has-text('another tab')")
    page.click(".notice.error button:has-text('Keep mine')")
    wait_saved(page)
    assert Task.objects.get(pk=task).draft["answer"] == 8

    # Submitting from both tabs makes one annotation: the first answer is kept, and the other tab
    # (a different answer) is told so and moves on.
    page.focus("#qa-answer")
    page.keyboard.press("Enter")
    wait_task(page, task)
    other.focus("#qa-answer")
    other.keyboard.press("Enter")
    notice = other.wait_for_selector(".notice.error:has-text('already submitted this task with a different answer')")
    assert "Your answer is kept in this browser" not in notice.inner_text()
    held = Task.objects.get(pk=task)
    assert other.evaluate(f"localStorage.getItem('statelab:draft:{held.annotator_id}:{held.item_id}')") is None
    other.click(".notice.error button:has-text('Next task')")
    wait_task(other, task)
    assert list(Annotation.objects.filter(item__project=project).values_list("item_id", "result")) == [
        (items[0].pk, {"answer": 8, "flags": []})
    ]


def test_skip_and_a_lost_hold(page, login, live_server, count_project, make_user):
    project, items = count_project
    login(page, "safe")
    page.goto(f"{live_server.url}/projects/safe/annotate/")
    first = wait_task(page)
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("Shift+S")
    second = wait_task(page, first)
    assert Task.objects.get(pk=first).status == "skipped"
    # The page claims the task after this one in the background; let that finish first, or it
    # may claim the item whose hold is taken away below before the rival gets it.
    page.wait_for_function("() => window.statelabWorkbench.preloaded && window.statelabWorkbench.preloaded.task")

    # The hold on the second task runs out and someone else takes the item: submitting says so.
    rival = make_user("rival")
    Task.objects.filter(pk=second).update(status="expired")
    Task.objects.create(
        item_id=Task.objects.get(pk=second).item_id,
        annotator=rival,
        status="active",
        lease_expires="2100-01-01T00:00:00Z",
    )
    page.focus("#qa-answer")
    page.keyboard.type("3")
    page.keyboard.press("Enter")
    notice = page.wait_for_selector(".notice.error:has-text('Not submitted')")
    assert "another annotator took the item" in notice.inner_text()
    assert Annotation.objects.count() == 0
    page.click(".notice.error button:has-text('Next task')")
    third = wait_task(page, second)
    assert Task.objects.get(pk=third).item_id == items[2].pk  # the skipped item is not offered again


def test_a_submit_while_the_next_task_is_still_being_preloaded_waits_for_it(page, login, live_server, count_project):
    """The page claims the next task in the background; a submit made before that claim is answered
    must not send a second claim beside it. The server claims with SKIP LOCKED, so a claim arriving
    while the preload's transaction holds the last free item would skip it and say "nothing left"."""
    project, items = count_project
    held, plain_claims = [], []

    def hold_preloads(route):
        if "exclude" in (route.request.post_data or ""):
            held.append(route)  # answered below, when the test says so
        else:
            plain_claims.append(route.request.url)
            route.continue_()

    page.route("**/api/projects/safe/tasks/next/", hold_preloads)
    login(page, "safe")
    page.goto(f"{live_server.url}/projects/safe/annotate/")
    first = wait_task(page)
    for _ in range(100):
        if held:
            break
        page.wait_for_timeout(100)
    assert len(held) == 1 and len(plain_claims) == 1
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'qa-answer'")
    page.keyboard.type("2")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.querySelector('[data-save-status]').textContent !== 'Submitting…'")
    page.wait_for_timeout(1000)
    assert Annotation.objects.filter(item__project=project).count() == 1
    assert len(plain_claims) == 1, "a claim was sent beside the preload still in flight"
    held[0].continue_()
    second = wait_task(page, first)
    assert len(plain_claims) == 1
    assert list(Task.objects.filter(item__project=project, status="active").values_list("pk", flat=True)) == [
        int(second)
    ]


def test_a_submit_before_the_preload_starts_calls_the_preload_off(page, login, live_server, count_project):
    """The page preloads the next task a moment (200 ms) after showing one. A submit made before
    that moment claims the next task itself; the timer must not fire a preload beside that claim
    (the same race as above), so the page's clock is held still and moved on only while the claim
    after the submit is in flight."""
    project, items = count_project
    excludes, held = [], []

    def record(route):
        exclude = json.loads(route.request.post_data or "{}").get("exclude")
        excludes.append(exclude)
        if exclude is None and len(excludes) > 1:
            held.append(route)  # the claim after the submit: answered below
        else:
            route.continue_()

    page.clock.install()
    page.route("**/api/projects/safe/tasks/next/", record)
    login(page, "safe")
    page.goto(f"{live_server.url}/projects/safe/annotate/")
    first = wait_task(page)
    page.wait_for_function("() => document.activeElement && document.activeElement.id === 'qa-answer'")
    assert excludes == [None]  # the preload's 200 ms have not passed on the page's clock
    page.keyboard.type("2")
    page.keyboard.press("Enter")
    for _ in range(100):
        if held:
            break
        page.wait_for_timeout(100)
    assert len(held) == 1
    page.clock.run_for(2000)  # the preload timer's moment comes while the claim is in flight
    page.wait_for_timeout(500)
    assert excludes == [None, None], "a preload was sent beside the claim after the submit"
    held[0].continue_()
    second = wait_task(page, first)
    assert Annotation.objects.filter(item__project=project).count() == 1
    assert list(Task.objects.filter(item__project=project, status="active").values_list("pk", flat=True)) == [
        int(second)
    ]
