"""Review in Chromium of an item imported with its labels: the labels show as the import's entry
beside the (absent) annotations, and the reviewer accepts them as they are."""

import pytest

from annotation.importing import items_import
from annotation.importing.samples import write_sample_dataset
from annotation.models import AuditAction, AuditEvent, Item, Review, Role

from .work_helpers import served_media_root


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_reviewer_sees_imported_labels_and_accepts_them(
    page, login, live_server, settings, make_user, make_project, tmp_path
):
    settings.MEDIA_ROOT = served_media_root()
    members = {make_user("ann"): Role.ANNOTATOR, make_user("rev"): Role.REVIEWER}
    project = make_project("imp", "status", members=members, name="Imported jars")
    data = tmp_path / "data"
    data.mkdir()
    path = write_sample_dataset(data, "status", 1)
    items_import(project=project, path=path)
    item = Item.objects.get(project=project)
    assert (item.status, item.annotation_count) == ("annotated", 0)
    before = dict(item.payload)

    login(page, "rev")
    page.goto(f"{live_server.url}/projects/imp/review/{item.pk}/")
    page.wait_for_selector("table.compare")
    assert "labels from the import" in page.inner_text("[data-item-status]")
    head = page.inner_text("thead th[data-annotation=imported]")
    assert f"from the import {path.name} (statelab)" in head
    assert page.inner_text("td[data-annotation=imported] >> nth=0") == before["state_a"]
    assert "the labels came from the import" in page.inner_text("[data-imported-note]")
    assert "All annotators agree" not in page.inner_text("[data-review-body]")
    assert page.is_enabled("[data-accept]")

    page.click("[data-accept]")
    page.wait_for_url("**/projects/imp/review/")
    item.refresh_from_db()
    assert item.status == "verified" and item.payload == before
    review = Review.objects.get(item=item)
    assert (review.decision, review.reviewer.username, review.accepted_annotation) == ("accept", "rev", None)
    assert AuditEvent.objects.get(action=AuditAction.VERIFY).details["accepted"] == "as imported"
    assert not AuditEvent.objects.filter(action=AuditAction.EDIT).exists()
