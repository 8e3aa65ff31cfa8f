"""A crowd study in Chromium: a researcher opens a study link from the page; three Prolific
participants arrive with their ids (no password), each in their own browser. One abandons their
task (their hold on the only gold item is taken over by the next participant's gold draw at once;
their other hold returns to the queue when its lease has run out: the production lease, its
expiry moved into the past in the database); one answers the gold item wrong. Both who finish
see the completion code; the researcher sees the gold-failing one flagged, rejects them, and
their item is back in the queue."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import (
    Annotation,
    CrowdAccount,
    Item,
    ItemStatus,
    Role,
    Study,
    StudyParticipant,
    Task,
    TaskStatus,
)

from .work_helpers import make_item, png, served_media_root, shot, store, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def crowd_project(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    make_user("resa")
    project = make_project(
        "crowd", "visualtrans", members={}, annotations_per_item=1, name="Crowd check", settings={"gold_share": 1.0}
    )  # every participant's first task is the gold item
    from django.contrib.auth import get_user_model

    from annotation.models import Membership

    Membership.objects.create(project=project, user=get_user_model().objects.get(username="resa"), role=Role.RESEARCHER)
    sha = store(png(tmp_path / "i.png", color=(200, 180, 150)), "image")
    base = {
        "images": ["i.png", "i.png"],
        "question": "Which tool made the change?",
        "format": "choice",
        "options": ["a knife", "a spoon", "a fork"],
        "answer": "C",
    }
    gold = make_item(project, "gold", base, {"images": [sha, sha]})
    Item.objects.filter(pk=gold.pk).update(is_gold=True)
    items = [make_item(project, f"q{i}", {**base, "answer": "A"}, {"images": [sha, sha]}) for i in range(4)]
    return project, gold, items


def participant_page(browser, live_server, token: str, pid: str):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/study/{token}/?PROLIFIC_PID={pid}&STUDY_ID=5eed00000000000000000001&SESSION_ID={pid}")
    page.wait_for_url(f"{live_server.url}/projects/crowd/annotate/")
    return context, page


def answer(page, key: str, previous=None) -> str:
    task = wait_task(page, previous)
    radio = f"input[name=answer][value={key.upper()}]"
    page.wait_for_selector(radio)
    page.keyboard.press(key)
    page.wait_for_function(f"() => document.querySelector('{radio}').checked")
    page.keyboard.press("Enter")
    return task


def test_three_participants_one_abandons_one_fails_gold_and_is_rejected(
    browser, page, login, live_server, crowd_project
):
    project, gold, items = crowd_project
    # The researcher opens the study from the project's page.
    login(page, "resa")
    page.goto(f"{live_server.url}/projects/crowd/")
    page.click("#studies-link")
    page.fill("#id_name", "Pilot")
    page.fill("#id_max_participants", "3")
    page.fill("#id_tasks_per_participant", "2")
    page.fill("#id_completion_code", "CC2026")
    page.click("#study-new button[type=submit]")
    page.wait_for_selector("#study-link")
    link = page.input_value("#study-link")
    study = Study.objects.get()
    assert link == f"{live_server.url}/study/{study.token}/"

    # Participant 1 takes the gold item and walks away (their browser closes).
    leaver_ctx, leaver = participant_page(browser, live_server, study.token, "1ea7e0000000000000000001")
    wait_task(leaver)
    leaver_ctx.close()
    leaver_user = CrowdAccount.objects.get(external_id="1ea7e0000000000000000001").user
    held = Task.objects.filter(annotator=leaver_user, status=TaskStatus.ACTIVE)
    assert held.exists()

    # Participant 2 answers the gold item right and one more item: the completion code.
    good_ctx, good = participant_page(browser, live_server, study.token, "600d00000000000000000002")
    first = answer(good, "c")
    answer(good, "a", first)
    good.wait_for_url(f"{live_server.url}/study/{study.token}/done/", timeout=30_000)
    assert good.inner_text("#completion-code") == "CC2026"
    shot(good, "study_finish")
    # The leaver's live hold (most of its ten minutes left) did not keep the study's only gold item
    # from participant 2: their gold draw took that hold over (annotation/queue/gold.py).
    good_user = CrowdAccount.objects.get(external_id="600d00000000000000000002").user
    assert Annotation.objects.get(annotator=good_user, item=gold).result["answer"] == "C"
    assert Task.objects.get(annotator=leaver_user, item=gold).status == TaskStatus.EXPIRED

    # The leaver's holds lapse (lease expiry moved into the past): their items go back to the queue.
    Task.objects.filter(annotator=leaver_user, status=TaskStatus.ACTIVE).update(
        lease_expires=timezone.now() - timedelta(seconds=1)
    )
    held_items = set(Task.objects.filter(annotator=leaver_user).values_list("item_id", flat=True))

    # Participant 3 answers the gold item wrong, then one item (the leaver's lapsed one among the first).
    bad_ctx, bad = participant_page(browser, live_server, study.token, "bad000000000000000000003")
    first = answer(bad, "a")
    answer(bad, "a", first)
    bad.wait_for_url(f"{live_server.url}/study/{study.token}/done/", timeout=30_000)
    assert bad.inner_text("#completion-code") == "CC2026"
    bad_user = CrowdAccount.objects.get(external_id="bad000000000000000000003").user
    assert set(Annotation.objects.filter(annotator=bad_user).values_list("item_id", flat=True)) & held_items
    assert not Task.objects.filter(annotator=leaver_user, status=TaskStatus.ACTIVE).exists()
    bad_item = Annotation.objects.get(annotator=bad_user, item__is_gold=False).item
    assert bad_item.status == ItemStatus.ANNOTATED

    # The researcher's table: the gold-failing participant is flagged; reject them.
    page.goto(link.replace(f"/study/{study.token}/", f"/projects/crowd/studies/{study.pk}/"))
    row = page.locator("tr[data-participant='bad000000000000000000003']")
    assert row.get_attribute("data-flagged") == "1"
    assert page.locator("tr[data-participant='600d00000000000000000002']").get_attribute("data-flagged") == "0"
    assert page.locator("#participants tbody tr").count() == 3
    shot(page, "study_participants")
    row.locator("input[name=note]").fill("failed the attention check")
    row.locator("[data-reject]").click()
    page.wait_for_selector("tr[data-participant='bad000000000000000000003'][data-status='rejected']")
    assert "went back to the queue" in page.inner_text(".messages")
    bad_item.refresh_from_db()
    assert (bad_item.status, bad_item.annotation_count) == (ItemStatus.PENDING, 0)
    assert not Annotation.objects.filter(annotator=bad_user).exists()
    page.locator("tr[data-participant='600d00000000000000000002'] [data-approve]").click()
    page.wait_for_selector("tr[data-participant='600d00000000000000000002'][data-status='approved']")
    assert StudyParticipant.objects.filter(status="approved").count() == 1
    for ctx in (good_ctx, bad_ctx):
        ctx.close()
