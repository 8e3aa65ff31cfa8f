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


def _settings_in_a_fresh_process(env_extra: dict) -> dict:
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", **env_extra}
    code = "import json, django; django.setup(); from django.conf import settings; print(json.dumps(settings.STORAGES))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_media_storage_defaults_to_the_file_system_under_media_root(settings, tmp_path):
    from django.core.files.base import ContentFile
    from django.core.files.storage import default_storage

    assert settings.STORAGES["default"] == {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {}}
    name = default_storage.save("probe/x.txt", ContentFile(b"x"))
    assert (settings.MEDIA_ROOT / name).read_bytes() == b"x"  # follows MEDIA_ROOT (the test's)


def test_media_storage_comes_from_the_environment():
    storages = _settings_in_a_fresh_process(
        {
            "MEDIA_STORAGE": "django.core.files.storage.InMemoryStorage",
            "MEDIA_STORAGE_OPTIONS": '{"base_url": "/m/"}',
        }
    )
    assert storages["default"] == {
        "BACKEND": "django.core.files.storage.InMemoryStorage",
        "OPTIONS": {"base_url": "/m/"},
    }
    assert storages["staticfiles"]["BACKEND"] == "django.contrib.staticfiles.storage.StaticFilesStorage"


def test_openapi_schema_describes_every_endpoint_without_warnings(tmp_path):
    # Every API view declares what it takes and returns, so the browsable docs are complete.
    from django.core.management import call_command

    out = tmp_path / "schema.yml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    for path in (
        "/api/jobs/{id}/progress/",
        "/api/projects/{slug}/leaderboard/",
        "/api/projects/{slug}/correlation/",
        "/api/me/",
        "/api/projects/{slug}/tasks/next/",
    ):
        assert f"  {path}:" in text, path
