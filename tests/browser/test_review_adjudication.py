"""Adjudication in Chromium: disputed items first in the queue, the disagreement panel, and box
review (large image with zoom, each annotator's box, the merged box dragged and resized, the state
picked from the candidate labels)."""

import json

import pytest

from annotation.models import Item, Review, Role
from tests.helpers.browser import OSC_CRITERIA

from .work_helpers import annotate_through_queue, make_item, png, served_media_root, shot, store

# Two crowd participants' Prolific ids (24 hexadecimal digits, as the study link checks).
SPAMMER, HONEST = "5fa3300000000000000000e1", "0e5700000000000000000002"


def rating(**changes):
    return {"scores": {**{c: 3 for c in OSC_CRITERIA}, "subject": None, **changes}}


def canvas_rect(page):
    page.locator("[data-merged-canvas]").scroll_into_view_if_needed()
    return page.evaluate(
        "(() => { const r = document.querySelector('[data-merged-canvas]').getBoundingClientRect();"
        " return {x: r.left, y: r.top, w: r.width, h: r.height}; })()"
    )


def merged_box(page):
    return json.loads(page.get_attribute("[data-merged-bbox]", "data-bbox"))


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_box_review_drags_the_merged_box_and_picks_the_state(
    page, login, live_server, make_user, make_project, settings, tmp_path
):
    settings.MEDIA_ROOT = served_media_root()
    a1, a2, rev = make_user("bx1"), make_user("bx2"), make_user("bxrev")
    project = make_project(
        "bxadj",
        "changeit",
        members={a1: Role.ANNOTATOR, a2: Role.ANNOTATOR, rev: Role.REVIEWER},
        annotations_per_item=2,
        name="Apples",
    )
    image = store(png(tmp_path / "apple.png", color=(90, 140, 60), size=(640, 480), shape=(60, 60, 400, 300)), "image")
    item = make_item(
        project,
        "apple-1",
        {
            "image": "apple.png",
            "object": "apple",
            "state": "peeled apple",
            "distractors": ["whole apple", "sliced apple"],
        },
        {"image": image},
    )
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
    assert (item.status, item.payload["bbox"], item.payload["state"]) == (
        "verified",
        [float(v) for v in resized],
        "sliced apple",
    )
    review = Review.objects.get(item=item)
    assert (review.decision, review.reviewer.username) == ("edit", "bxrev")
    # Started from the annotators' mean box, not from the annotation selected when it was saved.
    assert review.source_annotation_id is None
    assert errors == []


