"""A project's admin (not a superuser) uses the admin for their projects (admin_site.OwnProjectsAdmin):
/admin/annotation/project/ lists the projects where they are researcher or admin; they change those
where they are admin (name, description, settings checked key by key; slug, protocol, annotations
per item and option seed read only), never another project, and add or delete none. A researcher
views their projects there, read only."""

import pytest
from django.test import Client

from annotation.models import AuditAction, AuditEvent, Project, Role

pytestmark = pytest.mark.django_db

LIST = "/admin/annotation/project/"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def world(make_user, make_project):
    lead, res, other = make_user("lead"), make_user("res"), make_user("other")
    mine = make_project("mine", "status", members={lead: Role.ADMIN, res: Role.RESEARCHER})
    watched = make_project("watched", "status", members={lead: Role.RESEARCHER})
    theirs = make_project("theirs", "status", members={other: Role.ADMIN})
    return lead, res, mine, watched, theirs


def change_form(project, **fields) -> dict:
    return {
        "name": project.name,
        "description": project.description,
        "settings": "{}",
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        **fields,
    }


def test_a_project_admin_lists_their_projects_not_others(world):
    lead, _, mine, watched, theirs = world
    client = signed_in(lead)
    assert client.get("/admin/").status_code == 200
    response = client.get(LIST)
    assert response.status_code == 200
    assert [p.slug for p in response.context["cl"].result_list] == ["mine", "watched"]
    assert "theirs" not in response.content.decode()
    assert f'href="{LIST}add/"' not in response.content.decode()
    assert client.get(f"{LIST}add/").status_code == 403
    missing = client.get(f"{LIST}{theirs.pk}/change/")
    assert (missing.status_code, missing["Location"]) == (302, "/admin/")


def test_a_project_admin_changes_their_project_and_it_is_audited(world):
    lead, _, mine, _, _ = world
    client = signed_in(lead)
    page = client.get(f"{LIST}{mine.pk}/change/").content.decode()
    assert 'name="name"' in page and 'name="settings"' in page
    assert 'name="slug"' not in page and 'name="protocol"' not in page and 'name="annotations_per_item"' not in page

    response = client.post(
        f"{LIST}{mine.pk}/change/",
        change_form(mine, name="Mine, renamed", settings='{"lease_seconds": 900, "gold_share": 0.1}', slug="stolen"),
    )
    assert response.status_code == 302
    mine.refresh_from_db()
    assert (mine.slug, mine.name, mine.settings) == ("mine", "Mine, renamed", {"lease_seconds": 900, "gold_share": 0.1})
    event = AuditEvent.objects.get(action=AuditAction.ADMIN_CHANGE)
    assert (event.actor, event.project) == (lead, mine)


def test_the_settings_are_checked_for_the_projects_protocol_when_it_is_read_only(world):
    lead, _, mine, _, _ = world
    response = signed_in(lead).post(
        f"{LIST}{mine.pk}/change/", change_form(mine, settings='{"lease_seconds": 5, "rubric": "text"}')
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "lease_seconds: A whole number from 60 to 86400." in html
    assert "rubric: Only" in html
    assert Project.objects.get(pk=mine.pk).settings == {}


def test_a_project_admin_changes_no_project_they_only_research_and_deletes_none(world):
    lead, _, mine, watched, theirs = world
    client = signed_in(lead)
    page = client.get(f"{LIST}{watched.pk}/change/")
    assert page.status_code == 200 and 'name="name"' not in page.content.decode()  # a view
    assert client.post(f"{LIST}{watched.pk}/change/", change_form(watched, name="x")).status_code == 403
    assert client.post(f"{LIST}{theirs.pk}/change/", change_form(theirs, name="x")).status_code == 302
    assert client.post(f"{LIST}{mine.pk}/delete/", {"post": "yes"}).status_code == 403
    assert sorted(Project.objects.values_list("slug", "name")) == [
        ("mine", "mine"),
        ("theirs", "theirs"),
        ("watched", "watched"),
    ]


def test_a_researcher_views_their_project_read_only(world):
    _, res, mine, _, _ = world
    client = signed_in(res)
    listing = client.get(LIST)
    assert listing.status_code == 200 and [p.slug for p in listing.context["cl"].result_list] == ["mine"]
    assert client.post(f"{LIST}{mine.pk}/change/", change_form(mine, name="x")).status_code == 403
    assert Project.objects.get(pk=mine.pk).name == "mine"
