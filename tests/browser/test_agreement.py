"""Progress and agreement page in Chromium: status counts, per-annotator rows, box IoU figures."""

import pytest

from annotation.models import Role

from .work_helpers import annotate_through_queue, make_item, png, served_media_root, shot, store

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def box_agreement_project(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    u1, u2, lead = make_user("ua"), make_user("ub"), make_user("lead")
    project = make_project(
        "agree",
        "changeit",
        members={u1: Role.ANNOTATOR, u2: Role.ANNOTATOR, lead: Role.RESEARCHER},
        annotations_per_item=2,
        name="Apple boxes",
    )
    sha = store(png(tmp_path / "apple.png", color=(90, 140, 90), size=(320, 240)), "image")
    payload = {"image": "apple.png", "object": "apple", "state": "peeled apple", "distractors": ["whole apple"]}
    for i in range(3):
        make_item(project, f"a{i}", payload, {"image": sha})
    # Two items done by both: identical boxes (IoU 1) and boxes overlapping by a third (IoU 1/3).
    annotate_through_queue(
        project,
        u1,
        [{"bbox": [10, 10, 100, 100], "state": "peeled apple"}, {"bbox": [0, 0, 50, 50], "state": "peeled apple"}],
    )
    annotate_through_queue(
        project,
        u2,
        [{"bbox": [10, 10, 100, 100], "state": "peeled apple"}, {"bbox": [25, 0, 50, 50], "state": "peeled apple"}],
    )
    return project


def test_agreement_page_shows_progress_and_iou(page, login, live_server, box_agreement_project):
    login(page, "lead")
    page.goto(f"{live_server.url}/projects/agree/agreement/")
    page.wait_for_selector("[data-agreement][data-loaded]")
    counts = {
        s: page.inner_text(f"[data-status] [data-status={s}] b")
        for s in ("total", "pending", "annotated", "verified", "discarded")
    }
    assert counts == {"total": "3", "pending": "1", "annotated": "2", "verified": "0", "discarded": "0"}
    rows = page.eval_on_selector_all(
        "[data-annotators] tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.innerText.trim()))"
    )
    assert rows == [
        ["ua", "2", "4.5 s", "0", "—", "50.0 %", "2"],
        ["ub", "2", "4.5 s", "0", "—", "50.0 %", "2"],
    ]
    assert page.inner_text("[data-workflow-title]") == "Box agreement (IoU)"
    figures = page.eval_on_selector_all(
        "[data-workflow-figures] tr", "rs => rs.map(r => [...r.cells].map(c => c.innerText.trim()))"
    )
    assert figures == [
        ["Items with ≥ 2 annotations", "2"],
        ["Annotator pairs that both drew a box", "2"],
        ["Mean IoU", "0.667"],
        ["Consistent items (every pair IoU ≥ 0.5, same state)", "50.0 %"],
    ]
    shot(page, "agreement")


@pytest.fixture
def rating_agreement_project(settings, make_user, make_project, tmp_path):
    u1, u2, rev = make_user("r1"), make_user("r2"), make_user("rv")
    project = make_project(
        "ragree",
        "oscbench",
        members={u1: Role.ANNOTATOR, u2: Role.ANNOTATOR, rev: Role.REVIEWER},
        annotations_per_item=2,
        name="Rated videos",
    )
    for i in range(3):
        make_item(project, f"v{i}", {"video": "v.mp4", "prompt": "p"}, {})
    scores = [
        (
            {
                "subject": None,
                "object": 5,
                "action": 4,
                "osc_accuracy": 3,
                "osc_consistency": 3,
                "scene": None,
                "realism": 2,
                "aesthetics": 3,
            },
            {
                "subject": None,
                "object": 4,
                "action": 4,
                "osc_accuracy": 1,
                "osc_consistency": 3,
                "scene": 2,
                "realism": 2,
                "aesthetics": 3,
            },
        ),
        (
            {
                "subject": 3,
                "object": 2,
                "action": 2,
                "osc_accuracy": 5,
                "osc_consistency": 4,
                "scene": None,
                "realism": 4,
                "aesthetics": 5,
            },
            {
                "subject": 4,
                "object": 1,
                "action": 3,
                "osc_accuracy": 4,
                "osc_consistency": 4,
                "scene": None,
                "realism": 5,
                "aesthetics": 4,
            },
        ),
        (
            {
                "subject": 1,
                "object": 3,
                "action": 5,
                "osc_accuracy": 2,
                "osc_consistency": 1,
                "scene": 4,
                "realism": 3,
                "aesthetics": 1,
            },
            {
                "subject": 2,
                "object": 3,
                "action": 5,
                "osc_accuracy": 2,
                "osc_consistency": 2,
                "scene": 4,
                "realism": 3,
                "aesthetics": 2,
            },
        ),
    ]
    annotate_through_queue(project, u1, [{"scores": a} for a, _ in scores])
    annotate_through_queue(project, u2, [{"scores": b} for _, b in scores])
    return project, scores


def test_agreement_page_rating_alpha(page, login, live_server, rating_agreement_project):
    from annotation.reliability import krippendorff_alpha

    project, scores = rating_agreement_project
    login(page, "rv")
    page.goto(f"{live_server.url}/projects/ragree/agreement/")
    page.wait_for_selector("[data-agreement][data-loaded]")
    assert page.inner_text("[data-workflow-title]") == "Rating agreement: Krippendorff's α (ordinal, 1–5)"
    shown = {
        c: page.eval_on_selector(f"[data-criterion={c}]", "r => [...r.cells].slice(1).map(c => c.innerText)")
        for c in ("object", "osc_accuracy", "scene")
    }
    expected = {}
    for c in ("object", "osc_accuracy", "scene"):
        units = [[a[c], b[c]] for a, b in scores if a[c] is not None and b[c] is not None]
        alpha = krippendorff_alpha(units, "ordinal")
        expected[c] = [
            str(float(f"{alpha:.3f}")).rstrip("0").rstrip(".") if alpha is not None else "—",
            str(len(units)),
        ]
    assert shown == expected
    assert shown["scene"][1] == "1"  # N/A is missing, not a score
