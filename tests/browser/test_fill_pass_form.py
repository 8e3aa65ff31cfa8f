"""The annotation form of a labelling pass in Chromium (annotation/fill_pass.py): verified STATUS
items without category and difference, sent through a pass, show the pair and their descriptions
and ask only those two fields, by keyboard; nothing else of the item reaches the browser, and a
reviewer verifies the answer on the review page's reduced table."""

import pytest

from annotation.fill_pass import fill_pass_start
from annotation.models import Annotation, Item, ItemStatus, Role, Suggestion

from .work_helpers import capture_api, make_item, png, shot, store, wait_task

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SECRET = "PROVENANCE-video-4f2a"


@pytest.fixture
def pass_project(settings, make_user, make_project, tmp_path):
    from .work_helpers import served_media_root

    settings.MEDIA_ROOT = served_media_root()
    ann, rev, lab = make_user("ann"), make_user("rev"), make_user("lab")
    project = make_project(
        "fillp", "status", members={ann: Role.ANNOTATOR, rev: Role.REVIEWER, lab: Role.RESEARCHER}, name="Pass"
    )
    items = []
    for i in range(2):
        ia = store(png(tmp_path / f"a{i}.png", color=(200, 60, 60), mark=f"A{i}"), "image")
        ib = store(png(tmp_path / f"b{i}.png", color=(60, 200, 60), mark=f"B{i}"), "image")
        payload = {
            "image_a": f"a{i}.png",
            "image_b": f"b{i}.png",
            "state_a": f"a closed drawer {i}",
            "state_b": f"an open drawer {i}",
            "change": "pull the drawer open",
            "change_distractors": ["push the drawer shut", "lift the drawer", "paint the drawer"],
            "extra": {"video_id": SECRET},
        }
        item = make_item(project, f"d{i}", payload, {"image_a": ia, "image_b": ib})
        Item.objects.filter(pk=item.pk).update(status=ItemStatus.VERIFIED)
        items.append(item)
    # A model's quintuplet stored earlier: a pass's form offers no suggestion.
    Suggestion.objects.create(
        item=items[0], source="job:3 tiny", result={"category": "other", "difference": "significant"}
    )
    fill_pass_start(project=project, actor=lab)
    return project, items


def test_the_pass_form_asks_only_the_missing_fields(page, login, live_server, pass_project):
    project, items = pass_project
    answers = []
    capture_api(page, answers)
    login(page, "ann")
    page.goto(f"{live_server.url}/projects/fillp/annotate/")
    first = wait_task(page)

    form = page.locator("[data-fill-pass]")
    assert form.count() == 1
    # No text field of the full quintuplet form; the two images and the descriptions as context.
    assert page.locator(".quintuplet-form input[type=text]").count() == 0
    assert page.locator(".pair img").count() == 2
    context = page.inner_text("[data-fill-context]")
    assert "a closed drawer" in context and "pull the drawer open" in context and "paint the drawer" in context
    assert page.locator("[data-fill-field]").count() == 2
    assert page.locator("input[name=category]").count() == 3 and page.locator("input[name=difference]").count() == 2
    assert page.locator("input[type=radio]:checked").count() == 0  # no suggestion pre-fills it
    assert page.locator(".badge.machine:visible").count() == 0
    shot(page, "fill-pass-form")

    # Submitting with nothing picked is stopped on the page, naming the field.
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("text=Pick the category.")
    assert not Annotation.objects.exists()
    page.keyboard.press("f")
    page.keyboard.press("g")
    assert page.is_checked("input[name=category][value=functional]")
    page.keyboard.press("Control+Enter")
    wait_task(page, first)
    (annotation,) = Annotation.objects.all()
    assert annotation.result == {"category": "functional", "difference": "significant"}

    page.keyboard.press("p")
    page.keyboard.press("s")
    page.keyboard.press("Control+Enter")
    page.wait_for_selector("[data-queue-empty]")
    results = sorted(tuple(sorted(r.items())) for r in Annotation.objects.values_list("result", flat=True))
    assert results == [
        (("category", "functional"), ("difference", "significant")),
        (("category", "positional"), ("difference", "slight")),
    ]
    # What reached the browser: never the items' provenance, nor the model's stored answer.
    bodies = "\n".join(body for _url, _status, body in answers)
    assert "tasks/next" in "\n".join(url for url, _s, _b in answers)
    assert SECRET not in bodies and "job:3 tiny" not in bodies


def test_a_reviewer_verifies_a_pass_item(page, login, live_server, pass_project):
    project, items = pass_project
    from tests.helpers.timed import claim_and_submit

    ann = project.memberships.get(role=Role.ANNOTATOR).user
    submitted = claim_and_submit(project, ann, {"category": "other", "difference": "slight"}, ms=4000)
    item_id = submitted.annotation.item_id
    login(page, "rev")
    page.goto(f"{live_server.url}/projects/fillp/review/{item_id}/")
    page.wait_for_selector("[data-compare]")
    assert [r.get_attribute("data-field") for r in page.locator("[data-compare] tbody tr").all()] == [
        "category",
        "difference",
    ]
    assert "a closed drawer" in page.inner_text("[data-review-text]")
    page.click("[data-accept]")
    page.wait_for_function("() => document.querySelector('[data-review-detail]').dataset.decided === 'accept'")
    item = Item.objects.get(pk=item_id)
    assert item.status == ItemStatus.VERIFIED
    assert (item.payload["category"], item.payload["difference"]) == ("other", "slight")
    assert item.payload["state_a"].startswith("a closed drawer")
