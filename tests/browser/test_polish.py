"""What a newcomer first sees, in Chromium: the annotate page says how much is left (never a
database id), a submit's confirmation never moves the workspace, an empty queue shows no lease
clock, a contradictory QA answer is refused before it is sent, a description's `code` shows as code
(and nothing in it as markup), the rubric opens beside the video with what 1 and 5 mean; the release
form's version pattern compiles under the browser's "v" flag and flags a bad version; the job page
counts chunks in words; every scatter panel of the correlation page is drawn in a full-page
screenshot."""

from __future__ import annotations

import json

import pytest

from annotation.models import Annotation, Release, Role
from inference import services
from inference.models import InferenceJob
from inference.services import predictions_import
from protocols.oscbench import CRITERIA
from tests.evaluation.factories import make_release, rate
from tests.helpers.items import osc_payload
from tests.inference import factories

from .work_helpers import make_item, mp4, png, served_media_root, store, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESCRIPTION = "Label with care: run `manage.py demo` first.\n<b>not bold</b> and a lone ` backtick."


@pytest.fixture
def choice_project(settings, make_user, make_project, tmp_path):
    """Three VisualTrans choice questions on one image pair."""
    settings.MEDIA_ROOT = served_media_root()
    ann = make_user("ann")
    project = make_project("vt", "visualtrans", members={ann: Role.ANNOTATOR}, description=DESCRIPTION)
    images = [store(png(tmp_path / f"i{k}.png", color=(40 * k, 90, 160)), "image") for k in range(2)]
    items = [
        make_item(
            project,
            f"q{i}",
            {
                "images": ["i0.png", "i1.png"],
                "question": f"Which tool was used? ({i})",
                "format": "choice",
                "options": ["knife", "spoon", "fork"],
            },
            {"images": images},
        )
        for i in range(3)
    ]
    return project, items


def workspace_top(page) -> float:
    return page.evaluate("document.querySelector('[data-workspace]').getBoundingClientRect().top")


def test_annotate_page_progress_steady_workspace_and_no_lease_when_done(page, login, live_server, choice_project):
    _project, items = choice_project
    login(page, "ann")
    page.goto(f"{live_server.url}/projects/vt/annotate/")
    first = wait_task(page)
    label = page.locator("[data-task-label]")
    assert label.inner_text() == "3 of 3 left"
    assert "Task" not in page.inner_text(".bench-bar")
    top = workspace_top(page)

    page.keyboard.press("a")
    page.keyboard.press("Enter")
    second = wait_task(page, first)
    # The confirmation is on screen, floating: the workspace starts where it did.
    page.wait_for_selector("[data-notices] li.notice.ok.toast:has-text('Submitted.')")
    assert workspace_top(page) == top
    assert label.inner_text() == "2 of 3 left"

    page.keyboard.press("b")
    page.keyboard.press("Enter")
    third = wait_task(page, second)
    assert workspace_top(page) == top and label.inner_text() == "1 of 3 left"

    page.keyboard.press("c")
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-queue-empty]")
    assert Annotation.objects.filter(item__in=items).count() == 3 and third
    # Nothing left: no task, so no lease clock (not even for the second the clock's tick takes).
    assert page.inner_text("[data-lease]") == ""
    page.wait_for_timeout(1500)
    assert page.inner_text("[data-lease]") == "" and label.inner_text() == "none left"


def test_contradictory_qa_answer_is_refused_in_the_page(page, login, live_server, choice_project):
    _project, items = choice_project
    requests = []
    page.on("request", lambda r: requests.append(r.url) if "/submit/" in r.url else None)
    login(page, "ann")
    page.goto(f"{live_server.url}/projects/vt/annotate/")
    first = wait_task(page)
    page.keyboard.press("b")
    page.keyboard.press("m")  # the flag "no listed option is correct"
    page.keyboard.press("Enter")

    notice = page.wait_for_selector("[data-notices] li.notice.error")
    assert "contradicts the answer B" in notice.inner_text()
    assert requests == [] and not Annotation.objects.exists()
    page.keyboard.press("m")
    page.keyboard.press("Enter")
    wait_task(page, first)
    assert [a.result for a in Annotation.objects.all()] == [{"answer": "B", "flags": []}]


def test_description_code_is_shown_as_code_and_nothing_as_markup(page, login, live_server, choice_project):
    login(page, "ann")
    page.goto(f"{live_server.url}/projects/vt/annotate/")
    wait_task(page)
    page.click(".guide summary")
    guide = page.locator(".guide [data-inline-code]")
    assert guide.locator("code").all_inner_texts() == ["manage.py demo"]
    assert guide.locator("b").count() == 0
    text = guide.inner_text()
    assert "run manage.py demo first." in text and "<b>not bold</b> and a lone ` backtick." in text


