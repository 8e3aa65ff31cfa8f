"""Review pages in Chromium: queue, side-by-side annotations with disagreements, accept / edit / discard."""

import pytest

from annotation.models import Item, Review, Role

from .work_helpers import annotate_through_queue, make_item, png, served_media_root, shot, store


def quint(change="open the jar", category="functional", state_b="an open jar"):
    return {
        "state_a": "a closed jar",
        "state_b": state_b,
        "change": change,
        "change_distractors": ["shake the jar", "fill the jar", "break the jar"],
        "category": category,
        "difference": "significant",
    }


@pytest.fixture
def review_project(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    a1, a2, rev = make_user("ann1"), make_user("ann2"), make_user("rev")
    project = make_project(
        "rev",
        "status",
        members={a1: Role.ANNOTATOR, a2: Role.ANNOTATOR, rev: Role.REVIEWER},
        annotations_per_item=2,
        name="Jar pairs",
    )
    ia = store(png(tmp_path / "a.png", color=(200, 80, 80)), "image")
    ib = store(png(tmp_path / "b.png", color=(80, 200, 80)), "image")
    items = [
        make_item(project, f"jar-{i}", {"image_a": "a.png", "image_b": "b.png"}, {"image_a": ia, "image_b": ib})
        for i in range(3)
    ]
    # Item 0: the two annotators disagree on the change and the category; 1 and 2 agree.
    annotate_through_queue(project, a1, [quint(), quint(), quint()])
    annotate_through_queue(project, a2, [quint(change="unscrew the lid", category="other"), quint(), quint()])
    assert list(Item.objects.filter(project=project).values_list("status", flat=True).distinct()) == ["annotated"]
    return project, items


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_review_accept_edit_discard(page, login, live_server, review_project):
    project, items = review_project
    login(page, "rev")
    page.goto(f"{live_server.url}/projects/rev/review/")
    page.wait_for_selector("tr[data-item]")
    assert [int(x) for x in page.eval_on_selector_all("tr[data-item]", "rs => rs.map(r => r.dataset.item)")] == [
        i.pk for i in items
    ]
    assert page.inner_text("[data-counts] [data-status=annotated] b") == "3"
    shot(page, "review_list")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/projects/rev/review/{items[0].pk}/")
    page.wait_for_selector("table.compare")

    # Both annotations side by side; the fields they disagree on are highlighted.
    assert page.locator("thead .annotation-head").all_inner_texts()[0].startswith("ann1")
    disagreeing = page.eval_on_selector_all("tr.disagree", "rs => rs.map(r => r.dataset.field)")
    assert disagreeing == ["change", "category"]
    shot(page, "review")
    # Select ann2's annotation and accept it: the item becomes verified with that answer.
    page.keyboard.press("2")
    page.keyboard.press("a")
    page.wait_for_url(f"**/projects/rev/review/{items[1].pk}/")
    items[0].refresh_from_db()
    assert items[0].status == "verified"
    assert items[0].payload["change"] == "unscrew the lid" and items[0].payload["category"] == "other"
    review = Review.objects.get(item=items[0])
    assert (review.decision, review.reviewer.username, review.accepted_annotation.annotator.username) == (
        "accept",
        "rev",
        "ann2",
    )

    # Edit a merged answer from the keyboard.
    page.wait_for_selector("table.compare")
    assert page.locator("tr.disagree").count() == 0
    page.keyboard.press("e")
    page.fill("[data-editor] input[name=state_b]", "a jar without its lid")
    page.keyboard.press("Control+Enter")
    page.wait_for_url(f"**/projects/rev/review/{items[2].pk}/")
    items[1].refresh_from_db()
    assert items[1].status == "verified" and items[1].payload["state_b"] == "a jar without its lid"
    assert Review.objects.get(item=items[1]).decision == "edit"

    # Discard, with a comment and a confirmation.
    page.wait_for_selector("table.compare")
    page.fill("textarea[name=comment]", "blurry frames")
    page.evaluate("document.activeElement.blur()")
    page.once("dialog", lambda dialog: dialog.accept())
    page.keyboard.press("d")
    page.wait_for_url("**/projects/rev/review/")
    page.wait_for_selector("[data-empty]")
    items[2].refresh_from_db()
    assert items[2].status == "discarded"
    assert (Review.objects.get(item=items[2]).comment) == "blurry frames"

    # A decided item shows who decided, and its buttons are off.
    page.goto(f"{live_server.url}/projects/rev/review/{items[0].pk}/")
    page.wait_for_selector("[data-reviews]")
    assert page.inner_text("[data-reviews]").startswith("accept by rev")
    assert page.is_disabled("[data-accept]") and page.is_disabled("[data-discard]")


@pytest.mark.django_db
def test_review_pages_need_the_reviewer_role(client, make_user, make_project):
    ann = make_user("justann")
    make_project("rv2", "status", members={ann: Role.ANNOTATOR})
    client.force_login(ann)
    assert client.get("/projects/rv2/review/").status_code == 403
    assert client.get("/projects/rv2/agreement/").status_code == 403
    assert client.get("/projects/rv2/annotate/").status_code == 200
    assert client.get("/projects/nope/annotate/").status_code == 404


RESULTS = {
    "status": [quint(), quint(change="unscrew the lid")],
    "changeit": [
        {"bbox": [10, 10, 100, 80], "state": "peeled apple"},
        {"bbox": [60, 40, 100, 80], "state": "whole apple"},
    ],
    "visualtrans": [{"answer": "A", "flags": []}, {"answer": "B", "flags": ["ambiguous"]}],
    "m3verse": [{"answer": ["A", "B"], "flags": []}, {"answer": ["A"], "flags": []}],
    "oscbench": [
        {
            "scores": {
                c: 3
                for c in (
                    "subject",
                    "object",
                    "action",
                    "osc_accuracy",
                    "osc_consistency",
                    "scene",
                    "realism",
                    "aesthetics",
                )
            }
        },
        {
            "scores": {
                **{
                    c: 5
                    for c in ("subject", "object", "action", "osc_accuracy", "osc_consistency", "realism", "aesthetics")
                },
                "scene": None,
            }
        },
    ],
}
PAYLOADS = {
    "status": {"image_a": "a.png", "image_b": "b.png"},
    "changeit": {"image": "a.png", "object": "apple", "state": "peeled apple", "distractors": ["whole apple"]},
    "visualtrans": {
        "images": ["a.png", "b.png"],
        "question": "Which?",
        "format": "choice",
        "options": ["x", "y"],
        "answer": "A",
    },
    "m3verse": {
        "video_before": "a.mp4",
        "video_after": "b.mp4",
        "question": "What?",
        "options": ["x", "y", "z"],
        "answer": ["A", "B"],
    },
    "oscbench": {"video": "a.mp4", "prompt": "a hand folds a towel"},
}


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("protocol", ["status", "changeit", "visualtrans", "m3verse", "oscbench"])
def test_review_and_agreement_pages_render_for_every_workflow(
    page, login, live_server, make_user, make_project, protocol
):
    a1, a2, rev = make_user("w1"), make_user("w2"), make_user("wr")
    project = make_project(
        f"w-{protocol}",
        protocol,
        members={a1: Role.ANNOTATOR, a2: Role.ANNOTATOR, rev: Role.REVIEWER},
        annotations_per_item=2,
    )
    item = make_item(project, "one", PAYLOADS[protocol], {})
    annotate_through_queue(project, a1, [RESULTS[protocol][0]])
    annotate_through_queue(project, a2, [RESULTS[protocol][1]])
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    login(page, "wr")
    page.goto(f"{live_server.url}/projects/{project.slug}/review/{item.pk}/")
    page.wait_for_selector("table.compare")
    assert page.locator("tr.disagree").count() >= 1
    assert page.locator("thead .annotation-head").count() == 2
    page.keyboard.press("e")
    assert page.locator("[data-editor] .editor").count() == 1
    page.goto(f"{live_server.url}/projects/{project.slug}/agreement/")
    page.wait_for_selector("[data-agreement][data-loaded]")
    assert page.inner_text("[data-status] [data-status=annotated] b") == "1"
    assert page.locator("[data-annotators] tbody tr").count() == 2
    assert errors == []
