"""No lost or doubled work in the browser: a lost submit response retried with the same key,
and two tabs on the same task (draft conflict, one annotation)."""
import pytest

from annotation.models import Annotation, Role

from .work_helpers import make_item, png, served_media_root, store, wait_saved, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def count_project(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    ann = make_user("safe")
    project = make_project("safe", "visualtrans", members={ann: Role.ANNOTATOR})
    sha = store(png(tmp_path / "x.png", color=(100, 100, 160)), "image")
    items = [make_item(project, f"c{i}", {"images": ["x.png", "x.png"], "question": f"How many squares? ({i})",
                                          "format": "count", "answer": 2}, {"images": [sha, sha]})
             for i in range(3)]
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

    # Submitting from both tabs makes one annotation.
    page.keyboard.press("Enter")
    wait_task(page, task)
    other.focus("#qa-answer")
    other.keyboard.press("Enter")
    wait_task(other, task)
    assert list(Annotation.objects.filter(item__project=project).values_list("item_id", "result")) == [
        (items[0].pk, {"answer": 5, "flags": []})]
