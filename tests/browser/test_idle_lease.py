"""Leases renew only while someone is at the page. With the production lease (10 minutes) and the
page's own clock moved by Playwright: a page left alone stops renewing, its lease lapses and another
annotator can take the item; on return the page says so and goes on with the answer kept. A page
in use keeps renewing."""

from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.models import Annotation, Role, Task
from annotation.queue import queue_claim_next
from annotation.queue.rules import DEFAULT_LEASE_SECONDS

from .work_helpers import make_item, mp4, png, served_media_root, store, wait_saved, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MINUTE_MS = 60_000


@pytest.fixture
def one_item(settings, make_user, make_project, tmp_path):
    """One item, so the page has no preloaded next task and the lapsed item is the one offered."""
    settings.MEDIA_ROOT = served_media_root()
    ann, rival = make_user("ann"), make_user("rival")
    project = make_project("idle", "visualtrans", members={ann: Role.ANNOTATOR, rival: Role.ANNOTATOR})
    assert "lease_seconds" not in project.settings  # the production lease
    sha = store(png(tmp_path / "x.png", color=(100, 100, 160)), "image")
    item = make_item(
        project,
        "c0",
        {"images": ["x.png", "x.png"], "question": "How many squares?", "format": "count", "answer": 2},
        {"images": [sha, sha]},
    )
    return project, item, rival


def open_with_clock(page, login, live_server, renewals: list, answered: list | None = None) -> int:
    """Open the annotator page under Playwright's clock; renewals sent go to `renewals`, answered
    ones to `answered`."""
    page.on("request", lambda r: "/renew/" in r.url and renewals.append(r.url))
    page.on("requestfinished", lambda r: "/renew/" in r.url and answered is not None and answered.append(r.url))
    login(page, "ann")
    page.clock.install()  # the page's timers and Date now follow page.clock (time still flows)
    page.goto(f"{live_server.url}/projects/idle/annotate/")
    return int(wait_task(page))


def wait_count(page, seen: list, n: int, timeout_ms: int = 5000) -> None:
    """Wait (real time) until `seen` has n entries."""
    for _ in range(timeout_ms // 100):
        if len(seen) >= n:
            return
        page.wait_for_timeout(100)


def renewal_periods(page, n: int, pause_ms: int = 300) -> None:
    """Let n renewal periods (2 minutes each) of page time pass, each followed by a short real
    pause in which the page's requests go out and a playing video moves on."""
    for _ in range(n):
        page.clock.run_for(2 * MINUTE_MS)
        page.wait_for_timeout(pause_ms)


def test_an_idle_page_stops_renewing_and_says_the_lease_lapsed_on_return(page, login, live_server, one_item):
    project, item, rival = one_item
    renewals = []
    task = open_with_clock(page, login, live_server, renewals)
    page.fill("#qa-answer", "2")
    wait_saved(page)

    # The annotator walks away for 22 minutes: the page renews nothing.
    for _ in range(22):
        page.clock.run_for(MINUTE_MS)
    page.wait_for_timeout(300)  # a renewal would be on the wire by now
    assert renewals == []
    assert page.inner_text("[data-lease]") == "lease expired"
    assert page.locator(".notice").count() == 0  # nobody is there to read it yet

    # Meanwhile on the server the lease ran out (its clock did not move: move the row) and another
    # annotator took the item; then they left it too.
    Task.objects.filter(pk=task).update(lease_expires=timezone.now() - timedelta(seconds=1))
    taken = queue_claim_next(project=project, user=rival)
    assert taken.item_id == item.pk and Task.objects.get(pk=task).status == "expired"
    Task.objects.filter(pk=taken.pk).update(lease_expires=timezone.now() - timedelta(seconds=1))

    # Back at the desk: the first move of the mouse brings the message.
    page.mouse.move(300, 300)
    notice = page.wait_for_selector(".notice:has-text('lapsed while you were away')")
    assert "about 22 minutes without activity" in notice.inner_text()
    assert "Your answer is kept in this browser" in notice.inner_text()
    assert renewals == []

    # Continue: the old task cannot come back (the rival's took its place), so the page claims again;
    # the same item comes back as a new task with the answer typed before.
    page.click(".notice button:has-text('Continue')")
    again = int(wait_task(page, str(task)))
    assert Task.objects.get(pk=again).item_id == item.pk and Task.objects.get(pk=again).annotator.username == "ann"
    assert page.input_value("#qa-answer") == "2"
    wait_saved(page)
    page.focus("#qa-answer")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-queue-empty]")
    assert list(Annotation.objects.values_list("task_id", "result")) == [(again, {"answer": 2, "flags": []})]


