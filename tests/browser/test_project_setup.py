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
    outcomes = page.eval_on_selector_all("#csv-report tr[data-line]", "rs => rs.map(r => [r.dataset.line, r.dataset.outcome])")
    assert outcomes == [["2", "added"], ["3", "unknown user"], ["4", "bad role"], ["5", "added"]]
    assert dict(Membership.objects.filter(project=project).values_list("user__username", "role")) == {
        "lead": "admin", "carol": "annotator", "dave": "reviewer"}
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