def test_rubric_opens_beside_the_video_with_the_scales_ends(
    page, login, live_server, settings, make_user, make_project, tmp_path
):
    settings.MEDIA_ROOT = served_media_root()
    rater = make_user("rater")
    project = make_project(
        "osc",
        "oscbench",
        members={rater: Role.ANNOTATOR},
        settings={"rubric": {"realism": "Could it be real footage? 1 = clearly broken, 5 = could pass for real."}},
    )
    video = store(mp4(tmp_path / "gen.mp4", seconds=1), "video")
    make_item(project, "g1", {"video": "gen.mp4", "prompt": "A hand folds a towel"}, {"video": video})
    login(page, "rater")
    page.goto(f"{live_server.url}/projects/osc/annotate/")
    wait_task(page)
    assert page.inner_text("[data-scale-anchors]") == "1 = bad … 5 = excellent"

    page.keyboard.press("r")

    panel = page.locator("[data-rubric-dialog]")
    assert panel.is_visible()
    assert "1 = clearly broken, 5 = could pass for real." in panel.locator("[data-rubric=realism]").inner_text()
    video_box = page.locator("video").bounding_box()
    panel_box = panel.bounding_box()
    apart = (
        panel_box["x"] >= video_box["x"] + video_box["width"] or panel_box["y"] >= video_box["y"] + video_box["height"]
    )
    assert apart, (video_box, panel_box)
    # The video is not behind a modal: it still takes a click.
    assert page.evaluate("() => !document.querySelector('dialog[open]')")
    page.keyboard.press("Escape")
    assert not panel.is_visible()


def test_release_version_pattern_compiles_and_flags_a_bad_version(page, login, live_server, make_user, make_project):
    lead = make_user("lead")
    make_project("rel", "status", members={lead: Role.ADMIN})
    login(page, "lead")
    page.goto(f"{live_server.url}/projects/rel/releases/")
    version = page.locator("#id_version")

    # The browser compiles a pattern attribute with the "v" flag; an invalid one turns the check off.
    compiled = page.evaluate(
        """() => { const p = document.getElementById('id_version').pattern;
                   try { new RegExp('^(?:' + p + ')$', 'v'); return true; } catch (e) { return e.message; } }"""
    )
    assert compiled is True
    for bad in ("v 1", "-v1", "v1/2", "v1!"):
        version.fill(bad)
        assert version.evaluate("el => el.validity.patternMismatch") is True, bad
    for good in ("v1", "v1.0-rc_2", "2024"):
        version.fill(good)
        assert version.evaluate("el => el.validity.valid") is True, good
    version.fill("v 1")
    page.click("#freeze-form button[type=submit]")
    assert version.evaluate("el => el.matches(':invalid')") and page.url.endswith("/projects/rel/releases/")
    assert not Release.objects.exists()


def test_job_page_counts_chunks_in_words(page, login, live_server, make_user, make_project, eager, tmp_path):
    researcher = make_user("res")
    project = make_project("st", "status", members={researcher: Role.RESEARCHER})
    release = factories.release_of(project, factories.status_items(project, 2, tmp_path))
    endpoint = services.endpoint_create(name="random", backend="random")
    job = services.job_create(endpoint=endpoint, project=project, release=release, params={"chunk_size": 50})
    job.refresh_from_db()
    assert job.status == "finished"

    login(page, "res")
    page.goto(f"{live_server.url}/jobs/{job.pk}/")

    assert page.inner_text("#job-chunks") == "1 chunk · 1 finished"
    assert InferenceJob.objects.count() == 1


def test_every_scatter_panel_is_drawn_in_a_full_page_screenshot(
    page, login, live_server, make_user, make_project, tmp_path
):
    researcher = make_user("res")
    project = make_project("oscb", "oscbench", members={researcher: Role.RESEARCHER})
    levels = {"genA0": 5, "genA1": 4, "genA2": 3, "genB0": 2, "genB1": 3, "genB2": 1}
    release = make_release(project, {e: osc_payload(e[:4], int(e[-1]), "regular") for e in levels})
    for ext, level in levels.items():
        for rater in ("r1", "r2"):
            rate(ext, project, rater, {c: level for c in CRITERIA})
    for judge, shift in (("judge-x", 0), ("judge-y", 1)):
        lines = [
            json.dumps({"item": e, "query": "judge", "answer": {c: max(1, lv - shift) for c in CRITERIA}})
            for e, lv in levels.items()
        ]
        predictions_import(project=project, lines=lines, model_name=judge, release=release)

    login(page, "res")
    page.goto(f"{live_server.url}/projects/oscb/correlation/")
    panels = page.locator("figure.scatter img")
    assert panels.count() == 2 * len(CRITERIA)
    # A full-page screenshot, as a reader takes one: the last panels lie far below the fold.
    page.screenshot(path=str(tmp_path / "correlation.png"), full_page=True)
    page.wait_for_function(
        "() => [...document.querySelectorAll('figure.scatter img')].every(i => i.complete && i.naturalWidth > 0)",
        timeout=15_000,
    )
    # Each panel is the judge-vs-human picture of its criterion, drawn with its points.
    last = panels.nth(2 * len(CRITERIA) - 1).get_attribute("src")
    body = page.request.get(f"{live_server.url}{last}").text()
    assert body.count('class="point"') == len(levels) and "judge-y vs humans" in body
