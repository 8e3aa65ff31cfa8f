"""Progress and agreement page in Chromium: status counts, per-annotator rows, box IoU figures."""
import pytest

from annotation.models import Role

from .work_helpers import annotate_through_queue, make_item, png, served_media_root, shot, store

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def box_agreement_project(settings, make_user, make_project, tmp_path):
    settings.MEDIA_ROOT = served_media_root()
    u1, u2, lead = make_user("ua"), make_user("ub"), make_user("lead")
    project = make_project("agree", "changeit", members={u1: Role.ANNOTATOR, u2: Role.ANNOTATOR, lead: Role.RESEARCHER},
                           annotations_per_item=2, name="Apple boxes")
    sha = store(png(tmp_path / "apple.png", color=(90, 140, 90), size=(320, 240)), "image")
    payload = {"image": "apple.png", "object": "apple", "state": "peeled apple", "distractors": ["whole apple"]}
    for i in range(3):
        make_item(project, f"a{i}", payload, {"image": sha})
    # Two items done by both: identical boxes (IoU 1) and boxes overlapping by a third (IoU 1/3).
    annotate_through_queue(project, u1, [{"bbox": [10, 10, 100, 100], "state": "peeled apple"},
                                         {"bbox": [0, 0, 50, 50], "state": "peeled apple"}])
    annotate_through_queue(project, u2, [{"bbox": [10, 10, 100, 100], "state": "peeled apple"},
                                         {"bbox": [25, 0, 50, 50], "state": "peeled apple"}])
    return project


def test_agreement_page_shows_progress_and_iou(page, login, live_server, box_agreement_project):
    login(page, "lead")
    page.goto(f"{live_server.url}/projects/agree/agreement/")
    page.wait_for_selector("[data-agreement][data-loaded]")
    counts = {s: page.inner_text(f"[data-status] [data-status={s}] b") for s in ("total", "pending", "annotated", "verified", "discarded")}
    assert counts == {"total": "3", "pending": "1", "annotated": "2", "verified": "0", "discarded": "0"}
    rows = page.eval_on_selector_all("[data-annotators] tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.innerText.trim()))")
    assert rows == [
        ["ua", "2", "4.5 s", "0", "—", "50.0 %", "2"],
        ["ub", "2", "4.5 s", "0", "—", "50.0 %", "2"],
    ]
    assert page.inner_text("[data-workflow-title]") == "Box agreement (IoU)"
    figures = page.eval_on_selector_all("[data-workflow-figures] tr", "rs => rs.map(r => [...r.cells].map(c => c.innerText.trim()))")
    assert figures == [
        ["Items with ≥ 2 annotations", "2"],
        ["Annotator pairs that both drew a box", "2"],
        ["Mean IoU", "0.667"],
        ["Consistent items (every pair IoU ≥ 0.5, same state)", "50.0 %"],
    ]
    shot(page, "agreement")