def box_item_with_two_answers(make_user, make_project, tmp_path, prefix: str):
    """A ChangeIt project "<prefix>adj" whose item "apple-1" two annotators boxed apart, and its reviewer."""
    a1, a2, rev = make_user(f"{prefix}1"), make_user(f"{prefix}2"), make_user(f"{prefix}rev")
    project = make_project(
        f"{prefix}adj",
        "changeit",
        annotations_per_item=2,
        members={a1: Role.ANNOTATOR, a2: Role.ANNOTATOR, rev: Role.REVIEWER},
    )
    image = store(png(tmp_path / "apple.png", color=(90, 140, 60), size=(640, 480), shape=(60, 60, 400, 300)), "image")
    item = make_item(
        project,
        "apple-1",
        {
            "image": "apple.png",
            "object": "apple",
            "state": "peeled apple",
            "distractors": ["whole apple", "sliced apple"],
        },
        {"image": image},
    )
    annotate_through_queue(project, a1, [{"bbox": [40, 40, 200, 160], "state": "peeled apple"}])
    annotate_through_queue(project, a2, [{"bbox": [300, 200, 200, 160], "state": "whole apple"}])
    return item, a1.annotations.get(), a2.annotations.get()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_box_edit_records_the_annotation_it_started_from_not_the_one_selected_at_save(
    page, login, live_server, make_user, make_project, settings, tmp_path
):
    settings.MEDIA_ROOT = served_media_root()
    item, first, second = box_item_with_two_answers(make_user, make_project, tmp_path, "bs")
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    login(page, "bsrev")
    page.goto(f"{live_server.url}/projects/bsadj/review/{item.pk}/")
    page.wait_for_selector("[data-merged-bbox][data-bbox^='[']")
    assert page.inner_text("[data-starts-from]") == "Starts from the annotators' mean box and most given state."

    # Start from the second annotator's box, then look at the first one's before saving.
    page.keyboard.press("2")
    page.click("[data-use-selected]")
    assert merged_box(page) == [300, 200, 200, 160]
    assert page.inner_text("[data-starts-from]") == "Starts from bs2's answer."
    page.keyboard.press("1")
    assert page.is_checked(f"input[name=pick][value='{first.pk}']")
    page.click("[data-save-edit]")
    page.wait_for_url("**/projects/bsadj/review/")

    review = Review.objects.get(item=item)
    assert (review.decision, review.source_annotation_id, review.result["bbox"]) == (
        "edit",
        second.pk,
        [300.0, 200.0, 200.0, 160.0],
    )
    # The item's history says whose answer the edit started from.
    page.goto(f"{live_server.url}/projects/bsadj/review/{item.pk}/")
    page.wait_for_selector("[data-reviews]")
    line = page.locator("[data-reviews] [data-review='edit']")
    assert line.locator("[data-started-from]").inner_text() == ", edited from bs2's answer"
    assert line.inner_text().startswith("edit by bsrev on ")
    assert page.locator("[data-reviews] [data-voided]").count() == 0
    assert errors == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_qa_edit_records_the_annotation_whose_answer_the_editor_opened_with(
    page, login, live_server, make_user, make_project
):
    a1, a2, rev = make_user("qe1"), make_user("qe2"), make_user("qerev")
    project = make_project(
        "qeqa",
        "visualtrans",
        annotations_per_item=2,
        members={a1: Role.ANNOTATOR, a2: Role.ANNOTATOR, rev: Role.REVIEWER},
    )
    item = make_item(
        project,
        "tool",
        {
            "images": ["a.png", "b.png"],
            "question": "Which tool?",
            "format": "choice",
            "options": ["a knife", "a spoon", "a fork"],
        },
        {},
    )
    annotate_through_queue(project, a1, [{"answer": "A", "flags": []}])
    annotate_through_queue(project, a2, [{"answer": "B", "flags": []}])
    first, second = a1.annotations.get(), a2.annotations.get()
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    login(page, "qerev")
    page.goto(f"{live_server.url}/projects/qeqa/review/{item.pk}/")
    page.wait_for_selector("table.compare")

    page.keyboard.press("2")
    page.keyboard.press("e")
    assert page.inner_text("[data-editor] [data-starts-from]") == "Starts from qe2's answer."
    assert page.input_value("[data-editor] input[name='answer']") == "B"
    page.check(f"input[name=pick][value='{first.pk}']")  # looks at the other answer, keeps editing
    page.fill("[data-editor] input[name='answer']", "C")
    page.click("[data-save-edit]")
    page.wait_for_url("**/projects/qeqa/review/")

    review = Review.objects.get(item=item)
    assert (review.decision, review.source_annotation_id, review.result["answer"]) == ("edit", second.pk, "C")
    page.goto(f"{live_server.url}/projects/qeqa/review/{item.pk}/")
    page.wait_for_selector("[data-reviews]")
    assert page.inner_text("[data-reviews] [data-review='edit'] [data-started-from]") == ", edited from qe2's answer"
    assert errors == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_disputed_items_come_first_and_show_the_disagreement_panel(page, login, live_server, make_user, make_project):
    a1, a2, rev = make_user("rt1"), make_user("rt2"), make_user("rtrev")
    project = make_project(
        "rtadj",
        "oscbench",
        members={a1: Role.ANNOTATOR, a2: Role.ANNOTATOR, rev: Role.REVIEWER},
        annotations_per_item=2,
    )
    calm, split = (
        make_item(project, ext, {"video": f"{ext}.mp4", "prompt": "a hand folds a towel"}, {})
        for ext in ("calm", "split")
    )
    annotate_through_queue(project, a1, [rating(), rating(realism=1, scene=4)])
    annotate_through_queue(project, a2, [rating(realism=4), rating(realism=5, scene=None)])
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    login(page, "rtrev")

    page.goto(f"{live_server.url}/projects/rtadj/review/")
    page.wait_for_selector("tr[data-item]")
    # The disputed item first though it is newer, marked with the criteria in dispute, named as the
    # rating form names them.
    assert [int(x) for x in page.eval_on_selector_all("tr[data-item]", "rs => rs.map(r => r.dataset.item)")] == [
        split.pk,
        calm.pk,
    ]
    assert page.inner_text(f"tr[data-item='{split.pk}'] [data-disagreement]") == "adjudicate: Scene, Realism"
    assert page.inner_text(f"tr[data-item='{calm.pk}'] [data-disagreement]") == ""
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/projects/rtadj/review/{split.pk}/")
    page.wait_for_selector("[data-disagreement]")

    rows = page.locator("[data-disagreement] tr[data-field]")
    assert rows.evaluate_all("rs => rs.map(r => [r.dataset.field, r.dataset.kind])") == [
        ["scores.scene", "na"],
        ["scores.realism", "spread"],
    ]
    realism = page.locator("[data-disagreement] tr[data-field='scores.realism']")
    assert "Realism" in realism.inner_text() and "spread by 4 points" in realism.inner_text()
    assert realism.locator("li").all_inner_texts() == ["rt1: 1", "rt2: 5"]
    assert page.locator("[data-disagreement] tr[data-field='scores.scene'] li").all_inner_texts() == [
        "rt1: 4",
        "rt2: N/A",
    ]
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