def test_an_active_page_keeps_renewing(page, login, live_server, one_item):
    renewals, answered = [], []
    task = open_with_clock(page, login, live_server, renewals, answered)
    page.fill("#qa-answer", "2")
    wait_saved(page)

    # 24 minutes of work without typing: looking, moving the pointer, scrolling.
    for minute in range(24):
        if minute % 2:
            page.mouse.wheel(0, 40)
            page.wait_for_timeout(300)  # the scroll events come in the next frames, before time jumps
        else:
            page.mouse.move(200 + 10 * minute, 300)
        page.clock.run_for(MINUTE_MS)
    # A renewal every 2 minutes (a third of the lease, at most 2 minutes).
    wait_count(page, answered, 12)
    assert len(renewals) == len(answered) == 12
    assert page.inner_text("[data-lease]").startswith("lease ")
    held = Task.objects.get(pk=task)
    assert held.status == "active"
    assert held.lease_expires > timezone.now() + timedelta(seconds=DEFAULT_LEASE_SECONDS - 60)
    assert page.locator(".notice").count() == 0

    # A short pause (3 minutes) is no absence: the next sign of life renews at once.
    for _ in range(3):
        page.clock.run_for(MINUTE_MS)
    page.wait_for_timeout(300)
    assert len(renewals) == 12
    page.mouse.move(100, 100)
    wait_count(page, answered, 13)
    assert len(renewals) == len(answered) == 13
    assert page.locator(".notice").count() == 0


@pytest.fixture
def video_item(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    ann = make_user("ann")
    project = make_project("idle", "oscbench", members={ann: Role.ANNOTATOR})
    video = store(mp4(tmp_path / "gen.mp4", seconds=4), "video")
    make_item(
        project,
        "gen-0",
        {
            "video": "gen.mp4",
            "prompt": "A hand slices a tomato",
            "generator": "g",
            "scenario": "regular",
            "action": "slice",
            "action_category": "cutting",
            "object": "tomato",
            "object_category": "vegetable",
        },
        {"video": video},
    )
    return project


def test_a_video_playing_counts_once_through_and_its_loops_do_not(page, login, live_server, video_item):
    """Watching is being there; a looping video left alone is not (it used to renew forever)."""
    renewals, answered = [], []
    open_with_clock(page, login, live_server, renewals, answered)
    page.wait_for_function("() => document.querySelector('video').duration > 3.5")
    playing = "() => { const v = document.querySelector('video'); return !v.paused && !v.ended; }"

    # Played through once with nobody touching anything after the key: renewals go on while it
    # plays (each cycle: two minutes of page time, then the video plays on for a moment)...
    page.keyboard.press("Space")
    during = 0
    while page.evaluate(playing):
        renewal_periods(page, 1, pause_ms=600)
        during += 1
    wait_count(page, answered, len(renewals))
    assert during >= 3 and len(renewals) >= 2  # the first for the key, the others for the playback
    # ...and stop when it has ended (after one for its last moments, since the last renewal).
    renewal_periods(page, 1)
    played = len(renewals)
    renewal_periods(page, 3)
    assert len(renewals) == played

    # Loop on, play, and walk away: the keys renew at once (renewals had paused), the first round
    # once more at the next tick; after that the looping video no longer counts.
    page.keyboard.press("l")
    page.keyboard.press("Space")
    page.wait_for_function(
        """() => { const v = document.querySelector('video');
        if (v.currentTime > 3) window.nearEnd = true; return window.nearEnd && v.currentTime < 1; }""",
        timeout=15_000,
    )
    renewal_periods(page, 1)
    looped = len(renewals)
    renewal_periods(page, 4)
    assert page.evaluate(playing)  # still looping
    assert len(renewals) == looped
    assert looped == played + 2
