"""A researcher's walkthrough, from start to finish in Chromium with a real Celery worker.

A researcher who is not a superuser (researcher of a seed project, so they may create projects)
creates an OSCBench video-rating project, adds members from a CSV, imports two videos (the worker
imports them), opens a Prolific study link; three participants arrive in their own browsers: one
abandons (their hold returns when its production lease has lapsed, the expiry moved into the past
in the database), one finishes with the completion code, one fails the gold item, finishes, is
flagged and rejected. The CSV's members rate the rest, the researcher adjudicates the disputed
item on the review page, freezes a release, launches a Random-backend job from the admin, and
reads the leaderboard and the correlation page back.

Two steps go through the services rather than the browser: the members' own ratings (the rating
page has its own tests) and the gold item, which the test marks gold with `gold_scores` in the
database, as the crowd study test does for its gold item (an import line can carry both too:
`"gold": true, "gold_scores": {...}`, tests/annotation/test_gold_ratings.py).
"""

import re
import zipfile
from datetime import timedelta

import pytest
from django.utils import timezone

from annotation.importing.samples import write_sample_dataset
from annotation.models import (
    Annotation,
    CrowdAccount,
    Item,
    ItemStatus,
    Project,
    Release,
    Review,
    Role,
    Study,
    Task,
    TaskStatus,
)
from annotation.queue import annotation_submit, queue_claim_next
from inference import services
from inference.models import InferenceJob
from tests.helpers.browser import OSC_CRITERIA, option_texts, wait_import_done
from tests.inference.worker import start_worker, stop_worker

from .work_helpers import served_media_root, shot, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CSV = b"username_or_email,role\ncarol,annotator\ndave@example.org,annotator\n"
# Prolific ids are 24 hexadecimal digits (the study link checks them).
PIDS = {"leaver": "1ea7e0000000000000000001", "good": "600d00000000000000000002", "bad": "bad000000000000000000003"}
GOLD_SCORES = {"object": 4, "action": 4, "osc_accuracy": 4, "realism": 4}
# What the members give each undisputed video (gen-0 made 0 and 2, gen-1 made 1 and 3).
LEVELS = {"oscbench-00000": 2, "oscbench-00001": 3, "oscbench-00002": 5, "oscbench-00003": 4}


def scores(**changes):
    return {"scores": {**{c: 4 for c in OSC_CRITERIA}, "subject": None, **changes}}


def participant(browser, live_server, token: str, pid: str):
    """A participant's own browser arriving from Prolific with their ids: straight to the rating page."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.goto(f"{live_server.url}/study/{token}/?PROLIFIC_PID={pid}&STUDY_ID=5eed00000000000000000001&SESSION_ID={pid}")
    page.wait_for_url(f"{live_server.url}/projects/cuts/annotate/")
    return context, page


def rate_video(page, digit: str, previous=None) -> str:
    """Watch the task's video through (at 4x) and rate: subject N/A, every other criterion `digit`."""
    task = wait_task(page, previous)
    page.wait_for_function("() => document.querySelector('video') && document.querySelector('video').duration > 0.5")
    page.evaluate("document.querySelector('video').playbackRate = 4")
    page.keyboard.press("Space")
    page.wait_for_selector("[data-workbench][data-watched]", timeout=20_000)
    page.keyboard.press("0")
    for _ in OSC_CRITERIA[1:]:
        page.keyboard.press(digit)
    page.keyboard.press("Control+Enter")
    return task


def rate_until_empty(project, user, disputed_item_id: int) -> None:
    """A member rates every task the queue offers them (through the queue's services)."""
    while (task := queue_claim_next(project=project, user=user)) is not None:
        if task.item.is_gold:
            result = scores()
        elif task.item_id == disputed_item_id:  # the crowd participant gave 4s; carol agrees but for realism
            result = scores(realism=1)  # 4 vs 1: a spread of 3 marks the item for adjudication
        else:
            level = LEVELS[task.item.external_id]
            result = scores(**{c: level for c in OSC_CRITERIA[1:]})
        annotation_submit(task_id=task.pk, user=user, result=result, time_spent_ms=5000)