def crowd_qa(make_user, make_project, prefix: str, external_ids: tuple[str, ...]):
    """A VisualTrans project "<prefix>qa" (two annotations per item, imported answer C), its
    researcher and reviewer, the items, a crowd study and its participants SPAMMER and HONEST."""
    from django.test import Client

    from annotation.models import CrowdAccount
    from annotation.studies.setup import study_create

    lead, rev = make_user(f"{prefix}lead"), make_user(f"{prefix}rev")
    project = make_project(
        f"{prefix}qa", "visualtrans", members={lead: Role.RESEARCHER, rev: Role.REVIEWER}, annotations_per_item=2
    )
    base = {
        "images": ["a.png", "b.png"],
        "question": "Which tool?",
        "format": "choice",
        "options": ["a knife", "a spoon", "a fork"],
        "answer": "C",
    }
    items = tuple(make_item(project, ext, base, {}) for ext in external_ids)
    study = study_create(
        project=project,
        actor=lead,
        name="Pilot",
        platform="prolific",
        max_participants="5",
        tasks_per_participant="2",
        completion_code="CODE1",
        gold_pass_threshold="0",
    )
    people = []
    for pid in (SPAMMER, HONEST):
        Client().get(f"/study/{study.token}/", {"PROLIFIC_PID": pid})
        people.append(CrowdAccount.objects.get(external_id=pid).user)
    return lead, rev, project, items, study, people


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_item_a_rejection_sent_back_to_review_is_marked(page, login, live_server, make_user, make_project):
    """A reviewer accepted a crowd participant's answer; the researcher rejects the participant:
    the item is first in the queue again, saying why, and its page says what happened."""
    from annotation.models import StudyParticipant
    from annotation.services import review_decide
    from annotation.studies.participants import participant_reject

    lead, rev, project, (older, reopened), study, people = crowd_qa(
        make_user, make_project, "cr", ("older", "reopened")
    )
    annotate_through_queue(project, people[0], [{"answer": "A", "flags": []}, {"answer": "A", "flags": []}])
    annotate_through_queue(project, people[1], [{"answer": "C", "flags": []}, {"answer": "B", "flags": []}])
    spam = {a.item_id: a.pk for a in people[0].annotations.all()}
    review_decide(item_id=reopened.pk, reviewer=rev, decision="accept", annotation_id=spam[reopened.pk])
    participant = StudyParticipant.objects.get(user=people[0])
    outcome = participant_reject(study=study, participant_id=participant.pk, actor=lead)
    assert outcome["items_back_to_review"] == 1 and outcome["items_reopened"] == 1  # "older" was not reviewed yet
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    login(page, "crrev")

    page.goto(f"{live_server.url}/projects/crqa/review/")
    page.wait_for_selector("tr[data-item]")
    assert [int(x) for x in page.eval_on_selector_all("tr[data-item]", "rs => rs.map(r => r.dataset.item)")] == [
        reopened.pk
    ]
    assert (
        page.inner_text(f"tr[data-item='{reopened.pk}'] [data-reopened]")
        == f"needs re-review: participant {SPAMMER} rejected"
    )
    shot(page, "review_list_reopened")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/projects/crqa/review/{reopened.pk}/")
    page.wait_for_selector("[data-reopened]")
    assert f"needs re-review: participant {SPAMMER} rejected" in page.inner_text("[data-reopened]")
    # The earlier decision, kept as the record, reads as voided, with the reason.
    voided = page.locator("[data-reviews] [data-voided]")
    assert voided.count() == 1 and page.locator("[data-reviews] > div").count() == 1
    assert voided.locator("s").inner_text().startswith("accept by crrev on ")
    text = voided.inner_text()
    assert text.startswith("Voided: accept by crrev on ") and text.endswith(
        f" — needs re-review: participant {SPAMMER} rejected"
    )
    assert page.locator("table.compare th.annotation-head").all_inner_texts()[0].startswith(f"prolific-{HONEST}")
    assert page.is_enabled("[data-accept]")
    assert errors == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_reopened_item_shows_its_answer_from_before_the_voided_decision(
    page, login, live_server, make_user, make_project
):
    """The "Current item" column of a re-opened item is the imported answer again, not the one the
    voided decision accepted from the rejected participant."""
    from annotation.models import StudyParticipant
    from annotation.services import review_decide
    from annotation.studies.participants import participant_reject

    lead, rev, project, (item,), study, people = crowd_qa(make_user, make_project, "cv", ("tool",))
    annotate_through_queue(project, people[0], [{"answer": "A", "flags": []}])
    annotate_through_queue(project, people[1], [{"answer": "B", "flags": []}])
    review_decide(item_id=item.pk, reviewer=rev, decision="accept", annotation_id=people[0].annotations.get().pk)
    assert Item.objects.get(pk=item.pk).payload["answer"] == "A"
    participant_reject(study=study, participant_id=StudyParticipant.objects.get(user=people[0]).pk, actor=lead)
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    login(page, "cvrev")

    page.goto(f"{live_server.url}/projects/cvqa/review/{item.pk}/")
    page.wait_for_selector("[data-reopened]")

    assert page.locator("table.compare thead th").all_inner_texts()[:2] == ["Field", "Current item"]
    assert page.inner_text("table.compare tr[data-field='answer'] td.truth") == "C"
    assert page.inner_text("table.compare tr[data-field='answer'] td.value") == "B"
    assert errors == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_an_edit_that_started_from_a_rejected_participants_answer_stands_and_says_so(
    page, login, live_server, make_user, make_project
):
    from annotation.models import StudyParticipant
    from annotation.services import review_decide
    from annotation.studies.participants import participant_reject

    lead, rev, project, (item,), study, people = crowd_qa(make_user, make_project, "ce", ("tool",))
    annotate_through_queue(project, people[0], [{"answer": "A", "flags": []}])
    annotate_through_queue(project, people[1], [{"answer": "B", "flags": []}])
    review_decide(
        item_id=item.pk,
        reviewer=rev,
        decision="edit",
        annotation_id=people[0].annotations.get().pk,
        result={"answer": "C", "flags": []},
    )
    participant_reject(study=study, participant_id=StudyParticipant.objects.get(user=people[0]).pk, actor=lead)
    assert Item.objects.get(pk=item.pk).status == "verified"
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    login(page, "cerev")

    page.goto(f"{live_server.url}/projects/ceqa/review/{item.pk}/")
    page.wait_for_selector("[data-reviews]")

    assert page.locator("[data-reviews] [data-voided]").count() == 0
    line = page.locator("[data-reviews] [data-review='edit']")
    assert (
        line.locator("[data-started-from]").inner_text()
        == f", edited from {people[0].username}'s answer (since left the analysis)"
    )
    assert errors == []
