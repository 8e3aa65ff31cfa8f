"""The audit trail page in Chromium: a researcher opens it from the project page, sees who did
what, filters by action and by actor, and the download link follows the filters."""

import pytest

from annotation.audit.record import audit_record
from annotation.models import Item, ItemStatus, Role
from annotation.releases import release_freeze
from annotation.services import review_decide
from tests.annotation.work_factories import valid_result
from tests.helpers.items import status_payload

from .work_helpers import shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def audited(make_user, make_project):
    ann, rev, lead = make_user("ann"), make_user("rev"), make_user("lead")
    project = make_project(
        "trail", "status", members={ann: Role.ANNOTATOR, rev: Role.REVIEWER, lead: Role.RESEARCHER}, name="Jar states"
    )
    for i in range(3):
        item = Item.objects.create(
            project=project, external_id=f"jar{i}", payload=status_payload(i), status=ItemStatus.ANNOTATED
        )
        annotation = item.annotations.create(annotator=ann, result=valid_result("quintuplet"))
        review_decide(item_id=item.pk, reviewer=rev, decision="accept" if i else "discard", annotation_id=annotation.pk)
    release_freeze(project=project, version="v1", user=lead)
    audit_record(action="import", actor=lead, project=project, object_type="items import", object_repr="jars.jsonl")
    return project


def rows(page) -> list[list[str]]:
    return page.eval_on_selector_all(
        "#audit-events tbody tr[data-event]", "rs => rs.map(r => [...r.cells].slice(1, 4).map(c => c.innerText.trim()))"
    )


def test_researcher_sees_and_filters_the_audit_trail(page, login, live_server, audited):
    login(page, "lead")
    page.goto(f"{live_server.url}/projects/trail/")
    page.click("#audit-link")
    page.wait_for_url(f"{live_server.url}/projects/trail/audit/")
    assert [r[:2] for r in rows(page)] == [
        ["lead", "Import"],
        ["lead", "Freeze release"],
        ["rev", "Verify"],
        ["rev", "Verify"],
        ["rev", "Discard"],
    ]
    assert rows(page)[2][2].startswith("trail/jar2")
    assert page.inner_text("#audit-events tbody tr:nth-child(2) code").startswith(
        "items=2 split=test checksum="
    )  # (jsonb orders keys)
    page.select_option("#id_action", "verify")
    page.click("#audit-filters button[type=submit]")
    page.wait_for_url("**/audit/?action=verify**")
    assert [r[:2] for r in rows(page)] == [["rev", "Verify"], ["rev", "Verify"]]
    page.select_option("#id_action", "")
    page.select_option("#id_actor", "lead")
    page.click("#audit-filters button[type=submit]")
    page.wait_for_url("**actor=lead**")
    assert [r[:2] for r in rows(page)] == [["lead", "Import"], ["lead", "Freeze release"]]
    assert (
        page.get_attribute("#audit-exports a[data-fmt=csv]", "href")
        == "/api/projects/trail/audit/export/?actor=lead&fmt=csv"
    )
    with page.expect_download() as download:
        page.click("#audit-exports a[data-fmt=jsonl]")
    assert download.value.suggested_filename == "audit-trail.jsonl"
    page.fill("#id_since", "2999-01-01")
    page.click("#audit-filters button[type=submit]")
    page.wait_for_selector("#audit-empty")
    assert page.inner_text("#audit-empty") == "No events match these filters."
    shot(page, "audit-trail")


def test_a_reviewer_is_refused_the_audit_page(page, login, live_server, audited):
    login(page, "rev")
    page.goto(f"{live_server.url}/projects/trail/")
    assert page.locator("#audit-link").count() == 0
    response = page.goto(f"{live_server.url}/projects/trail/audit/")
    assert response.status == 403
