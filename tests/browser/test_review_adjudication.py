"""Adjudication in Chromium: disputed items first in the queue, the disagreement panel, and box
review (large image with zoom, each annotator's box, the merged box dragged and resized, the state
picked from the candidate labels)."""
import json

import pytest

from annotation.models import Item, Review, Role

from .work_helpers import annotate_through_queue, make_item, png, served_media_root, shot, store

CRITERIA = ("subject", "object", "action", "osc_accuracy", "osc_consistency", "scene", "realism", "aesthetics")


def rating(**changes):
    return {"scores": {**{c: 3 for c in CRITERIA}, "subject": None, **changes}}


def canvas_rect(page):
    page.locator("[data-merged-canvas]").scroll_into_view_if_needed()
    return page.evaluate("(() => { const r = document.querySelector('[data-merged-canvas]').getBoundingClientRect();"
                         " return {x: r.left, y: r.top, w: r.width, h: r.height}; })()")


def merged_box(page):
    return json.loads(page.get_attribute("[data-merged-bbox]", "data-bbox"))


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_box_review_drags_the_merged_box_and_picks_the_state(page, login, live_server, make_user, make_project, settings, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    a1, a2, rev = make_user("bx1"), make_user("bx2"), make_user("bxrev")
    project = make_project("bxadj", "changeit", members={a1: Role.ANNOTATOR, a2: Role.ANNOTATOR, rev: Role.REVIEWER},
                           annotations_per_item=2, name="Apples")
    image = store(png(tmp_path / "apple.png", color=(90, 140, 60), size=(640, 480), shape=(60, 60, 400, 300)), "image")
    item = make_item(project, "apple-1", {"image": "apple.png", "object": "apple", "state": "peeled apple",
                                          "distractors": ["whole apple", "sliced apple"]}, {"image": image})
    annotate_through_queue(project, a1, [{"bbox": [40, 40, 200, 160], "state": "peeled apple"}])
    annotate_through_queue(project, a2, [{"bbox": [300, 200, 200, 160], "state": "whole apple"}])
    item.refresh_from_db()
    assert [f["field"] for f in item.disagreement["fields"]] == ["bbox", "state"]
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    login(page, "bxrev")
    page.goto(f"{live_server.url}/projects/bxadj/review/{item.pk}/")
    page.wait_for_selector("[data-merged-bbox][data-bbox^='[']")

    # The image large (fit to the page, not a thumbnail), both annotators in the legend, the merged
    # box starting from their mean, the state a select of the candidates only.
    rect = canvas_rect(page)
    assert rect["w"] >= 640
    assert page.locator(".review-box-legend .legend-entry").all_inner_texts()[:2] == ["bx1", "bx2"]
    assert merged_box(page) == [170, 120, 200, 160]
    options = page.eval_on_selector_all("[data-merged-state] option", "os => os.map(o => o.value)")
    assert options == ["", "peeled apple", "sliced apple", "whole apple"]
    assert page.locator("[data-disagreement] tr[data-field]").count() == 2

    # Zoom in and back out.
    page.click("[data-zoom-in]")
    assert canvas_rect(page)["w"] == pytest.approx(rect["w"] * 1.5, abs=2)
    page.click("[data-zoom-out]")
    rect = canvas_rect(page)
    scale = rect["w"] / 640

    # Drag the merged box by (45, 30) image pixels, then its bottom-right corner by (20, 10).
    def at(x, y):
        return rect["x"] + x * scale, rect["y"] + y * scale

    page.mouse.move(*at(270, 200))
    page.mouse.down()
    page.mouse.move(*at(290, 215), steps=3)
    page.mouse.move(*at(315, 230), steps=3)
    page.mouse.up()
    moved = merged_box(page)
    assert abs(moved[0] - 215) <= 1 and abs(moved[1] - 150) <= 1 and moved[2:] == [200, 160]
    page.mouse.move(*at(moved[0] + 200, moved[1] + 160))
    page.mouse.down()
    page.mouse.move(*at(moved[0] + 220, moved[1] + 170), steps=4)
    page.mouse.up()
    resized = merged_box(page)
    assert resized[:2] == moved[:2] and abs(resized[2] - 220) <= 1 and abs(resized[3] - 170) <= 1

    page.select_option("[data-merged-state]", "sliced apple")
    shot(page, "review_box_adjudication")
    page.click("[data-save-edit]")
    page.wait_for_url("**/projects/bxadj/review/")
    item.refresh_from_db()
    assert (item.status, item.payload["bbox"], item.payload["state"]) == ("verified", [float(v) for v in resized], "sliced apple")
    review = Review.objects.get(item=item)
    assert (review.decision, review.reviewer.username) == ("edit", "bxrev")
    assert errors == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_disputed_items_come_first_and_show_the_disagreement_panel(page, login, live_server, make_user, make_project):
    a1, a2, rev = make_user("rt1"), make_user("rt2"), make_user("rtrev")
    project = make_project("rtadj", "oscbench", members={a1: Role.ANNOTATOR, a2: Role.ANNOTATOR, rev: Role.REVIEWER},
                           annotations_per_item=2)
    calm, split = (make_item(project, ext, {"video": f"{ext}.mp4", "prompt": "a hand folds a towel"}, {})
                   for ext in ("calm", "split"))
    annotate_through_queue(project, a1, [rating(), rating(realism=1, scene=4)])
    annotate_through_queue(project, a2, [rating(realism=4), rating(realism=5, scene=None)])
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    login(page, "rtrev")

    page.goto(f"{live_server.url}/projects/rtadj/review/")
    page.wait_for_selector("tr[data-item]")
    # The disputed item first though it is newer, marked with the criteria in dispute.
    assert [int(x) for x in page.eval_on_selector_all("tr[data-item]", "rs => rs.map(r => r.dataset.item)")] == [split.pk, calm.pk]
    assert page.inner_text(f"tr[data-item='{split.pk}'] [data-disagreement]") == "adjudicate: scores.scene, scores.realism"
    assert page.inner_text(f"tr[data-item='{calm.pk}'] [data-disagreement]") == ""
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/projects/rtadj/review/{split.pk}/")
    page.wait_for_selector("[data-disagreement]")

    rows = page.locator("[data-disagreement] tr[data-field]")
    assert rows.evaluate_all("rs => rs.map(r => [r.dataset.field, r.dataset.kind])") == [
        ["scores.scene", "na"], ["scores.realism", "spread"]]
    realism = page.locator("[data-disagreement] tr[data-field='scores.realism']")
    assert "Realism" in realism.inner_text() and "spread by 4 points" in realism.inner_text()
    assert realism.locator("li").all_inner_texts() == ["rt1: 1", "rt2: 5"]
    assert page.locator("[data-disagreement] tr[data-field='scores.scene'] li").all_inner_texts() == ["rt1: 4", "rt2: N/A"]
    shot(page, "review_disagreement")

    # Adjudicate by editing the ratings; the next item is the calm one.
    page.keyboard.press("e")
    page.select_option("[data-editor] select[name='scores.realism']", "3")
    page.select_option("[data-editor] select[name='scores.scene']", "na")
    page.click("[data-save-edit]")
    page.wait_for_url(f"**/projects/rtadj/review/{calm.pk}/")
    page.wait_for_selector("table.compare")
    assert page.locator("[data-disagreement]").count() == 0
    review = Review.objects.get(item=split)
    assert (review.decision, review.result["scores"]["realism"], review.result["scores"]["scene"]) == ("edit", 3, None)
    assert errors == []
