import pytest
from django.db import IntegrityError

from annotation.models import Item, Role


def test_runs_on_postgresql(settings):
    assert "postgresql" in settings.DATABASES["default"]["ENGINE"]


def test_item_external_id_unique_within_project(make_project):
    p = make_project("p1")
    q = make_project("p2")
    Item.objects.create(project=p, external_id="x", payload={})
    Item.objects.create(project=q, external_id="x", payload={})
    with pytest.raises(IntegrityError):
        Item.objects.create(project=p, external_id="x", payload={})


def test_home_lists_only_member_projects(client, make_user, make_project):
    ann = make_user("ann")
    make_project("mine", members={ann: Role.ANNOTATOR})
    make_project("theirs")
    client.force_login(ann)
    body = client.get("/").content.decode()
    assert "mine" in body and "theirs" not in body
    assert [p["slug"] for p in client.get("/api/projects/").json()] == ["mine"]


def test_openapi_schema_and_docs_are_served_offline(client, make_user):
    client.force_login(make_user())
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"openapi" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger-ui" in docs.content.lower()
    assert b"cdn." not in docs.content
