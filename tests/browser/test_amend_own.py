"""An annotator reopens their own last submission in Chromium from "My recent work", amends it in
the workflow's own form (the earlier version kept), and is told why not once it was reviewed."""

import pytest

from annotation.models import Annotation, AnnotationRevision, Role
from annotation.services import review_decide
from tests.annotation.work_factories import valid_result

from .work_helpers import annotate_through_queue, make_item, png, served_media_root, shot, store

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def submitted(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    ann, rev = make_user("ann"), make_user("rev")
    project = make_project("jars", "status", members={ann: Role.ANNOTATOR, rev: Role.REVIEWER}, name="Jar pairs")
    for i in range(2):
        a = store(png(tmp_path / f"a{i}.png", color=(200, 60, 60 + i), mark=f"A{i}"), "image")
        b = store(png(tmp_path / f"b{i}.png", color=(60, 200, 60 + i), mark=f"B{i}"), "image")
        make_item(project, f"pair-{i}", {"image_a": f"a{i}.png", "image_b": f"b{i}.png"}, {"image_a": a, "image_b": b})
    annotate_through_queue(project, ann, [valid_result("quintuplet"), valid_result("quintuplet", 1)])
    return project, ann, rev


def test_annotator_amends_own_submission(page, login, live_server, submitted):
    project, ann, rev = submitted
    newest = Annotation.objects.filter(annotator=ann).order_by("-created_at", "-pk").first()
    login(page, "ann")
    page.goto(f"{live_server.url}/projects/jars/")
    rows = page.eval_on_selector_all(
        "#my-recent-work tr[data-annotation]", "rs => rs.map(r => Number(r.dataset.annotation))"
    )
    assert rows[0] == newest.pk and len(rows) == 2
    page.click(f"#my-recent-work tr[data-annotation='{newest.pk}'] a")
    page.wait_for_url(f"**/projects/jars/my-work/{newest.pk}/")
    # The workflow's own form, filled with the earlier answer.
    page.wait_for_function(
        "() => document.querySelector('#q-state_a') && document.querySelector('#q-state_a').value === 'a closed jar'"
    )
    assert page.input_value("#q-distractor_2") == "break the jar"
    assert page.locator("[data-skip]").is_hidden()
    page.fill("#q-state_a", "a tightly closed jar")
    page.click("[data-submit]")
    page.wait_for_selector("[data-workbench][data-amended='1']")
    assert "Amended" in page.inner_text("[data-notices]")
    shot(page, "amend-own-annotation")
    newest.refresh_from_db()
    assert newest.result["state_a"] == "a tightly closed jar"
    assert AnnotationRevision.objects.get(annotation=newest).result["state_a"] == "a closed jar"

    # A reviewer settles the item while the page is open: saving again is refused with the reason.
    page.fill("#q-state_a", "a shut jar")
    review_decide(item_id=newest.item_id, reviewer=rev, decision="accept", annotation_id=newest.pk)
    page.click("[data-submit]")
    page.wait_for_selector("[data-notices] li.error")
    assert "reviewed already" in page.inner_text("[data-notices]")
    assert page.locator("[data-submit]").is_disabled()
    newest.refresh_from_db()
    assert newest.result["state_a"] == "a tightly closed jar"
    page.goto(f"{live_server.url}/projects/jars/")
    assert page.get_attribute(f"#my-recent-work tr[data-annotation='{newest.pk}']", "data-amendable") == "0"
