"""Project setup in Chromium: a researcher creates a project from the home page, adds members
from a CSV (a report per line), and the new member sees the project, without the links their role
cannot use; the members page refuses them with the role it needs."""

import pytest

from annotation.models import Membership, Project, Role

from .work_helpers import shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CSV = b"username_or_email,role\ncarol,annotator\nghost,annotator\ndave@example.org,boss\ndave,reviewer\n"


@pytest.fixture
def people(make_user, make_project):
    lead = make_user("lead")
    make_project("older", "status", members={lead: Role.RESEARCHER})
    make_user("carol")
    make_user("dave")


def test_create_project_add_members_from_csv_member_sees_it(page, login, live_server, people):
    login(page, "lead")
    page.click("#new-project")
    page.wait_for_url("**/projects/new/")
    page.fill("#id_name", "Cup states")
    page.fill("#id_slug", "cups")
    page.select_option("#id_protocol", "visualtrans")
    page.fill("#id_annotations_per_item", "2")
    page.fill("#id_gold_share", "0.1")
    page.fill("#id_lease_seconds", "900")
    page.uncheck("#id_suggestions")
    page.click("#project-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/projects/cups/members/")
    project = Project.objects.get(slug="cups")
    assert (project.protocol, project.annotations_per_item) == ("visualtrans", 2)
    assert project.settings == {"gold_share": 0.1, "lease_seconds": 900, "suggestions": False}
    assert page.get_attribute("#members tr[data-member=lead]", "data-role") == "admin"

    page.set_input_files("#id_csv", files=[{"name": "members.csv", "mimeType": "text/csv", "buffer": CSV}])
    page.click("#member-csv button[type=submit]")
    page.wait_for_selector("#csv-report")
    outcomes = page.eval_on_selector_all(
        "#csv-report tr[data-line]", "rs => rs.map(r => [r.dataset.line, r.dataset.outcome])"
    )
    assert outcomes == [["2", "added"], ["3", "unknown user"], ["4", "bad role"], ["5", "added"]]
    assert dict(Membership.objects.filter(project=project).values_list("user__username", "role")) == {
        "lead": "admin",
        "carol": "annotator",
        "dave": "reviewer",
    }
    shot(page, "members")

    # An invite link made on the page, shown once.
    page.select_option("#id_invite_role", "annotator")
    page.click("#invite-form button[type=submit]")
    assert "/invites/" in page.input_value("#invite-url")

    page.context.clear_cookies()
    login(page, "carol")
    page.wait_for_selector("#project-list tr[data-project=cups]")
    page.click("#project-list tr[data-project=cups] a")
    page.wait_for_url(f"{live_server.url}/projects/cups/")
    assert page.inner_text("#my-role") == "annotator"
    links = page.eval_on_selector_all("#project-links a", "as => as.map(a => a.getAttribute('href'))")
    assert links == ["/projects/cups/annotate/"]
    assert page.locator("#new-project").count() == 0
    response = page.goto(f"{live_server.url}/projects/cups/members/")
    assert response.status == 403
    assert page.inner_text("#refusal-reason") == "This needs the researcher role in project cups."


def test_disagreement_thresholds_form_re_marks_the_review_queue(page, login, live_server, make_user, make_project):
    """The settings page sets the rating spread: a refused value shows its reason and changes
    nothing; a saved one re-marks the items waiting for review, as the review queue then shows,
    and enters the audit trail."""
    from annotation.models import AuditEvent, Item

    from .work_helpers import annotate_through_queue, make_item

    lead, r1, r2 = make_user("lead"), make_user("r1"), make_user("r2")
    project = make_project(
        "videos",
        "oscbench",
        members={lead: Role.RESEARCHER, r1: Role.ANNOTATOR, r2: Role.ANNOTATOR},
        annotations_per_item=2,
        name="Videos",
    )
    video = make_item(project, "v1", {"video": "v1.mp4", "prompt": "a hand folds a towel"}, {})
    base = {
        "subject": None,
        "object": 3,
        "action": 3,
        "osc_accuracy": 3,
        "osc_consistency": 3,
        "scene": 3,
        "realism": 3,
        "aesthetics": 3,
    }
    annotate_through_queue(project, r1, [{"scores": base}])
    annotate_through_queue(project, r2, [{"scores": {**base, "realism": 5}}])  # realism spread 2
    video.refresh_from_db()
    assert [f["field"] for f in video.disagreement["fields"]] == ["scores.realism"]
    login(page, "lead")
    page.goto(f"{live_server.url}/projects/videos/")
    page.click("#settings-link")
    page.wait_for_url(f"{live_server.url}/projects/videos/settings/")
    assert page.input_value("#id_rating_spread") == "2"
    assert page.locator("#id_box_iou").count() == 0  # only the workflow's own threshold
    assert "marks again every item waiting for review" in page.inner_text("#thresholds-scope")

    # Past the browser's own check (max 4), the server refuses a spread of 5 and says why.
    page.evaluate("document.querySelector('#id_rating_spread').removeAttribute('max')")
    page.fill("#id_rating_spread", "5")
    page.click("#thresholds-form button[type=submit]")
    page.wait_for_selector("#settings-errors")
    assert page.inner_text("#settings-errors li[data-field=rating_spread]") == (
        "rating_spread: A whole number of points from 1 to 4."
    )
    assert "disagreement" not in Project.objects.get(pk=project.pk).settings

    page.fill("#id_rating_spread", "3")
    page.click("#thresholds-form button[type=submit]")
    page.wait_for_selector(".messages")
    assert page.inner_text(".messages") == (
        "Thresholds saved. 1 item(s) waiting for review were marked again: 0 now to adjudicate."
    )
    assert page.input_value("#id_rating_spread") == "3"
    shot(page, "project_settings")
    assert Item.objects.get(pk=video.pk).disagreement is None
    event = AuditEvent.objects.get(action="project_settings")
    assert (event.actor_name, event.details["disagreement"]) == ("lead", {"rating_spread": {"before": 2, "after": 3}})

    # The review queue no longer asks to adjudicate it.
    page.goto(f"{live_server.url}/projects/videos/review/")
    page.wait_for_selector(f"tr[data-item='{video.pk}']")
    assert page.get_attribute(f"tr[data-item='{video.pk}']", "data-disputed") == "false"
    assert page.inner_text(f"tr[data-item='{video.pk}'] [data-disagreement]") == ""