def test_researcher_runs_a_whole_study(
    browser, page, login, live_server, make_user, make_project, settings, broker, tmp_path
):
    settings.MEDIA_ROOT = served_media_root()  # the participants' pages load the imported videos
    lead = make_user("lead")
    make_project("seed", "status", members={lead: Role.RESEARCHER})
    carol, dave = make_user("carol"), make_user("dave")
    endpoint = services.endpoint_create(name="random-judge", backend="random")
    data = tmp_path / "data"
    items_file = write_sample_dataset(data, "oscbench", 4, distinct=2)
    upload = tmp_path / "videos.zip"
    with zipfile.ZipFile(upload, "w") as zf:
        zf.write(items_file, "items.jsonl")
        for p in (data / "vid").iterdir():
            zf.write(p, f"vid/{p.name}")
    worker = start_worker("walkthrough", tmp_path / "worker.log")
    contexts = []
    try:
        # 1. A new OSCBench project from the home page; the creator is its admin.
        login(page, "lead")
        assert not lead.is_staff and not lead.is_superuser
        page.click("#new-project")
        page.wait_for_url("**/projects/new/")
        page.fill("#id_name", "Cutting videos")
        page.fill("#id_slug", "cuts")
        page.select_option("#id_protocol", "oscbench")
        page.fill("#id_annotations_per_item", "2")
        page.fill("#id_gold_share", "1")  # every rater's first task is the gold video
        page.click("#project-form button[type=submit]")
        page.wait_for_url(f"{live_server.url}/projects/cuts/members/")
        project = Project.objects.get(slug="cuts")
        assert (project.protocol, project.annotations_per_item, project.settings["gold_share"]) == ("oscbench", 2, 1.0)

        # 2. Members from a CSV (by username and by e-mail).
        page.set_input_files("#id_csv", files=[{"name": "members.csv", "mimeType": "text/csv", "buffer": CSV}])
        page.click("#member-csv button[type=submit]")
        page.wait_for_selector("#csv-report")
        assert page.eval_on_selector_all("#csv-report tr[data-line]", "rs => rs.map(r => r.dataset.outcome)") == [
            "added",
            "added",
        ]

        # 3. Import the videos; the worker does it while the run's page follows.
        page.goto(f"{live_server.url}/projects/cuts/import/")
        page.set_input_files("#id_file", str(upload))
        page.click("#import-form button[type=submit]")
        page.wait_for_url(f"{live_server.url}/projects/cuts/imports/*/")
        assert wait_import_done(page) == "finished"
        assert page.locator("#created").inner_text() == "4"
        videos = list(Item.objects.filter(project=project).order_by("external_id"))
        assert [i.status for i in videos] == [ItemStatus.PENDING] * 4
        gold = Item.objects.create(
            project=project,
            external_id="gold-1",
            is_gold=True,
            media=videos[0].media,
            payload={**videos[0].payload, "gold_scores": GOLD_SCORES},
        )

        # 4. A Prolific study link: quota 3, gold + one video each, a pass threshold.
        page.goto(f"{live_server.url}/projects/cuts/")
        page.click("#studies-link")
        page.fill("#id_name", "Pilot")
        page.fill("#id_max_participants", "3")
        page.fill("#id_tasks_per_participant", "2")
        page.fill("#id_completion_code", "CUTS2026")
        page.fill("#id_return_url", "https://app.prolific.com/submissions/complete?cc={code}")
        page.fill("#id_gold_pass_threshold", "0.8")
        page.click("#study-new button[type=submit]")
        page.wait_for_selector("#study-link")
        study = Study.objects.get(project=project)
        assert page.input_value("#study-link") == f"{live_server.url}/study/{study.token}/"
        shot(page, "walkthrough_study_link")

        # 5. The leaver takes their first task (the gold video) and closes the browser; the hold
        #    lapses (its production lease's expiry moved into the past) and the item is free again.
        ctx, leaver = participant(browser, live_server, study.token, PIDS["leaver"])
        wait_task(leaver)
        # The page holds its next task too (the preload, 200 ms after the first shows): let that
        # claim land before the browser closes, or it could be answered after the leases below are
        # moved and hold a video out of everyone's reach for a whole lease (seen once in CI).
        leaver.wait_for_function("() => window.statelabWorkbench.preloaded && window.statelabWorkbench.preloaded.task")
        ctx.close()
        leaver_user = CrowdAccount.objects.get(external_id=PIDS["leaver"]).user
        held = Task.objects.filter(annotator=leaver_user, status=TaskStatus.ACTIVE)
        assert gold.pk in set(held.values_list("item_id", flat=True))
        held.update(lease_expires=timezone.now() - timedelta(seconds=1))

        # 6. The next participant gets the returned gold video, rates it right and one more: the code.
        ctx, good = participant(browser, live_server, study.token, PIDS["good"])
        contexts.append(ctx)
        rate_video(good, "4", rate_video(good, "4"))
        good.wait_for_url(f"{live_server.url}/study/{study.token}/done/", timeout=30_000)
        assert good.inner_text("#completion-code") == "CUTS2026"
        good_user = CrowdAccount.objects.get(external_id=PIDS["good"]).user
        assert Annotation.objects.filter(annotator=good_user, item=gold).exists()
        assert not Task.objects.filter(annotator=leaver_user, item=gold, status=TaskStatus.ACTIVE).exists()
        disputed = Annotation.objects.get(annotator=good_user, item__is_gold=False).item

        # 7. A participant rates the gold video far off (1s against 4s), finishes all the same.
        ctx, bad = participant(browser, live_server, study.token, PIDS["bad"])
        contexts.append(ctx)
        rate_video(bad, "1", rate_video(bad, "1"))
        bad.wait_for_url(f"{live_server.url}/study/{study.token}/done/", timeout=30_000)
        assert bad.inner_text("#completion-code") == "CUTS2026"
        bad_user = CrowdAccount.objects.get(external_id=PIDS["bad"]).user
        bad_item = Annotation.objects.get(annotator=bad_user, item__is_gold=False).item

        # 8. The participants table: the gold-failing one flagged; reject them, approve the other.
        page.goto(f"{live_server.url}/projects/cuts/studies/{study.pk}/")
        assert page.locator("#participants tbody tr").count() == 3
        row = page.locator(f"tr[data-participant='{PIDS['bad']}']")
        assert row.get_attribute("data-flagged") == "1"
        assert page.locator(f"tr[data-participant='{PIDS['good']}']").get_attribute("data-flagged") == "0"
        row.locator("input[name=note]").fill("rated the attention video far off")
        row.locator("[data-reject]").click()
        page.wait_for_selector(f"tr[data-participant='{PIDS['bad']}'][data-status='rejected']")
        assert not Annotation.objects.filter(annotator=bad_user).exists()
        bad_item.refresh_from_db()
        assert bad_item.annotation_count == (1 if bad_item.pk == disputed.pk else 0)
        page.locator(f"tr[data-participant='{PIDS['good']}'] [data-approve]").click()
        page.wait_for_selector(f"tr[data-participant='{PIDS['good']}'][data-status='approved']")

        # 9. The CSV's members rate what is left; carol disagrees with the crowd on realism.
        rate_until_empty(project, carol, disputed.pk)
        rate_until_empty(project, dave, disputed.pk)
        for item in videos:
            item.refresh_from_db()
            assert (item.status, item.annotation_count) == (ItemStatus.ANNOTATED, 2)
        disputed.refresh_from_db()
        assert [f["field"] for f in disputed.disagreement["fields"]] == ["scores.realism"]

        # 10. Adjudication: the disputed video first; the researcher sets realism to 3, then accepts the calm ones.
        page.goto(f"{live_server.url}/projects/cuts/review/")
        page.wait_for_selector("tr[data-item]")
        assert int(page.get_attribute("tr[data-item]", "data-item")) == disputed.pk
        page.keyboard.press("Enter")
        page.wait_for_url(f"**/projects/cuts/review/{disputed.pk}/")
        realism = page.locator("[data-disagreement] tr[data-field='scores.realism']")
        assert "spread by 3 points" in realism.inner_text()
        shot(page, "walkthrough_adjudication")
        page.keyboard.press("e")
        page.select_option("[data-editor] select[name='scores.realism']", "3")
        current = page.url
        page.click("[data-save-edit]")
        for _ in range(3):  # each save or accept opens the next item
            page.wait_for_url(lambda url, seen=current: url != seen and re.search(r"/review/\d+/$", url))
            page.wait_for_selector("table.compare")
            current = page.url
            page.keyboard.press("1")
            page.keyboard.press("a")
        page.wait_for_url(f"{live_server.url}/projects/cuts/review/")
        assert Review.objects.get(item=disputed).result["scores"]["realism"] == 3
        assert set(Item.objects.filter(project=project, is_gold=False).values_list("status", flat=True)) == {"verified"}

        # 11. A release frozen.
        page.goto(f"{live_server.url}/projects/cuts/releases/")
        page.fill("#id_version", "v1")
        page.click("#freeze-form button[type=submit]")
        page.wait_for_selector('#release-list tr[data-version="v1"]')
        release = Release.objects.get(project=project, version="v1")
        assert release.item_count == 4

        # 12. A job from the admin (found from the header), run by the worker.
        page.click("#admin-link")
        page.wait_for_url(f"{live_server.url}/admin/")
        page.goto(f"{live_server.url}/admin/inference/inferencejob/add/")
        assert sorted(option_texts(page, "#id_project")) == ["cuts", "seed"]
        assert option_texts(page, "#id_release") == ["cuts@v1"]
        assert option_texts(page, "#id_endpoint") == ["random-judge"]
        page.select_option("#id_endpoint", str(endpoint.pk))
        page.select_option("#id_project", str(project.pk))
        page.select_option("#id_release", str(release.pk))
        shot(page, "walkthrough_admin_job")
        page.click('input[name="_save"]')
        page.wait_for_url(f"{live_server.url}/jobs/*/")
        page.wait_for_function(
            "() => document.getElementById('job-status').textContent === 'finished'", timeout=120_000
        )
        job = InferenceJob.objects.get()
        assert (job.project, job.release, job.created_by) == (project, release, lead)

        # 13. The analysis read back: generators ranked by the (adjudicated) human ratings, the judge's correlation.
        page.goto(f"{live_server.url}/projects/cuts/leaderboard/")
        models = [r.get_attribute("data-model") for r in page.locator("#panel-main tbody tr").all()]
        assert set(models) >= {"gen-0", "gen-1", "Random"}
        # Realism is normalised (score - 1) / 4 and averaged per generator; the disputed video counts
        # with its adjudicated 3, not the raters' 4 and 1.
        realism = page.evaluate("""() => {
            const i = [...document.querySelectorAll('#panel-main thead th')]
                .findIndex(t => t.dataset.key === 'realism');
            return Object.fromEntries([...document.querySelectorAll('#panel-main tbody tr')].map(
                r => [r.dataset.model, Number(r.children[i].dataset.value)])); }""")
        generator = disputed.payload["generator"]
        sibling = next(i for i in videos if i.payload["generator"] == generator and i.pk != disputed.pk)
        assert realism[generator] == pytest.approx((0.5 + (LEVELS[sibling.external_id] - 1) / 4) / 2, abs=1e-3)
        shot(page, "walkthrough_leaderboard")
        page.goto(f"{live_server.url}/projects/cuts/correlation/")
        judge = page.locator('#judges tr[data-model="random-judge"]')
        assert judge.count() == 1
        assert "n=4" in judge.inner_text()
    finally:
        for ctx in contexts:
            ctx.close()
        stop_worker(worker)
