"""Revoking an invite link in Chromium: a researcher makes a link on the members page, sees it listed
as open (no token on the page but the one shown once), revokes it, and whoever opens the link then
is told it was revoked and joins nothing."""

import pytest

from annotation.models import AuditEvent, Membership, ProjectInvite, Role

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def people(make_user, make_project):
    lead = make_user("lead")
    make_user("newcomer")
    make_project("jars", "status", members={lead: Role.RESEARCHER})


def test_a_revoked_link_no_longer_lets_anyone_join(page, login, live_server, people):
    login(page, "lead")
    page.goto(f"{live_server.url}/projects/jars/members/")
    page.select_option("#id_invite_role", "reviewer")
    page.click("#invite-form button[type=submit]")
    link = page.input_value("#invite-url")
    invite = ProjectInvite.objects.get()
    row = f"#invites tr[data-invite='{invite.pk}']"
    assert page.get_attribute(row, "data-state") == "open"

    page.goto(f"{live_server.url}/projects/jars/members/")  # the link is shown once: not on a later visit
    assert link.rsplit("/", 2)[-2] not in page.content()
    page.click(f"button[data-revoke='{invite.pk}']")
    page.wait_for_selector(f"{row}[data-state=revoked]")
    assert page.locator("button[data-revoke]").count() == 0
    assert "revoked: its link no longer works" in page.inner_text("body")
    assert AuditEvent.objects.filter(action="invite_revoke", actor_name="lead").count() == 1

    page.context.clear_cookies()
    login(page, "newcomer")
    response = page.goto(link)
    assert response.status == 410
    assert "was revoked on" in page.inner_text("#invite-gone")
    assert page.locator("#invite-join").count() == 0
    assert not Membership.objects.filter(user__username="newcomer").exists()
