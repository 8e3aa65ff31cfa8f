"""The annotate page says why an annotator gets no more tasks when the project's cap on answers per
annotator (``annotator_cap``) is reached, instead of the generic "nothing left" text."""

import pytest

from annotation.models import Annotation, Role, Task, TaskStatus
from annotation.queue import queue_claim_next

from .work_helpers import make_item, png, served_media_root, store

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def capped(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    ann = make_user("ann")
    project = make_project("capped", "visualtrans", members={ann: Role.ANNOTATOR}, settings={"annotator_cap": 1})
    sha = store(png(tmp_path / "x.png", color=(100, 100, 160)), "image")
    for n in range(3):
        make_item(
            project,
            f"c{n}",
            {"images": ["x.png", "x.png"], "question": "How many squares?", "format": "count", "answer": 2},
            {"images": [sha, sha]},
        )
    return project, ann


def test_the_page_names_the_cap(capped, page, login, live_server):
    project, ann = capped
    # One answer given already: the cap of 1 is reached, while two items are still open.
    task = queue_claim_next(project=project, user=ann)
    Annotation.objects.create(item=task.item, annotator=ann, task=task, result={"answer": 2}, source="task")
    Task.objects.filter(pk=task.pk).update(status=TaskStatus.SUBMITTED)
    login(page, "ann")
    page.goto(f"{live_server.url}/projects/capped/annotate/")
    done = page.locator("[data-queue-empty]")
    done.wait_for(timeout=10_000)
    reason = page.locator("[data-queue-reason]")
    assert reason.text_content() == "You reached this project's cap of 1 answer."
    assert "Every item has its annotations" not in done.text_content()


def test_without_a_cap_the_page_keeps_the_generic_text(make_user, make_project, page, login, live_server):
    ann = make_user("ann")
    make_project("empty", "visualtrans", members={ann: Role.ANNOTATOR})
    login(page, "ann")
    page.goto(f"{live_server.url}/projects/empty/annotate/")
    done = page.locator("[data-queue-empty]")
    done.wait_for(timeout=10_000)
    assert page.locator("[data-queue-reason]").count() == 0
    assert "Every item has its annotations" in done.text_content()
