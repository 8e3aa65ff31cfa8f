"""Project.settings written straight into the database with a bad value for every key: every reader
goes through the key's SETTING_RULES check (project_setup.project_setting), takes the default and
logs a warning, so claiming, submitting, the project's pages and the HF export never answer 5xx."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from annotation.importing import items_import
from annotation.importing.samples import write_sample_dataset
from annotation.models import Item, ItemStatus, Project, Role, Task
from annotation.project_setup import DEFAULT_LEASE_SECONDS, project_setting
from annotation.releases import release_freeze
from annotation.selectors import box_candidates, rubric_for, rubric_text_for, shows_suggestions
from annotation.services import review_decide
from protocols import registry
from tests.annotation.work_factories import WORKFLOW, make_item, valid_result

pytestmark = pytest.mark.django_db

BAD = {
    "gold_share": "often",
    "lease_seconds": "ten minutes",
    "auto_verify": "maybe",
    "suggestions": "sometimes",
    "rubric": 5,
    "state_labels": ["sliced apple"],
    "multiple": "yes please",
    "disagreement": "strict",
    "license": ["mit"],
    "citation": {"bibtex": "@article{x}"},
}


@pytest.mark.parametrize(
    "key, default",
    [
        ("gold_share", 0.0),
        ("lease_seconds", DEFAULT_LEASE_SECONDS),
        ("auto_verify", False),
        ("suggestions", True),
        ("rubric", None),
        ("state_labels", {}),
        ("multiple", None),
        ("license", "other"),
        ("citation", ""),
    ],
)
def test_a_bad_stored_value_reads_as_its_default_with_a_warning(key, default, caplog):
    with caplog.at_level(logging.WARNING, logger="annotation.project_setup"):
        assert project_setting(BAD, key, default, project="lab") == default
    assert f"settings['{key}'] of project lab is invalid" in caplog.text


def test_a_good_stored_value_reads_clean_and_a_missing_one_as_its_default(caplog):
    stored = {"lease_seconds": "900", "gold_share": 0.25, "citation": "  @article{x}  ", "auto_verify": True}
    with caplog.at_level(logging.WARNING):
        assert project_setting(stored, "lease_seconds", 600) == 900
        assert project_setting(stored, "gold_share", 0.0) == 0.25
        assert project_setting(stored, "citation", "") == "@article{x}"
        assert project_setting(stored, "auto_verify", False) is True
        assert project_setting(stored, "license", "other") == "other"
        assert project_setting(["not", "an", "object"], "license", "other") == "other"
    assert "not a JSON object" in caplog.text and "lease_seconds" not in caplog.text


@pytest.mark.parametrize("protocol", ["status", "changeit", "visualtrans", "m3verse", "oscbench"])
def test_a_project_with_bad_stored_settings_claims_submits_shows_and_exports(
    protocol, make_user, make_project, tmp_path
):
    ann, res, rev = make_user("ann"), make_user("res"), make_user("rev")
    project = make_project(
        "lab", protocol, annotations_per_item=1, members={ann: Role.ANNOTATOR, res: Role.RESEARCHER, rev: Role.REVIEWER}
    )
    Project.objects.filter(pk=project.pk).update(settings=BAD)  # as written straight into the database
    project.refresh_from_db()
    item = make_item(project, "one")
    api = APIClient()
    api.force_authenticate(ann)

    r = api.post("/api/projects/lab/tasks/next/", {}, format="json")

    assert r.status_code == 200, r.content
    task_id = r.json()["task"]
    lease = Task.objects.get(pk=task_id).lease_expires - timezone.now()
    assert timedelta(seconds=DEFAULT_LEASE_SECONDS - 60) < lease <= timedelta(seconds=DEFAULT_LEASE_SECONDS)
    pages = Client()
    pages.force_login(ann)
    assert pages.get("/projects/lab/annotate/").status_code == 200

    r = api.post(f"/api/tasks/{task_id}/submit/", {"result": valid_result(WORKFLOW[protocol])}, format="json")

    assert r.status_code in (200, 201), r.content
    assert Item.objects.get(pk=item.pk).status == ItemStatus.ANNOTATED  # "maybe" is not auto_verify
    assert shows_suggestions(project=project) is (WORKFLOW[protocol] in ("quintuplet", "qa"))
    # A bad stored rubric falls back to the protocol's default (none for a protocol without criteria).
    assert rubric_text_for(project=project) is None
    assert rubric_for(project=project) == dict(registry.get(protocol).default_rubric)
    assert bool(rubric_for(project=project)) is (WORKFLOW[protocol] == "rating")
    assert box_candidates(project=project, payload={"object": "apple", "state": "peeled apple"}) == ["peeled apple"]
    pages.force_login(res)
    for path in (
        "/projects/lab/",
        "/projects/lab/settings/",
        "/projects/lab/studies/",
        "/projects/lab/review/",
        f"/projects/lab/review/{item.pk}/",
        "/projects/lab/agreement/",
        "/projects/lab/releases/",
    ):
        assert pages.get(path).status_code == 200, path

    review_decide(item_id=item.pk, reviewer=rev, decision="discard")  # its media are rows without files
    items_import(project=project, path=write_sample_dataset(tmp_path / "data", protocol, 2), verified=True)
    release_freeze(project=project, version="v1")
    out = tmp_path / "hf"
    call_command("export_release", "lab", "v1", "--format", "hf", "-o", str(out))

    card = (out / "README.md").read_text()
    assert 'license: "other"' in card and "## Citation" not in card
